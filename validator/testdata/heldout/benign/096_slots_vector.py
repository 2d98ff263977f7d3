import math
class Vec:
    __slots__ = ("x", "y")
    def __init__(self, x, y): self.x, self.y = x, y
    def __add__(self, o): return Vec(self.x + o.x, self.y + o.y)
    def __sub__(self, o): return Vec(self.x - o.x, self.y - o.y)
    def __mul__(self, k): return Vec(self.x * k, self.y * k)
    __rmul__ = __mul__
    def __abs__(self): return math.hypot(self.x, self.y)
    def __iter__(self): yield self.x; yield self.y
    def __repr__(self): return f"Vec({self.x}, {self.y})"
a, b = Vec(*args.get("a", [1, 2])), Vec(*args.get("b", [3, 4]))
return {"sum": repr(a + b), "diff": list(a - b), "scaled": repr(2 * a), "norm": abs(b)}
