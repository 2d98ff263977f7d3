from dataclasses import dataclass, field, asdict
from typing import List, Optional


@dataclass(order=True)
class Item:
    sort_index: float = field(init=False, repr=False)
    name: str = ""
    price: float = 0.0
    qty: int = 0
    tags: List[str] = field(default_factory=list)

    def __post_init__(self):
        self.sort_index = self.price * self.qty

    @property
    def total(self) -> float:
        return round(self.price * self.qty, 2)


@dataclass
class Inventory:
    items: List[Item] = field(default_factory=list)
    owner: Optional[str] = None

    def add(self, **kw):
        self.items.append(Item(**kw))
        return self

    def value(self):
        return round(sum(i.total for i in self.items), 2)


raw = args.get("items", [
    {"name": "widget", "price": 2.5, "qty": 10, "tags": ["small"]},
    {"name": "gadget", "price": 12.0, "qty": 3},
    {"name": "doohickey", "price": 0.75, "qty": 100, "tags": ["bulk", "cheap"]},
])
inv = Inventory(owner=args.get("owner", "warehouse-1"))
for r in raw:
    inv.add(**r)
ranked = sorted(inv.items, reverse=True)
return {
    "owner": inv.owner,
    "value": inv.value(),
    "ranked": [i.name for i in ranked],
    "items": [asdict(i) for i in inv.items],
}
