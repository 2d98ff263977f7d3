"""Summarise a list of events by their 'type' field."""
from collections import Counter, defaultdict

events = args.get("events") or [
    {"type": "click", "id": 1, "site": "home"},
    {"type": "view", "id": 2, "site": "home"},
    {"type": "click", "id": 3, "site": "shop"},
    {"type": "error", "id": 4, "site": "shop", "traceback": "line 3"},
]
counts = Counter()
by_site = defaultdict(list)
errors = []
for event in events:
    type = event.get("type", "unknown")
    id = event.get("id")
    counts[type] += 1
    by_site[event.get("site", "?")].append(id)
    if type == "error":
        errors.append({"id": id, "traceback": event.get("traceback", "")})
return {
    "counts": dict(counts),
    "by_site": {k: sorted(v) for k, v in by_site.items()},
    "errors": errors,
    "most_common": counts.most_common(1)[0][0] if counts else None,
}
