from datetime import date, timedelta
start = date.fromisoformat(args.get("start", "2024-01-31"))
count = int(args.get("count", 6))
def add_months(d, n):
    m = d.month - 1 + n
    y, m = d.year + m // 12, m % 12 + 1
    nxt = date(y + (m == 12), m % 12 + 1, 1)
    return date(y, m, min(d.day, (nxt - timedelta(days=1)).day))
monthly = [add_months(start, i).isoformat() for i in range(count)]
weekly = [(start + timedelta(weeks=i)).strftime("%a %d %b") for i in range(count)]
return {"monthly": monthly, "weekly": weekly, "iso_week": start.isocalendar()[1]}
