import csv
import statistics

data = args.get("csv", """name,dept,salary
alice,eng,120000
bob,eng,95000
carol,sales,70000
dan,sales,82000
erin,ops,64000
frank,eng,130000
""")
reader = csv.DictReader(data.strip().splitlines())
by_dept = {}
for row in reader:
    by_dept.setdefault(row["dept"], []).append(int(row["salary"]))
summary = {}
for dept, vals in sorted(by_dept.items()):
    summary[dept] = {
        "n": len(vals),
        "mean": statistics.mean(vals),
        "median": statistics.median(vals),
        "stdev": round(statistics.stdev(vals), 2) if len(vals) > 1 else 0.0,
    }
all_vals = [v for vals in by_dept.values() for v in vals]
return {"by_dept": summary, "overall_median": statistics.median(all_vals)}
