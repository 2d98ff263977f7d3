class Trie:
    def __init__(self):
        self.root = {}
        self.size = 0

    def insert(self, word, weight=1):
        node = self.root
        for ch in word:
            node = node.setdefault(ch, {})
        if "$" not in node:
            self.size += 1
        node["$"] = node.get("$", 0) + weight

    def _walk(self, node, prefix):
        for ch, child in node.items():
            if ch == "$":
                yield prefix, child
            else:
                yield from self._walk(child, prefix + ch)

    def complete(self, prefix, k=5):
        node = self.root
        for ch in prefix:
            if ch not in node:
                return []
            node = node[ch]
        found = sorted(self._walk(node, prefix), key=lambda p: (-p[1], p[0]))
        return [w for w, _ in found[:k]]

    def __len__(self):
        return self.size

    def __contains__(self, word):
        node = self.root
        for ch in word:
            node = node.get(ch)
            if node is None:
                return False
        return "$" in node


t = Trie()
for w in args.get("words", ["class", "classify", "classic", "clash", "clay", "dir", "dirty", "format", "formal", "form", "class"]):
    t.insert(w)
return {"cl": t.complete(args.get("prefix", "cla")), "form": t.complete("form"), "size": len(t), "has_dir": "dir" in t, "has_di": "di" in t}
