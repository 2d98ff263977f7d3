# keep.py — a stateful session's globals saved as plain data and loaded
# back (ops "save_globals" and "load_globals" of a session's call,
# runner.OpSaveGlobals and runner.OpLoadGlobals). Not part of Program: a
# session's interpreter gets it in its request (runner.Request.Keep) and
# compiles it into the runner's globals before its first call.
#
# The encoding is a JSON tree written and read only by the functions here,
# never pickle: loading it builds values of a closed list of exact types
# and runs no code of the data's choosing. A node is a list whose first
# item names its type:
#   ["n"] None                  ["b", bool]
#   ["i", hex]   int            ["f", float.hex()]    ["c", re, im]
#   ["s", str]                  ["S", base64 of UTF-8 with surrogates]
#   ["y", base64] bytes         ["Y", base64] bytearray
#   ["l", [..]] list   ["t", [..]] tuple   ["e", [..]] set   ["z", [..]] frozenset
#   ["d", [[key, value], ..]] dict
#   ["a", dtype, [shape], base64] numpy.ndarray of a plain dtype (its bytes)
#   ["g", dtype, base64] a numpy scalar of a plain dtype
#   ["sr", name, index, column] pandas.Series
#   ["df", [names], index, [columns]] pandas.DataFrame
#   index: ["ri", start, stop, step, name] RangeIndex | ["ix", name, column]
#   column: an "a" node, or ["ol", [scalar nodes]] for an object column of
#   None/bool/int/float/str values
# Every type is checked with `type(v) is T`: a subclass (which may define
# methods) is not plain data. numpy and pandas are used only when the
# interpreter has imported them already (sys.modules): the runner imports
# nothing for the data.

# The bounds of one interpreter's saved globals: nesting, values, and the
# bytes of the encoding (rtproto.MaxSavedStateBytes for every agent's
# together: the runtime reads MCP frames of at most 16 MB).
_orq_keep_max_depth = 32
_orq_keep_max_nodes = 1000000
_orq_keep_max_bytes = 12 << 20
_orq_keep_dtype_kinds = "biufcSUmM"


class _orq_KeepRefused(Exception):
    """A value that is not plain data (its reason), or past a bound."""


def _orq_keep_budget():
    return {"nodes": 0, "bytes": 0}


def _orq_keep_spend(budget, nodes, nbytes):
    budget["nodes"] += nodes
    budget["bytes"] += nbytes
    if budget["nodes"] > _orq_keep_max_nodes:
        raise _orq_KeepRefused("more than %d values" % _orq_keep_max_nodes)
    if budget["bytes"] > _orq_keep_max_bytes:
        raise _orq_KeepRefused("more than %d bytes" % _orq_keep_max_bytes)


def _orq_keep_dtype_ok(np, dt):
    return (type(dt).__module__.startswith("numpy") and dt.kind in _orq_keep_dtype_kinds
            and dt.fields is None and dt.subdtype is None and not dt.hasobject)


def _orq_keep_encode(v, budget, depth=0):
    """The node of v, or _orq_KeepRefused naming why it is not plain data."""
    import base64
    import sys

    if depth > _orq_keep_max_depth:
        raise _orq_KeepRefused("nested deeper than %d" % _orq_keep_max_depth)
    _orq_keep_spend(budget, 1, 0)
    t = type(v)
    if v is None:
        return ["n"]
    if t is bool:
        return ["b", v]
    if t is int:
        _orq_keep_spend(budget, 0, v.bit_length() // 8)
        return ["i", format(v, "x")]
    if t is float:
        return ["f", v.hex()]
    if t is complex:
        return ["c", v.real.hex(), v.imag.hex()]
    if t is str:
        _orq_keep_spend(budget, 0, len(v))
        try:
            v.encode("utf-8")
            return ["s", v]
        except UnicodeEncodeError:
            return ["S", base64.b64encode(v.encode("utf-8", "surrogatepass")).decode("ascii")]
    if t is bytes or t is bytearray:
        _orq_keep_spend(budget, 0, len(v) * 4 // 3)
        return ["y" if t is bytes else "Y", base64.b64encode(v).decode("ascii")]
    if t in (list, tuple, set, frozenset):
        tag = {list: "l", tuple: "t", set: "e", frozenset: "z"}[t]
        return [tag, [_orq_keep_encode(x, budget, depth + 1) for x in v]]
    if t is dict:
        return ["d", [[_orq_keep_encode(k, budget, depth + 1), _orq_keep_encode(x, budget, depth + 1)]
                      for k, x in v.items()]]
    np = sys.modules.get("numpy")
    if np is not None:
        if t is np.ndarray:
            return _orq_keep_array(np, v, budget)
        if isinstance(v, np.generic) and t is getattr(v, "dtype", None).type and t.__module__ == "numpy":
            if not _orq_keep_dtype_ok(np, v.dtype):
                raise _orq_KeepRefused("a numpy scalar of dtype %s" % v.dtype)
            raw = np.asarray(v).tobytes()
            _orq_keep_spend(budget, 0, len(raw))
            return ["g", v.dtype.str, base64.b64encode(raw).decode("ascii")]
    pd = sys.modules.get("pandas")
    if pd is not None and np is not None:
        if t is pd.DataFrame:
            cols = list(v.columns)
            if type(v.columns) not in _orq_keep_index_types(pd) or len(set(cols)) != len(cols):
                raise _orq_KeepRefused("a DataFrame whose columns are not one level of distinct names")
            names = [_orq_keep_scalar(c, budget) for c in cols]
            data = [_orq_keep_column(np, pd, v.iloc[:, i], budget) for i in range(len(cols))]
            return ["df", names, _orq_keep_index(np, pd, v.index, budget), data]
        if t is pd.Series:
            return ["sr", _orq_keep_scalar(v.name, budget), _orq_keep_index(np, pd, v.index, budget),
                    _orq_keep_column(np, pd, v, budget)]
    raise _orq_KeepRefused("a %s is not plain data" % t.__name__)


def _orq_keep_scalar(v, budget):
    """A label or an object column's value: None, bool, int, float, str."""
    if v is not None and type(v) not in (bool, int, float, str):
        raise _orq_KeepRefused("a label or value of type %s" % type(v).__name__)
    return _orq_keep_encode(v, budget, _orq_keep_max_depth)


def _orq_keep_array(np, a, budget):
    import base64

    if not _orq_keep_dtype_ok(np, a.dtype):
        raise _orq_KeepRefused("an array of dtype %s" % a.dtype)
    raw = np.ascontiguousarray(a).tobytes()
    _orq_keep_spend(budget, 0, len(raw) * 4 // 3)
    return ["a", a.dtype.str, [int(n) for n in a.shape], base64.b64encode(raw).decode("ascii")]


def _orq_keep_column(np, pd, s, budget):
    dt = s.dtype
    if type(dt) is np.dtype and dt.kind == "O":
        return ["ol", [_orq_keep_scalar(x, budget) for x in s.tolist()]]
    if type(dt) is not np.dtype:
        raise _orq_KeepRefused("a pandas column of dtype %s" % dt)
    return _orq_keep_array(np, s.to_numpy(), budget)


def _orq_keep_index_types(pd):
    """pandas' own one-level index classes of plain values (pandas 1.x has
    a class per numeric dtype; pd.Index of such values makes them)."""
    names = ("Index", "Int64Index", "UInt64Index", "Float64Index", "DatetimeIndex", "TimedeltaIndex")
    return tuple(getattr(pd, n) for n in names if isinstance(getattr(pd, n, None), type))


def _orq_keep_index(np, pd, ix, budget):
    if type(ix) is pd.RangeIndex:
        return ["ri", ix.start, ix.stop, ix.step, _orq_keep_scalar(ix.name, budget)]
    if type(ix) not in _orq_keep_index_types(pd):
        raise _orq_KeepRefused("a pandas index of type %s" % type(ix).__name__)
    return ["ix", _orq_keep_scalar(ix.name, budget), _orq_keep_column(np, pd, pd.Series(ix), budget)]


def _orq_keep_decode(node, budget, depth=0):
    """The value of node, built from the closed list of types only;
    _orq_KeepRefused for anything else (a node this code never writes)."""
    import base64
    import sys

    if depth > _orq_keep_max_depth + 1:
        raise _orq_KeepRefused("nested deeper than %d" % _orq_keep_max_depth)
    if type(node) is not list or not node or type(node[0]) is not str:
        raise _orq_KeepRefused("a malformed node")
    _orq_keep_spend(budget, 1, 0)
    tag, rest = node[0], node[1:]

    def arg(i, typ):
        if len(rest) <= i or type(rest[i]) is not typ:
            raise _orq_KeepRefused("a malformed %r node" % tag)
        return rest[i]

    if tag == "n":
        return None
    if tag == "b":
        return arg(0, bool)
    if tag == "i":
        s = arg(0, str)
        if len(s) > 2 * _orq_keep_max_bytes:
            raise _orq_KeepRefused("an int too large")
        _orq_keep_spend(budget, 0, len(s) // 2)
        return int(s, 16)
    if tag == "f":
        return float.fromhex(arg(0, str))
    if tag == "c":
        return complex(float.fromhex(arg(0, str)), float.fromhex(arg(1, str)))
    if tag == "s":
        s = arg(0, str)
        _orq_keep_spend(budget, 0, len(s))
        return s
    if tag in ("S", "y", "Y"):
        s = arg(0, str)
        _orq_keep_spend(budget, 0, len(s))
        raw = base64.b64decode(s, validate=True)
        if tag == "S":
            return raw.decode("utf-8", "surrogatepass")
        return raw if tag == "y" else bytearray(raw)
    if tag in ("l", "t", "e", "z"):
        items = [_orq_keep_decode(x, budget, depth + 1) for x in arg(0, list)]
        try:
            return {"l": list, "t": tuple, "e": set, "z": frozenset}[tag](items)
        except TypeError:
            raise _orq_KeepRefused("an unhashable member of a set")
    if tag == "d":
        out = {}
        for pair in arg(0, list):
            if type(pair) is not list or len(pair) != 2:
                raise _orq_KeepRefused("a malformed 'd' node")
            k = _orq_keep_decode(pair[0], budget, depth + 1)
            try:
                out[k] = _orq_keep_decode(pair[1], budget, depth + 1)
            except TypeError:
                raise _orq_KeepRefused("an unhashable dict key")
        return out
    if tag not in ("a", "g", "ol", "sr", "df"):
        raise _orq_KeepRefused("an unknown node %r" % tag)
    np = sys.modules.get("numpy")
    if np is None:
        raise _orq_KeepRefused("numpy is not imported in this interpreter")
    if tag == "a":
        dt = _orq_keep_load_dtype(np, arg(0, str))
        shape = arg(1, list)
        if any(type(n) is not int or n < 0 for n in shape) or len(shape) > 32:
            raise _orq_KeepRefused("a malformed array shape")
        s = arg(2, str)
        _orq_keep_spend(budget, 0, len(s))
        raw = base64.b64decode(s, validate=True)
        count = 1
        for n in shape:
            count *= n
        if count * dt.itemsize != len(raw):
            raise _orq_KeepRefused("an array whose bytes do not fit its shape")
        return np.frombuffer(raw, dtype=dt).reshape(shape).copy()
    if tag == "g":
        dt = _orq_keep_load_dtype(np, arg(0, str))
        raw = base64.b64decode(arg(1, str), validate=True)
        if len(raw) != dt.itemsize:
            raise _orq_KeepRefused("a numpy scalar of the wrong size")
        return np.frombuffer(raw, dtype=dt)[0]
    if tag == "ol":
        return _orq_keep_labels(arg(0, list), budget)
    pd = sys.modules.get("pandas")
    if pd is None:
        raise _orq_KeepRefused("pandas is not imported in this interpreter")
    if tag == "sr":
        if len(rest) != 3:
            raise _orq_KeepRefused("a malformed 'sr' node")
        name = _orq_keep_label(rest[0], budget)
        ix = _orq_keep_load_index(np, pd, rest[1], budget)
        col = _orq_keep_load_column(np, rest[2], budget)
        if len(col) != len(ix):
            raise _orq_KeepRefused("a Series whose index does not fit its values")
        return pd.Series(col, index=ix, name=name, copy=False)
    if tag == "df":
        names = [_orq_keep_label(n, budget) for n in arg(0, list)]
        if len(rest) != 3 or type(rest[2]) is not list or len(rest[2]) != len(names):
            raise _orq_KeepRefused("a malformed 'df' node")
        ix = _orq_keep_load_index(np, pd, rest[1], budget)
        cols = [_orq_keep_load_column(np, c, budget) for c in rest[2]]
        if any(len(c) != len(ix) for c in cols) or len(set(names)) != len(names):
            raise _orq_KeepRefused("a DataFrame whose columns do not fit its index")
        return pd.DataFrame({n: c for n, c in zip(names, cols)}, index=ix)


def _orq_keep_load_dtype(np, s):
    if len(s) > 16:
        raise _orq_KeepRefused("a malformed dtype")
    try:
        dt = np.dtype(s)
    except (TypeError, ValueError):
        raise _orq_KeepRefused("a malformed dtype")
    if not _orq_keep_dtype_ok(np, dt):
        raise _orq_KeepRefused("an array of dtype %s" % dt)
    return dt


def _orq_keep_label(node, budget):
    v = _orq_keep_decode(node, budget, _orq_keep_max_depth)
    if v is not None and type(v) not in (bool, int, float, str):
        raise _orq_KeepRefused("a label of type %s" % type(v).__name__)
    return v


def _orq_keep_labels(nodes, budget):
    import sys

    np = sys.modules.get("numpy")
    out = np.empty(len(nodes), dtype=object)
    for i, n in enumerate(nodes):
        out[i] = _orq_keep_label(n, budget)
    return out


def _orq_keep_load_column(np, node, budget):
    if type(node) is not list or not node or node[0] not in ("a", "ol"):
        raise _orq_KeepRefused("a malformed column")
    col = _orq_keep_decode(node, budget, _orq_keep_max_depth)
    if col.ndim != 1:
        raise _orq_KeepRefused("a column that is not one-dimensional")
    return col


def _orq_keep_load_index(np, pd, node, budget):
    if type(node) is not list or not node:
        raise _orq_KeepRefused("a malformed index")
    if node[0] == "ri":
        if len(node) != 5 or any(type(x) is not int for x in node[1:4]) or node[3] == 0:
            raise _orq_KeepRefused("a malformed RangeIndex")
        return pd.RangeIndex(node[1], node[2], node[3], name=_orq_keep_label(node[4], budget))
    if node[0] == "ix" and len(node) == 3:
        return pd.Index(_orq_keep_load_column(np, node[2], budget), name=_orq_keep_label(node[1], budget))
    raise _orq_KeepRefused("a malformed index")


def _orq_keep_user_names(g):
    """The user's globals of a session's globals dict g: all but what the
    runner itself puts there."""
    return sorted(k for k in g if type(k) is str and k not in ("__builtins__", "__name__"))


def _orq_keep_save(g):
    """{"globals": {name: node}, "kept": [names], "not_kept": {name: reason}}
    of globals dict g, within the bounds (a name past them is not kept)."""
    import json

    budget = _orq_keep_budget()
    nodes, not_kept, size = {}, {}, 0
    for name in _orq_keep_user_names(g):
        trial = dict(budget)
        try:
            node = _orq_keep_encode(g[name], trial)
            n = len(json.dumps(node, ensure_ascii=True, separators=(",", ":"))) + len(name) + 4
            if size + n > _orq_keep_max_bytes:
                raise _orq_KeepRefused("the saved globals would pass %d bytes" % _orq_keep_max_bytes)
            size += n
            nodes[name] = node
        except _orq_KeepRefused as e:
            not_kept[name] = str(e)
            continue
        except RecursionError:
            not_kept[name] = "nested too deeply"
            continue
        except Exception as e:  # noqa: BLE001 - a value that breaks while read
            not_kept[name] = "unreadable: %s" % type(e).__name__
            continue
        budget.update(trial)
    return {"globals": nodes, "kept": sorted(nodes), "not_kept": not_kept}


def _orq_keep_load(g, saved):
    """Put saved's globals (a _orq_keep_save "globals" object) into globals
    dict g. Returns (kept, not_kept): the names loaded and those refused."""
    if type(saved) is not dict:
        raise _orq_KeepRefused("saved globals are not an object")
    budget = _orq_keep_budget()
    kept, not_kept = [], {}
    for name in sorted(saved):
        if type(name) is not str or not name.isidentifier() or name in ("__builtins__", "__name__"):
            not_kept[str(name)[:64]] = "not a global's name"
            continue
        try:
            v = _orq_keep_decode(saved[name], budget)
        except (_orq_KeepRefused, ValueError, TypeError, OverflowError, RecursionError) as e:
            not_kept[name] = str(e) if type(e) is _orq_KeepRefused else "malformed: %s" % type(e).__name__
            continue
        g[name] = v
        kept.append(name)
    return kept, not_kept


def _orq_keep_serve(cell, state):
    """A session call of op "save_globals" or "load_globals" (its args: the
    saved globals): the response bytes, output {"kept", "not_kept"} and,
    when saving, "globals". Never raises."""
    import json

    def respond(ok, output=None, error=None):
        r = {"success": ok}
        if ok:
            r["output"] = output
        else:
            r["error_kind"], r["error"] = "internal", error
        return json.dumps(r, ensure_ascii=True, separators=(",", ":")).encode("ascii")

    try:
        # Armed as a call is: the values read (a DataFrame's columns) run
        # their types' methods. The C hook is armed for good by the
        # session's first call (before it, no code of the user's exists).
        if not _orq_core:
            _orq_audit_arm(cell.get("rules") or {}, frozenset(), None)
        g = state["globals"]
        if cell.get("op") == "save_globals":
            out = _orq_keep_save(g)
        else:
            kept, not_kept = _orq_keep_load(g, cell.get("args"))
            out = {"kept": kept, "not_kept": not_kept}
        _orq_audit_disarm()
        return respond(True, out)
    except MemoryError:
        _orq_audit_disarm()
        return respond(False, error="MemoryError while handling the saved globals")
    except BaseException as e:  # noqa: BLE001
        _orq_audit_disarm()
        return respond(False, error="saved globals: %s: %s" % (type(e).__name__, e))
