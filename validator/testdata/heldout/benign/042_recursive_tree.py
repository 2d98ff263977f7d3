tree = args.get("tree", {
    "name": "root", "size": 1,
    "children": [
        {"name": "src", "size": 10, "children": [
            {"name": "main.py", "size": 120},
            {"name": "util.py", "size": 45},
        ]},
        {"name": "docs", "size": 2, "children": [{"name": "index.md", "size": 30}]},
        {"name": "README", "size": 8},
    ],
})


def total(node):
    return node.get("size", 0) + sum(total(c) for c in node.get("children", []))


def depth(node):
    kids = node.get("children", [])
    return 1 + (max(map(depth, kids)) if kids else 0)


def render(node, prefix=""):
    lines = [f"{prefix}{node['name']} ({total(node)})"]
    kids = node.get("children", [])
    for i, c in enumerate(kids):
        branch = "`-- " if i == len(kids) - 1 else "|-- "
        sub = render(c, "")
        lines.append(prefix + branch + sub[0])
        pad = "    " if i == len(kids) - 1 else "|   "
        lines.extend(prefix + pad + s for s in sub[1:])
    return lines


def find(node, pred, path=()):
    path = path + (node["name"],)
    if pred(node):
        yield "/".join(path)
    for c in node.get("children", []):
        yield from find(c, pred, path)


return {
    "total": total(tree),
    "depth": depth(tree),
    "render": render(tree),
    "py_files": list(find(tree, lambda n: n["name"].endswith(".py"))),
}
