# The runner's saved-globals encoding (py/keep.py) checked from Python:
# round trips of plain data, refusal of everything else, the bounds, and a
# brief fuzz of the decoder with mutated and random nodes (it returns plain
# data or refuses; it never raises and never builds another type).
#
# Usage: python3 keepcheck.py KEEP_PROGRAM [SEED [ROUNDS]]; prints "ok" and
# counts. numpy and pandas cases run when the interpreter has them.
import json
import math
import random
import sys

prog = open(sys.argv[1]).read()
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
ns = {"__name__": "keepcheck"}
exec(compile(prog, "<runner>", "exec"), ns)
save, load, Refused = ns["_orq_keep_save"], ns["_orq_keep_load"], ns["_orq_KeepRefused"]
try:
    import numpy as np
except ImportError:
    np = None
try:
    import pandas as pd
except ImportError:
    pd = None

PLAIN = (type(None), bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)


def same(a, b):
    """Equal with the same exact types all the way down (nan equals nan)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is complex:
        return same(a.real, b.real) and same(a.imag, b.imag)
    if type(a) in (set, frozenset):
        return len(a) == len(b) and all(any(same(x, y) for y in b) for x in a)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return len(a) == len(b) and all(same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    if np is not None and type(a) is np.ndarray:
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if pd is not None and type(a) in (pd.DataFrame, pd.Series):
        try:
            (pd.testing.assert_frame_equal if type(a) is pd.DataFrame else pd.testing.assert_series_equal)(a, b)
            return True
        except AssertionError:
            return False
    return a == b


def roundtrip(g):
    """Save g, through JSON, into a fresh dict; returns (out, kept, not_kept)."""
    saved = save(dict(g, __builtins__={}, __name__="__sandbox__"))
    wire = json.loads(json.dumps(saved["globals"]))
    out = {}
    kept, not_kept = load(out, wire)
    assert kept == saved["kept"], (kept, saved["kept"])
    assert not not_kept, not_kept
    return out, saved["kept"], saved["not_kept"]


def rand_value(r, depth=0):
    k = r.randrange(14 if depth < 4 else 8)
    if k == 0:
        return None
    if k == 1:
        return r.random() < 0.5
    if k == 2:
        return r.choice([0, -1, 1 << r.randrange(200), -(1 << 70) + r.randrange(9)])
    if k == 3:
        return r.choice([0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"), r.random() * 1e300, 5e-324])
    if k == 4:
        return complex(r.random(), -r.random())
    if k == 5:
        return "".join(chr(r.choice([r.randrange(32, 127), r.randrange(0x80, 0x10FFFF)])) for _ in range(r.randrange(8)))
    if k == 6:
        return bytes(r.randrange(256) for _ in range(r.randrange(8)))
    if k == 7:
        return "a\ud800" if r.random() < 0.5 else bytearray(b"\x00\x01")
    items = [rand_value(r, depth + 1) for _ in range(r.randrange(5))]
    hashable = [x for x in items if type(x) in (type(None), bool, int, float, complex, str, bytes)]
    if k in (8, 9):
        return items
    if k == 10:
        return tuple(items)
    if k == 11:
        return {x: rand_value(r, depth + 1) for x in hashable}
    if k == 12:
        return set(hashable)
    return frozenset(hashable)


def check_plain(v, depth=0):
    """v is built only of the closed list of types."""
    assert depth < 40
    t = type(v)
    if np is not None and t is np.ndarray:
        assert not v.dtype.hasobject or v.ndim == 1, v.dtype
        return
    if np is not None and isinstance(v, np.generic):
        assert type(v).__module__ == "numpy"
        return
    if pd is not None and t in (pd.DataFrame, pd.Series):
        return
    assert t in PLAIN, t
    if t in (list, tuple, set, frozenset):
        for x in v:
            check_plain(x, depth + 1)
    if t is dict:
        for k, x in v.items():
            check_plain(k, depth + 1)
            check_plain(x, depth + 1)


def mutate(r, node):
    """node with one random change (a tag, an argument, a shape)."""
    if type(node) is list and node and r.random() < 0.7:
        node = list(node)
        i = r.randrange(len(node))
        node[i] = mutate(r, node[i])
        return node
    return r.choice([["q"], [], "s", 7, None, ["i", "zz"], ["f", "x"], ["d", [[["l", []], ["n"]]]],
                     ["e", [["l", []]]], ["y", "!!"], ["a", "|O", [1], "AAAAAAAAAAA="], ["a", "<i8", [3], "AA=="],
                     ["g", "V8", "AA=="], ["df", [["s", "a"]], ["ri", 0, 2, 0, ["n"]], [["ol", [["n"]]]]],
                     ["sr", ["n"], ["ix", ["n"], ["ol", [["s", "x"]]]], ["ol", [["n"], ["n"]]]],
                     ["t", [["t", [["t", [["t", []]]]]]]] * 1, ["i", "-" + "f" * 40], ["S", "2A=="]])


r = random.Random(seed)
count = {"roundtrips": 0, "mutations": 0, "refusals": 0}

# Round trips of random plain data.
for _ in range(rounds):
    g = {"v%d" % i: rand_value(r) for i in range(r.randrange(1, 4))}
    out, kept, not_kept = roundtrip(g)
    assert not not_kept, not_kept
    for name in g:
        assert same(g[name], out[name]), (name, g[name], out[name])
    count["roundtrips"] += 1

# What is not plain data is refused and named.


class Sub(int):
    pass


class Obj:
    pass


def gen():
    yield 1


cyc = []
cyc.append(cyc)
deep = []
for _ in range(40):
    deep = [deep]
refused = {"f": lambda: 1, "fn": same, "cls": Obj, "inst": Obj(), "mod": json, "gen": gen(),
           "file": sys.stdin, "sub": Sub(3), "subdict": type("D", (dict,), {})(), "cyc": cyc, "deep": deep,
           "inlist": [1, Obj()], "big": "x" * (13 << 20), "many": [None] * 1000001, "rng": range(3)}
res = save(dict(refused, x=41))
assert res["kept"] == ["x"], res["kept"]
assert sorted(res["not_kept"]) == sorted(refused), res["not_kept"]
count["refusals"] += len(refused)

# Together past the bound: the later names are not kept.
res = save({"a": "x" * (7 << 20), "b": "y" * (7 << 20)})
assert res["kept"] == ["a"] and list(res["not_kept"]) == ["b"], (res["kept"], res["not_kept"])

# Loading refuses names that are not a global's.
out = {}
kept, not_kept = load(out, {"__builtins__": ["n"], "not a name": ["n"], "ok": ["n"]})
assert kept == ["ok"] and sorted(not_kept) == ["__builtins__", "not a name"], (kept, not_kept)
try:
    load({}, ["l", []])
    raise AssertionError("a list of globals was loaded")
except Refused:
    pass

# numpy and pandas, when importable.
if np is not None:
    arrays = {"i": np.arange(12, dtype=np.int64).reshape(3, 4), "f": np.array([1.5, np.nan, -np.inf], dtype=np.float32),
              "b": np.array([True, False]), "u": np.array(["ab", "é"]), "dt": np.array(["2024-01-02"], dtype="datetime64[ns]"),
              "c": np.array([1 + 2j]), "empty": np.zeros((0, 3)), "fortran": np.asfortranarray(np.arange(6).reshape(2, 3)),
              "scalar": np.float64(2.5), "iscalar": np.int32(-7)}
    out, kept, _ = roundtrip(arrays)
    for name in arrays:
        assert same(arrays[name], out[name]), name
    res = save({"obj": np.array([1, "a"], dtype=object), "rec": np.zeros(2, dtype=[("a", "<i4"), ("b", "O")]),
                "sub": np.zeros(2).view(type("A", (np.ndarray,), {}))})
    assert res["kept"] == [] and sorted(res["not_kept"]) == ["obj", "rec", "sub"], res
if pd is not None:
    frames = {"df": pd.DataFrame({"a": [1, 2, 3], "b": [0.5, np.nan, 2.0], "s": ["x", None, "z"], "t": [True, False, True]}),
              "ix": pd.DataFrame({"v": [1.0, 2.0]}, index=pd.Index(["r1", "r2"], name="row")),
              "dates": pd.DataFrame({"d": pd.to_datetime(["2024-01-01", "2024-02-01"])}),
              "series": pd.Series([3, 4], name="n", index=pd.RangeIndex(10, 14, 2)),
              "grouped": pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]}).groupby("k")["v"].sum(),
              "intkeys": pd.DataFrame({"k": [1, 2, 1], "v": [1.0, 2.0, 3.0]}).groupby("k")["v"].sum(),
              "intcols": pd.DataFrame({1: [1.5], 2: [2.5]}),
              "timeseries": pd.DataFrame({"v": [1, 2]}, index=pd.DatetimeIndex(["2024-01-01", "2024-01-02"]))}
    out, kept, _ = roundtrip(frames)
    for name in frames:
        assert same(frames[name], out[name]), (name, frames[name], out[name])
    res = save({"cat": pd.DataFrame({"c": pd.Categorical(["a", "b"])}), "multi": pd.DataFrame({"a": [1]}, index=pd.MultiIndex.from_tuples([(1, 2)])),
                "objcol": pd.DataFrame({"o": [[1], [2]]}), "tz": pd.Series(pd.to_datetime(["2024-01-01"]).tz_localize("UTC"))})
    assert res["kept"] == [] and sorted(res["not_kept"]) == ["cat", "multi", "objcol", "tz"], res

# Fuzz the decoder: mutated encodings of random values, and mutations of
# the numpy and pandas nodes; load never raises and builds only plain data.
seeds = [save({"v": rand_value(r)})["globals"]["v"] for _ in range(50)]
for _ in range(rounds):
    node = mutate(r, r.choice(seeds))
    out = {}
    kept, not_kept = load(out, json.loads(json.dumps({"v": node})))
    if kept:
        check_plain(out["v"])
    count["mutations"] += 1
print("ok", json.dumps(count), "numpy" if np is not None else "-", "pandas" if pd is not None else "-")
