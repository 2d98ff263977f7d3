import heapq
import math

edges = args.get("edges", [
    ["A", "B", 4], ["A", "C", 2], ["B", "C", 5], ["B", "D", 10],
    ["C", "E", 3], ["E", "D", 4], ["D", "F", 11],
])
source = args.get("source", "A")
graph = {}
for u, v, w in edges:
    graph.setdefault(u, []).append((v, w))
    graph.setdefault(v, []).append((u, w))
dist = {n: math.inf for n in graph}
prev = {}
dist[source] = 0
heap = [(0, source)]
while heap:
    d, u = heapq.heappop(heap)
    if d > dist[u]:
        continue
    for v, w in graph[u]:
        nd = d + w
        if nd < dist[v]:
            dist[v] = nd
            prev[v] = u
            heapq.heappush(heap, (nd, v))


def path_to(t):
    p = [t]
    while p[-1] in prev:
        p.append(prev[p[-1]])
    return p[::-1]


return {n: {"dist": (None if math.isinf(d) else d), "path": path_to(n)} for n, d in sorted(dist.items())}
