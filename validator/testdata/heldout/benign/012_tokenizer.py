import re
from typing import Iterator, NamedTuple


class Token(NamedTuple):
    kind: str
    value: str
    pos: int


TOKEN_SPEC = [
    ("NUMBER", r"\d+(?:\.\d*)?"),
    ("IDENT", r"[A-Za-z_]\w*"),
    ("OP", r"[+\-*/^()]"),
    ("SKIP", r"\s+"),
    ("MISMATCH", r"."),
]
compile = re.compile
master = compile("|".join(f"(?P<{name}>{pat})" for name, pat in TOKEN_SPEC))


def tokenize(src: str) -> Iterator[Token]:
    for m in master.finditer(src):
        kind = m.lastgroup
        if kind == "SKIP":
            continue
        if kind == "MISMATCH":
            raise SyntaxError(f"unexpected {m.group()!r} at {m.start()}")
        yield Token(kind, m.group(), m.start())


class Parser:
    PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "^": 3}

    def __init__(self, tokens, env):
        self.tokens = list(tokens)
        self.i = 0
        self.env = env

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def next(self):
        tok = self.peek()
        self.i += 1
        return tok

    def atom(self):
        tok = self.next()
        if tok is None:
            raise SyntaxError("unexpected end")
        if tok.kind == "NUMBER":
            return float(tok.value)
        if tok.kind == "IDENT":
            return float(self.env.get(tok.value, 0))
        if tok.value == "(":
            v = self.expr(0)
            self.next()
            return v
        if tok.value == "-":
            return -self.atom()
        raise SyntaxError(f"bad token {tok}")

    def expr(self, min_prec):
        lhs = self.atom()
        while True:
            tok = self.peek()
            if tok is None or tok.kind != "OP" or tok.value not in self.PREC:
                break
            prec = self.PREC[tok.value]
            if prec < min_prec:
                break
            self.next()
            rhs = self.expr(prec + (0 if tok.value == "^" else 1))
            if tok.value == "+":
                lhs += rhs
            elif tok.value == "-":
                lhs -= rhs
            elif tok.value == "*":
                lhs *= rhs
            elif tok.value == "/":
                lhs /= rhs
            else:
                lhs **= rhs
        return lhs


src = args.get("expr", "2 * (x + 3) ^ 2 - y / 4")
env = args.get("env", {"x": 1, "y": 8})
try:
    toks = list(tokenize(src))
    value = Parser(toks, env).expr(0)
    return {"tokens": [t._asdict() for t in toks], "value": value}
except (SyntaxError, ZeroDivisionError) as e:
    return {"error": type(e).__name__, "message": str(e)}
