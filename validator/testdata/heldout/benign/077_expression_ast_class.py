from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class BinOp:
    op: str
    left: "Expr"
    right: "Expr"


Expr = Union[Num, Var, BinOp]


def evaluate(e, env):
    match e:
        case Num(value=v):
            return v
        case Var(name=n):
            return env[n]
        case BinOp("+", l, r):
            return evaluate(l, env) + evaluate(r, env)
        case BinOp("*", l, r):
            return evaluate(l, env) * evaluate(r, env)
        case BinOp("-", l, r):
            return evaluate(l, env) - evaluate(r, env)
    raise ValueError(f"bad node {e!r}")


def simplify(e):
    if isinstance(e, BinOp):
        l, r = simplify(e.left), simplify(e.right)
        if isinstance(l, Num) and isinstance(r, Num):
            return Num(evaluate(BinOp(e.op, l, r), {}))
        if e.op == "*" and (l == Num(0) or r == Num(0)):
            return Num(0)
        if e.op == "*" and l == Num(1):
            return r
        if e.op == "+" and l == Num(0):
            return r
        return BinOp(e.op, l, r)
    return e


def show(e):
    if isinstance(e, Num):
        return f"{e.value:g}"
    if isinstance(e, Var):
        return e.name
    return f"({show(e.left)} {e.op} {show(e.right)})"


tree = BinOp("+", BinOp("*", Num(1), Var("x")), BinOp("*", BinOp("+", Num(2), Num(3)), Var("y")))
tree2 = BinOp("*", Num(0), Var("z"))
env = args.get("env", {"x": 4, "y": 2})
return {"expr": show(tree), "value": evaluate(tree, env), "simplified": show(simplify(tree)), "zero": show(simplify(tree2))}
