records = args.get("records", [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 1, "v": "c"}, {"id": 3}])
seen, dupes, unique = set(), [], []
for r in records:
    id = r.get("id")
    if id in seen:
        dupes.append(id)
        continue
    seen.add(id)
    unique.append(r)
return {"unique": unique, "dupes": dupes}
