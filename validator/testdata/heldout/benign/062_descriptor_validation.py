class Typed:
    def __init__(self, kind, minimum=None):
        self.kind = kind
        self.minimum = minimum

    def __set_name__(self, owner, name):
        self.name = name
        self.private = "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return getattr(obj, self.private, None)

    def __set__(self, obj, value):
        if not isinstance(value, self.kind):
            raise TypeError(f"{self.name} must be {self.kind.__name__}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{self.name} must be >= {self.minimum}")
        setattr(obj, self.private, value)


class Order:
    qty = Typed(int, minimum=1)
    price = Typed(float, minimum=0.0)
    sku = Typed(str)

    def __init__(self, sku, qty, price):
        self.sku = sku
        self.qty = qty
        self.price = price

    def __repr__(self):
        return f"Order({self.sku!r}, {self.qty}, {self.price})"


out = []
for spec in args.get("orders", [["A", 2, 9.5], ["B", 0, 1.0], ["C", 1, "free"], ["D", 3, 0.0]]):
    try:
        out.append(repr(Order(*spec)))
    except (TypeError, ValueError) as e:
        out.append(f"{type(e).__name__}: {e}")
return out
