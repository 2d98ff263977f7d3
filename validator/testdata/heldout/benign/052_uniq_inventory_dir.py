listing = args.get("listing", [
    {"path": "/a/b/c.txt", "size": 10},
    {"path": "/a/b/d.txt", "size": 20},
    {"path": "/a/e.log", "size": 5},
    {"path": "/f/g/h/i.py", "size": 100},
])
tree = {}
for entry in listing:
    parts = entry["path"].strip("/").split("/")
    dir = tree
    for p in parts[:-1]:
        dir = dir.setdefault(p, {})
    dir[parts[-1]] = entry["size"]


def du(node):
    if isinstance(node, int):
        return node
    return sum(du(v) for v in node.values())


def walk(node, prefix=""):
    for name, child in sorted(node.items()):
        path = f"{prefix}/{name}"
        if isinstance(child, dict):
            yield path + "/", du(child)
            yield from walk(child, path)
        else:
            yield path, child


ext_totals = {}
for entry in listing:
    ext = entry["path"].rsplit(".", 1)[-1]
    ext_totals[ext] = ext_totals.get(ext, 0) + entry["size"]
return {"tree": tree, "du": dict(walk(tree)), "by_ext": ext_totals}
