def handle(cmd):
    match cmd:
        case {"type": "move", "x": int(x), "y": int(y)}:
            return f"move to {x},{y}"
        case {"type": "say", "text": str(text)} if text:
            return f"say {text!r}"
        case {"type": "batch", "items": [first, *rest]}:
            return f"batch of {1 + len(rest)} starting {handle(first)}"
        case {"type": "quit"}:
            return "quit"
        case [op, *operands] if op in ("add", "mul"):
            vals = [float(o) for o in operands]
            if op == "add":
                return sum(vals)
            prod = 1.0
            for v in vals:
                prod *= v
            return prod
        case str() as s:
            return f"raw:{s}"
        case None:
            return "nothing"
        case _:
            return "unknown"


commands = args.get("commands", [
    {"type": "move", "x": 1, "y": 2},
    {"type": "say", "text": "hi"},
    {"type": "say", "text": ""},
    {"type": "batch", "items": [{"type": "quit"}, {"type": "move", "x": 0, "y": 0}]},
    ["add", 1, 2, 3.5],
    ["mul", 2, 4],
    "hello",
    None,
    42,
])
return [handle(c) for c in commands]
