from dataclasses import dataclass, field, asdict, replace
from typing import List, Optional


@dataclass
class Address:
    street: str
    city: str
    zip: str = ""


@dataclass
class Customer:
    id: int
    name: str
    addresses: List[Address] = field(default_factory=list)
    type: str = "regular"
    notes: Optional[str] = None

    @classmethod
    def from_dict(cls, d):
        addrs = [Address(**a) for a in d.pop("addresses", [])]
        return cls(addresses=addrs, **d)


raw = args.get("customer", {"id": 7, "name": "Ola", "addresses": [{"street": "Main 1", "city": "Oslo"}], "type": "vip"})
c = Customer.from_dict(dict(raw))
c2 = replace(c, name=c.name.upper(), notes="copied")
return {"c": asdict(c), "c2": asdict(c2), "eq": c == c2}
