import re

doc = args.get("doc", {
    "store": {
        "book": [
            {"title": "A", "price": 8.95, "class": "ref"},
            {"title": "B", "price": 12.99, "class": "fiction"},
            {"title": "C", "price": 22.99, "class": "fiction", "isbn": "0-553"},
        ],
        "bicycle": {"color": "red", "price": 19.95},
    },
    "id": "store-1",
})
queries = args.get("queries", ["store.book[0].title", "store.book[*].price", "store.bicycle.color", "store.book[-1].isbn", "id", "store.nope.x"])
token_re = re.compile(r"([^.\[\]]+)|\[(\*|-?\d+)\]")


def query(node, path):
    nodes = [node]
    for name, idx in token_re.findall(path):
        nxt = []
        for n in nodes:
            if name:
                if isinstance(n, dict) and name in n:
                    nxt.append(n[name])
            elif idx == "*":
                if isinstance(n, list):
                    nxt.extend(n)
            else:
                i = int(idx)
                if isinstance(n, list) and -len(n) <= i < len(n):
                    nxt.append(n[i])
        nodes = nxt
    return nodes


return {q: query(doc, q) for q in queries}
