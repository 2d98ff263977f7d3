from datetime import date, datetime, timedelta

start = args.get("start", "2024-01-15")
end = args.get("end", "2024-03-01")
d0 = datetime.strptime(start, "%Y-%m-%d").date()
d1 = datetime.strptime(end, "%Y-%m-%d").date()
delta = d1 - d0
business = 0
cur = d0
while cur < d1:
    if cur.weekday() < 5:
        business += 1
    cur += timedelta(days=1)
months = (d1.year - d0.year) * 12 + d1.month - d0.month
format = args.get("format", "%A %d %B %Y")
return {
    "days": delta.days,
    "weeks": delta.days // 7,
    "business_days": business,
    "months": months,
    "start_pretty": d0.strftime(format),
    "end_iso": d1.isoformat(),
    "leap": (d0.year % 4 == 0 and d0.year % 100 != 0) or d0.year % 400 == 0,
}
