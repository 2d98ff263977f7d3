from datetime import date, timedelta

year = int(args.get("year", 2024))
month = int(args.get("month", 2))
first = date(year, month, 1)
nxt = date(year + (month == 12), month % 12 + 1, 1)
days = (nxt - first).days
weeks = []
week = [None] * first.weekday()
for d in range(1, days + 1):
    week.append(d)
    if len(week) == 7:
        weeks.append(week)
        week = []
if week:
    weeks.append(week + [None] * (7 - len(week)))
header = "Mo Tu We Th Fr Sa Su"
text = [first.strftime("%B %Y").center(len(header)), header]
for w in weeks:
    text.append(" ".join("  " if d is None else f"{d:2d}" for d in w))
fridays_13 = [str(date(year, m, 13)) for m in range(1, 13) if date(year, m, 13).weekday() == 4]
last_monday = max(d for d in (first + timedelta(i) for i in range(days)) if d.weekday() == 0)
return {"calendar": "\n".join(text), "weeks": len(weeks), "friday13": fridays_13, "last_monday": last_monday.isoformat()}
