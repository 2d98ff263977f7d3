from typing import Dict, List, Optional, Protocol, TypedDict, Union


class Shape(Protocol):
    def area(self) -> float: ...


class Rect:
    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h

    def area(self) -> float:
        return self.w * self.h


class Circle:
    def __init__(self, r: float) -> None:
        self.r = r

    def area(self) -> float:
        return 3.141592653589793 * self.r ** 2


class ShapeSpec(TypedDict, total=False):
    kind: str
    w: float
    h: float
    r: float


def build(spec: ShapeSpec) -> Optional[Union[Rect, Circle]]:
    kind = spec.get("kind")
    if kind == "rect":
        return Rect(spec.get("w", 1), spec.get("h", 1))
    if kind == "circle":
        return Circle(spec.get("r", 1))
    return None


def total_area(shapes: List[Shape]) -> float:
    return sum(s.area() for s in shapes)


specs: List[ShapeSpec] = args.get("shapes", [{"kind": "rect", "w": 2, "h": 3}, {"kind": "circle", "r": 1}, {"kind": "hex"}])
built = [build(s) for s in specs]
shapes = [s for s in built if s is not None]
areas: Dict[str, float] = {f"{type(s).__name__}#{i}": round(s.area(), 3) for i, s in enumerate(shapes)}
return {"areas": areas, "total": round(total_area(shapes), 3), "skipped": sum(b is None for b in built)}
