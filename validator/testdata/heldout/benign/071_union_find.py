class DSU:
    def __init__(self):
        self.parent = {}
        self.rank = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        self.rank.setdefault(x, 0)
        if self.parent[x] != x:
            self.parent[x] = self.find(self.parent[x])
        return self.parent[x]

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self.rank[ra] < self.rank[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.rank[ra] += self.rank[ra] == self.rank[rb]
        return True


edges = args.get("edges", [["a", "b", 1], ["b", "c", 4], ["a", "c", 3], ["c", "d", 2], ["d", "e", 7], ["b", "e", 5]])
dsu = DSU()
mst = [e for e in sorted(edges, key=lambda e: e[2]) if dsu.union(e[0], e[1])]
groups = {}
for n in dsu.parent:
    groups.setdefault(dsu.find(n), []).append(n)
return {"mst": mst, "weight": sum(e[2] for e in mst), "components": len(groups)}
