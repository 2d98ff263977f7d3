class Counter2:
	"""Tab-indented class."""
	def __init__(self):
		self.n = 0
	def inc(self, by=1):
		self.n += by
		return self
	def __repr__(self):
		return f"Counter2({self.n})"


def spaced(values):
    c = Counter2()
    for v in values:
        c.inc(v)
    return c


return {"counter": repr(spaced(args.get("values", [1, 2, 3]))), "ok": True}
