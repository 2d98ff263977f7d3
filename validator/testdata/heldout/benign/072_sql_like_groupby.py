from itertools import groupby
from operator import itemgetter
import statistics

rows = args.get("rows", [
    {"region": "EU", "product": "x", "units": 10, "price": 2.0},
    {"region": "EU", "product": "y", "units": 3, "price": 10.0},
    {"region": "US", "product": "x", "units": 7, "price": 2.5},
    {"region": "US", "product": "x", "units": 1, "price": 2.5},
    {"region": "APAC", "product": "z", "units": 4, "price": 8.0},
])
key = itemgetter("region", "product")
result = []
for (region, product), grp in groupby(sorted(rows, key=key), key=key):
    grp = list(grp)
    revenue = sum(r["units"] * r["price"] for r in grp)
    result.append({"region": region, "product": product, "rows": len(grp), "units": sum(r["units"] for r in grp), "revenue": revenue, "avg_price": statistics.mean(r["price"] for r in grp)})
having = [r for r in result if r["revenue"] > args.get("min_revenue", 15)]
having.sort(key=itemgetter("revenue"), reverse=True)
return {"grouped": result, "having": having}
