from collections import OrderedDict


class LRU:
    def __init__(self, capacity):
        self.capacity = capacity
        self.data = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key):
        if key in self.data:
            self.data.move_to_end(key)
            self.hits += 1
            return self.data[key]
        self.misses += 1
        return None

    def put(self, key, value):
        self.data[key] = value
        self.data.move_to_end(key)
        if len(self.data) > self.capacity:
            self.data.popitem(last=False)

    def __repr__(self):
        return f"LRU({list(self.data.items())})"

    def __len__(self):
        return len(self.data)


cache = LRU(int(args.get("capacity", 3)))
log = []
for op in args.get("ops", ["put a 1", "put b 2", "get a", "put c 3", "put d 4", "get b", "get c", "get a"]):
    parts = op.split()
    if parts[0] == "put":
        cache.put(parts[1], int(parts[2]))
    else:
        log.append([parts[1], cache.get(parts[1])])
return {"gets": log, "state": repr(cache), "hits": cache.hits, "misses": cache.misses}
