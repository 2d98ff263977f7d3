from collections import deque

graph = args.get("graph", {
    "A": ["B", "C"],
    "B": ["D"],
    "C": ["D", "E"],
    "D": ["F"],
    "E": ["F"],
    "F": [],
})
start = args.get("start", "A")
goal = args.get("goal", "F")


def bfs(g, s, t):
    prev = {s: None}
    q = deque([s])
    while q:
        node = q.popleft()
        if node == t:
            break
        for nxt in g.get(node, []):
            if nxt not in prev:
                prev[nxt] = node
                q.append(nxt)
    if t not in prev:
        return None
    path = []
    while t is not None:
        path.append(t)
        t = prev[t]
    return path[::-1]


def topo(g):
    indeg = {n: 0 for n in g}
    for n in g:
        for m in g[n]:
            indeg[m] = indeg.get(m, 0) + 1
    q = deque(sorted(n for n, d in indeg.items() if d == 0))
    order = []
    while q:
        n = q.popleft()
        order.append(n)
        for m in g.get(n, []):
            indeg[m] -= 1
            if indeg[m] == 0:
                q.append(m)
    return order


return {"path": bfs(graph, start, goal), "topo": topo(graph)}
