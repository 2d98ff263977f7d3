from datetime import datetime, timezone, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

when = args.get("when", "2024-06-01T12:00:00")
zones = args.get("zones", ["UTC", "Europe/London", "America/New_York", "Asia/Tokyo", "Not/AZone"])
base = datetime.fromisoformat(when).replace(tzinfo=timezone.utc)
out = {}
for z in zones:
    try:
        tz = ZoneInfo(z)
        local = base.astimezone(tz)
        out[z] = {"local": local.isoformat(), "offset_h": local.utcoffset().total_seconds() / 3600}
    except (ZoneInfoNotFoundError, ValueError) as e:
        fixed = base.astimezone(timezone(timedelta(hours=0)))
        out[z] = {"error": type(e).__name__, "fallback": fixed.isoformat()}
return out
