

class Store:
    """Simple in-memory store with transactions."""

    def __init__(self):
        self.data = {}
        self.stack = []

    def set(self, k, v):
        if self.stack:
            self.stack[-1].setdefault(k, self.data.get(k, Store._MISSING))
        self.data[k] = v

    def get(self, k):
        return self.data.get(k)

    def delete(self, k):
        if k in self.data:
            self.set(k, None)
            del self.data[k]

    def begin(self):
        self.stack.append({})

    def rollback(self):
        if not self.stack:
            raise RuntimeError("no transaction")
        undo = self.stack.pop()
        for k, v in undo.items():
            if v is Store._MISSING:
                self.data.pop(k, None)
            else:
                self.data[k] = v

    def commit(self):
        self.stack.clear()

    _MISSING = object()


s = Store()
out = []
script = args.get("script", [
    ["set", "a", 1], ["begin"], ["set", "a", 2], ["set", "b", 3], ["get", "a"],
    ["rollback"], ["get", "a"], ["get", "b"], ["rollback"], ["begin"], ["delete", "a"], ["commit"], ["get", "a"],
])
for cmd, *rest in script:
    try:
        res = getattr(s, cmd)(*rest)
        if cmd == "get":
            out.append(res)
    except RuntimeError as e:
        out.append(f"{type(e).__name__}: {e}")
return {"outputs": out, "final": s.data}
