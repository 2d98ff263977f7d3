import json
from datetime import date, datetime
from decimal import Decimal
from enum import Enum


class Color(Enum):
    RED = 1
    GREEN = 2


class Encoder(json.JSONEncoder):
    def default(self, o):
        if isinstance(o, (date, datetime)):
            return {"__type__": "date", "value": o.isoformat()}
        if isinstance(o, Decimal):
            return {"__type__": "decimal", "value": str(o)}
        if isinstance(o, Enum):
            return {"__type__": "enum", "value": o.name}
        if isinstance(o, set):
            return sorted(o)
        return super().default(o)


def hook(d):
    t = d.get("__type__")
    if t == "date":
        return date.fromisoformat(d["value"])
    if t == "decimal":
        return Decimal(d["value"])
    return d


payload = {"when": date(2024, 2, 29), "price": Decimal("9.99"), "color": Color.RED, "tags": {"b", "a"}, "n": args.get("n", 1)}
text = json.dumps(payload, cls=Encoder, sort_keys=True, indent=None)
back = json.loads(text, object_hook=hook)
errs = []
try:
    json.dumps({"x": object()}, cls=Encoder)
except TypeError as e:
    errs.append(type(e).__name__)
return {"text": text, "when_back": str(back["when"]), "price_back": str(back["price"]), "errors": errs}
