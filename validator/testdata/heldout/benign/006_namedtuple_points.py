import math
from typing import NamedTuple


class Point(NamedTuple):
    x: float
    y: float

    def dist(self, other: "Point") -> float:
        return math.hypot(self.x - other.x, self.y - other.y)

    def __repr__(self):
        return f"P({self.x:g}, {self.y:g})"


pts = [Point(*p) for p in args.get("points", [[0, 0], [3, 4], [6, 8], [1, 1], [-2, 5]])]
origin = Point(0, 0)
nearest = min(pts[1:], key=origin.dist) if len(pts) > 1 else None
perimeter = sum(a.dist(b) for a, b in zip(pts, pts[1:] + pts[:1]))
centroid = Point(sum(p.x for p in pts) / len(pts), sum(p.y for p in pts) / len(pts))
return {
    "nearest": repr(nearest),
    "perimeter": round(perimeter, 4),
    "centroid": centroid._asdict(),
    "fields": list(Point._fields),
}
