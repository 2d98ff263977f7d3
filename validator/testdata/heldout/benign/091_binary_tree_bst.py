class BST:
    def __init__(self):
        self.root = None
    class _Node:
        def __init__(self, k):
            self.k, self.l, self.r = k, None, None
    def insert(self, k):
        def ins(n):
            if n is None:
                return BST._Node(k)
            if k < n.k:
                n.l = ins(n.l)
            elif k > n.k:
                n.r = ins(n.r)
            return n
        self.root = ins(self.root)
    def __iter__(self):
        def walk(n):
            if n:
                yield from walk(n.l)
                yield n.k
                yield from walk(n.r)
        return walk(self.root)
    def height(self, n="root"):
        n = self.root if n == "root" else n
        return 0 if n is None else 1 + max(self.height(n.l), self.height(n.r))
t = BST()
for k in args.get("keys", [50, 30, 70, 20, 40, 60, 80, 35]):
    t.insert(k)
return {"inorder": list(t), "height": t.height()}
