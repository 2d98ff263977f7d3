import re
from collections import defaultdict

lists = args.get("lists", ["2 apples, 1 bread, milk", "3 apples, 2 milk, eggs (12)", "1 bread"])
item_re = re.compile(r"^\s*(?:(\d+)\s+)?([a-z ]+?)\s*(?:\((\d+)\))?\s*$", re.I)
totals = defaultdict(int)
unparsed = []
for lst in lists:
    for raw in lst.split(","):
        m = item_re.match(raw)
        if not m:
            unparsed.append(raw)
            continue
        qty = int(m.group(1) or 1) * int(m.group(3) or 1)
        name = m.group(2).lower().rstrip("s") if m.group(2).lower().endswith("s") else m.group(2).lower()
        totals[name] += qty
return {"totals": dict(sorted(totals.items())), "unparsed": unparsed}
