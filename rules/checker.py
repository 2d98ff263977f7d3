# checker.py — the in-child re-validation with CPython's own `ast`.
#
# Owned by validator/. It reads the SAME rules table as the Go checker
# (validator/rules.json, passed in as a parsed dict): no list of names lives in
# this file. It is concatenated in front of runner.py and run with
# `python3 -I -S`, so it defines only `_orq_`-prefixed top-level names, has no
# import-time side effects, and imports stdlib modules inside the function.
#
# Contract: the Go checker must reject everything this checker rejects (Go may
# be stricter); validator/diff_test.go keeps the two in step.


# The rules-derived sets, built once per rules table (not per call): a
# fork-server zygote builds them before it forks, so every child starts with
# them. Holds a reference to the table it was built from (identity check).
_orq_check_prepared = []

# The tree of the last body _orq_check accepted, handed to the runner so it
# does not parse the same source twice: {"code": code, "tree": tree}. The
# runner takes it (pop) only for the identical source string.
_orq_check_accepted = {}


class _orq_check_Pos:
    """A position for a finding that has no node."""

    def __init__(self, line, col):
        self.lineno, self.col_offset = line, col


def _orq_check_prepare(rules):
    """Return the sets and names _orq_check derives from a rules table,
    computed once per table object."""
    import ast

    for r, prep in _orq_check_prepared:
        if r is rules:
            return prep
    texts = rules.get("rules") or {}
    limits = rules.get("limits") or {}
    dunder = rules.get("dunder") or {}
    private = rules.get("private") or {}
    reserved = rules.get("reserved_prefixes") or {}
    import_rules = rules.get("import_rules") or {}
    prep = {
        "texts": texts,
        "forbidden_names": rules.get("forbidden_names") or {},
        "dunder_allow": frozenset(dunder.get("allow") or ()),
        "dunder_attr_rule": dunder.get("attribute_rule") or "dunder-attribute",
        "dunder_name_rule": dunder.get("name_rule") or "dunder-name",
        "private_allow": frozenset(private.get("allow") or ()),
        "private_rule": private.get("rule") or "private-attribute",
        "reserved_prefixes": tuple(reserved.get("prefixes") or ()),
        "reserved_rule": reserved.get("rule") or "reserved-name",
        "forbidden_attrs": rules.get("forbidden_attributes") or {},
        "attr_name_calls": frozenset(rules.get("attribute_name_calls") or ()),
        "shapes": rules.get("builtin_shapes") or {},
        "surfaces": rules.get("module_surfaces") or {},
        "format_methods": frozenset(rules.get("format_methods") or ()),
        "format_rule": rules.get("format_rule") or "format-string",
        "rule_not_allowed": import_rules.get("not_allowed") or "import-not-allowed",
        "rule_relative": import_rules.get("relative") or "relative-import",
        "rule_star": import_rules.get("star") or "star-import",
        "class_rule": rules.get("class_rule") or "class-definition",
        "class_pattern_rule": rules.get("class_pattern_rule") or "positional-class-pattern",
        "match_self": frozenset(rules.get("match_self_types") or ()),
        "write_rule": rules.get("attribute_write_rule") or "attribute-write",
        "class_keyword_rule": (rules.get("classes") or {}).get("keyword_rule") or "class-keyword",
        "class_builtins": frozenset((rules.get("classes") or {}).get("builtins") or ()),
        "hasattr_dunders": frozenset((rules.get("classes") or {}).get("hasattr_dunders") or ()),
        "own_rules": frozenset((rules.get("classes") or {}).get("own_attribute_rules") or ()),
        "own_dunders": frozenset((rules.get("classes") or {}).get("own_dunders") or ()),
        "surface_rule": (rules.get("import_rules") or {}).get("not_in_surface") or "not-in-surface",
        "class_methods": frozenset(list((rules.get("classes") or {}).get("methods") or ())
                                   + list((rules.get("classes") or {}).get("hooks") or ())),
        "class_hooks": frozenset((rules.get("classes") or {}).get("hooks") or ()),
        "safe_builtins": frozenset(rules.get("safe_builtins") or ()),
        "max_bytes": int(limits.get("max_code_bytes") or 0),
        "max_depth": int(limits.get("max_depth") or 0),
        # node type -> branch of the walk (exact types: ast.parse builds
        # no subclasses)
        "kinds": {
            ast.Name: 1, ast.Attribute: 2, ast.Subscript: 3, ast.Constant: 4,
            ast.FunctionDef: 5, ast.AsyncFunctionDef: 5, ast.ClassDef: 6,
            ast.arg: 7, ast.keyword: 8, ast.Global: 9, ast.Nonlocal: 9,
            ast.ExceptHandler: 10, ast.MatchAs: 10, ast.MatchStar: 10,
            ast.MatchMapping: 11, ast.MatchClass: 12, ast.Import: 13,
            ast.ImportFrom: 14, ast.Call: 15, ast.AnnAssign: 16,
        },
    }
    _orq_check_prepared[:] = [(rules, prep)]
    return prep


def _orq_check(code, allowed_imports, rules, classes=False):
    """Return a list of findings (dicts: rule, message, line, column, snippet)
    for `code`, the body of a function, under `allowed_imports`, with class
    statements allowed when `classes` is true. An empty list means the code
    is accepted."""
    import ast
    import string as _string

    rules = rules or {}
    P = _orq_check_prepare(rules)
    texts = P["texts"]
    forbidden_names = P["forbidden_names"]
    dunder_allow = P["dunder_allow"]
    dunder_attr_rule = P["dunder_attr_rule"]
    dunder_name_rule = P["dunder_name_rule"]
    private_allow = P["private_allow"]
    private_rule = P["private_rule"]
    reserved_prefixes = P["reserved_prefixes"]
    reserved_rule = P["reserved_rule"]
    forbidden_attrs = P["forbidden_attrs"]
    attr_name_calls = P["attr_name_calls"]
    shapes = P["shapes"]
    surfaces = P["surfaces"]

    def check_submodule(parts, i, node):
        # a submodule of a package with a reviewed surface must have its own
        # (or be listed itself: the runner serves it, as its egress view of
        # urllib.request, or refuses it)
        top, path = parts[0], ".".join(parts[:i])
        if top in surfaces and top in allowed and path not in surfaces and path not in allowed:
            add(rule_not_allowed, node, "module %r: only the reviewed parts of %r are "
                "(import %s and use what it offers)" % (path, top, top))

    format_methods = P["format_methods"]
    format_rule = P["format_rule"]
    rule_not_allowed = P["rule_not_allowed"]
    rule_relative = P["rule_relative"]
    rule_star = P["rule_star"]
    class_rule = P["class_rule"]
    rule_class_pattern = P["class_pattern_rule"]
    match_self = P["match_self"]
    write_rule = P["write_rule"]
    class_keyword_rule = P["class_keyword_rule"]
    class_builtins = P["class_builtins"] if classes else frozenset()
    class_methods = P["class_methods"] if classes else frozenset()
    own_rules = P["own_rules"]
    own_dunders = P["own_dunders"] if classes else frozenset()
    hasattr_dunders = P["hasattr_dunders"]
    class_hooks = P["class_hooks"] if classes else frozenset()
    type_name_reads = set()  # ids of x.__class__ nodes read as x.__class__.__name__
    allowed = frozenset(m for m in (allowed_imports or ()) if isinstance(m, str))
    max_bytes = P["max_bytes"]
    max_depth = P["max_depth"]
    kinds = P["kinds"]
    _orq_check_accepted.clear()
    original = code

    findings = []
    lines = None
    bound = []

    def bound_names():
        """Every name the body binds anywhere (assignment, loop, import,
        def, parameter, pattern capture, except/with alias; not global,
        nonlocal or del)."""
        return bindings()[0]

    def bindings():
        """(every bound name, the names only class statements bind, the
        names import statements bind, {name: module} of the names only
        import statements bind, each to one module): one walk, on first
        use."""
        if not bound:
            other, classes_, imported_ = set(), set(), set()
            mods = {}
            for n in ast.walk(tree):
                t = type(n)
                if t is ast.Name and isinstance(n.ctx, ast.Store):
                    other.add(n.id)
                elif t is ast.arg:
                    other.add(n.arg)
                elif t is ast.alias:  # only import statements have aliases
                    imported_.add(n.asname or n.name.partition(".")[0])
                elif t is ast.Import:
                    for a in n.names:
                        k = a.asname or a.name.partition(".")[0]
                        m = a.name if a.asname else k
                        mods[k] = m if mods.get(k, m) == m else None
                elif t is ast.ImportFrom and not n.level and n.module:
                    for a in n.names:
                        k, m = a.asname or a.name, n.module + "." + a.name
                        if m in surfaces:
                            mods[k] = m if mods.get(k, m) == m else None
                        else:
                            mods[k] = None
                elif t is ast.ClassDef:
                    classes_.add(n.name)
                elif t in (ast.FunctionDef, ast.AsyncFunctionDef):
                    other.add(n.name)
                elif t in (ast.MatchAs, ast.MatchStar, ast.ExceptHandler) and n.name:
                    other.add(n.name)
                elif t is ast.MatchMapping and n.rest:
                    other.add(n.rest)
            mods = {k: m for k, m in mods.items()
                    if m is not None and k not in other and k not in classes_}
            other |= imported_
            bound.append((frozenset(other | classes_), frozenset(classes_ - other),
                          frozenset(imported_), mods))
        return bound[0]

    def add(rule, node, detail=""):
        nonlocal lines
        text = texts.get(rule) or {}
        msg = text.get("message") or rule
        if detail:
            msg = msg + ": " + detail
        if text.get("fix"):
            msg = msg + "; instead: " + text["fix"]
        line = getattr(node, "lineno", 1) or 1
        col0 = getattr(node, "col_offset", 0) or 0
        if lines is None:
            lines = code.split("\n")
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        # ast columns are UTF-8 byte offsets; findings count characters.
        prefix = text.encode("utf-8")[:col0].decode("utf-8", "replace")
        snippet = ""
        try:
            seg = ast.get_source_segment(code, node)
        except Exception:  # noqa: BLE001
            seg = None
        if seg is None:
            seg = text[len(prefix):]
        snippet = seg.split("\n", 1)[0]
        if len(snippet) > 80:
            snippet = snippet[:80] + "\u2026"
        findings.append({"rule": rule, "message": msg, "line": line,
                         "column": len(prefix) + 1, "snippet": snippet})

    _Pos = _orq_check_Pos

    # --- limits and bytes the parser refuses -------------------------------
    if max_bytes and len(code.encode("utf-8", "surrogatepass")) > max_bytes:
        add("code-too-large", _Pos(1, 0), "%d bytes, the limit is %d"
            % (len(code.encode("utf-8", "surrogatepass")), max_bytes))
        return findings
    if "\0" in code:
        before = code[:code.index("\0")]
        line = before.count("\n") + 1
        add("parse-error", _Pos(line, 0),
            "source code cannot contain null bytes")
        return findings
    # CPython reads "\r\n" and a bare "\r" as line ends (as the Go checker
    # does after normalising).
    code = code.replace("\r\n", "\n").replace("\r", "\n")
    try:
        tree = ast.parse(code, "<sandbox>", "exec")
    except SyntaxError as e:
        add("parse-error", _Pos(e.lineno or 1, max((e.offset or 1) - 1, 0)),
            str(e.msg))
        return findings
    except (ValueError, MemoryError, RecursionError) as e:
        add("parse-error", _Pos(1, 0), "%s: %s" % (type(e).__name__, e))
        return findings

    # --- helpers -------------------------------------------------------------
    def is_dunder(s):
        return len(s) >= 5 and s.startswith("__") and s.endswith("__")

    def is_reserved(s):
        return bool(reserved_prefixes) and s.startswith(reserved_prefixes)

    def attr_rule(name):
        if is_dunder(name):
            return "" if name in dunder_allow else dunder_attr_rule
        r = forbidden_attrs.get(name)
        if r:
            return r
        if name.startswith("_") and name not in private_allow:
            return private_rule
        return ""

    def import_bound():
        """The names the body's import statements bind."""
        return bindings()[2]

    def check_name_shape(name, node):
        if is_dunder(name) and name not in dunder_allow and name not in class_methods:
            add(dunder_name_rule, node, repr(name))
            return True
        if is_reserved(name):
            add(reserved_rule, node, repr(name))
            return True
        return False

    shaped = set()  # ids of Name nodes of reflection builtins in an allowed shape

    def annotation(ann):
        """`type` inside an annotation (dict[str, type]) names the class,
        as in isinstance(x, type): an allowed shape."""
        todo = [ann] if ann is not None else []
        while todo:
            sub = todo.pop()
            if _isinstance(sub, (ast.Call, ast.Lambda)):
                continue  # a call's callee keeps the call's shape rules
            if _isinstance(sub, ast.Name) and shapes.get(sub.id) == "one-argument-or-class-check":
                shaped.add(id(sub))
            todo.extend(ast.iter_child_nodes(sub))

    def check_name(name, node):
        r = forbidden_names.get(name)
        if r and id(node) not in shaped and name not in class_builtins and name not in bound_names():
            add(r, node, repr(name))
            return True
        return check_name_shape(name, node)

    def plain_identifier(v):
        return (bool(v) and v.isascii() and v.isidentifier())

    def check_call(node):
        f = node.func
        if _isinstance(f, ast.Name):
            name = f.id
        elif _isinstance(f, ast.Attribute):
            name = f.attr
        else:
            return
        if name in attr_name_calls:
            for a in list(node.args) + [k.value for k in node.keywords]:
                if _isinstance(a, ast.Starred):
                    continue
                els = a.elts if _isinstance(a, (ast.List, ast.Tuple, ast.Set)) else (a,)
                for el in els:
                    v = fold(el)
                    if v is None:
                        continue
                    for part in v.split("."):
                        if name == "hasattr" and part in hasattr_dunders:
                            continue
                        if attr_rule(part):
                            add("forbidden-string", el, repr(part))
                            skip.add(id(el))
                            break
                        if part in format_methods:
                            add(format_rule, el, "%r read by name formats a template at run time" % part)
                            skip.add(id(el))
                            break
        plain = not node.keywords and not any(_isinstance(a, ast.Starred) for a in node.args)
        if not _isinstance(f, ast.Name) or not plain:
            return
        pos = node.args
        shape = shapes.get(name)
        if shape == "literal-attribute":
            if len(pos) in (2, 3):
                v = fold(pos[1])
                if (v is not None and plain_identifier(v) and not attr_rule(v)
                        and v not in format_methods):
                    shaped.add(id(f))
        elif shape == "one-argument-or-class-check":
            if len(pos) == 1:
                shaped.add(id(f))
        elif shape == "guarded-call":
            shaped.add(id(f))
        if name in ("isinstance", "issubclass") and len(pos) == 2:
            cls = pos[1]
            for el in (cls.elts if _isinstance(cls, ast.Tuple) else (cls,)):
                if _isinstance(el, ast.Name) and shapes.get(el.id) == "one-argument-or-class-check":
                    shaped.add(id(el))

    def method_receiver(v):
        """May code read an ordinary dunder method (__init__) of v? Only
        of super() (no arguments), of a class the body defines (a name bound only by class
        statements) or of a builtin type it does not rebind."""
        if _isinstance(v, ast.Call):
            # zero-argument super() only: super(T, obj) binds T's parent's
            # methods to any obj
            return (_isinstance(v.func, ast.Name) and v.func.id == "super" and not v.args
                    and not v.keywords and "super" not in bound_names())
        if not _isinstance(v, ast.Name):
            return False
        return v.id in class_only_names() or (v.id in P["safe_builtins"] and v.id not in bound_names())

    def class_only_names():
        """The names the body binds only by class statements."""
        return bindings()[1]

    surface_rule = P["surface_rule"]

    def module_of(v):
        """The module v names (a name only imports bind, or a reviewed
        submodule of one: urllib.parse), or None."""
        if _isinstance(v, ast.Name):
            return bindings()[3].get(v.id)
        if _isinstance(v, ast.Attribute):
            m = module_of(v.value)
            if m is not None and m + "." + v.attr in surfaces:
                return m + "." + v.attr
        return None

    def check_surface(m, name, node):
        """m.name of an allowed module with a reviewed surface that does
        not hand out name: refused, with what it does hand out (a
        submodule allowed by name is the runner's to serve: check_submodule)."""
        surface = surfaces.get(m)
        if (surface is None or name in surface or name[:1] == "_" or attr_rule(name)
                or m.partition(".")[0] not in allowed or m + "." + name in allowed):
            return
        offer = sorted(surface)
        more = ", ..." if len(offer) > 12 else ""
        add(surface_rule, node, "%s.%s is not available; %s offers %s%s"
            % (m, name, m, ", ".join(offer[:12]), more))

    def import_rooted(v):
        """Is v a name an import binds, or an attribute chain from one?"""
        while _isinstance(v, ast.Attribute):
            v = v.value
        return _isinstance(v, ast.Name) and v.id in import_bound()

    def attr_allowed(node):
        """Does the attribute read node pass although the attribute rules
        name it? (validator/walk.go attrAllowed says why.)"""
        name = node.attr
        if classes:
            if name in class_methods and (name not in class_hooks or method_receiver(node.value)):
                return True
            if (name[:1] == "_" and not is_dunder(name) and not is_reserved(name)
                    and not import_rooted(node.value)):
                return True
            if forbidden_attrs.get(name) in own_rules and not import_rooted(node.value):
                return True
            # self.__dict__ / cls.__annotations__, read (never assigned):
            # the runner hands out a checked snapshot of an own object's
            if (name in own_dunders and _isinstance(node.ctx, ast.Load)
                    and not import_rooted(node.value)):
                return True
        if name == "__class__" and id(node) in type_name_reads:
            return True
        if forbidden_attrs.get(name) == "module-attribute" and (
                not import_rooted(node.value) or name in allowed):
            return True
        return False

    def check_attr(name, node):
        r = attr_rule(name)
        if r:
            add(r, node, repr(name))
            return True
        return False

    def fold(node, depth=0):
        """The value of a literal string expression, or None."""
        if depth > 50:
            return None
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str):
                return v
            if isinstance(v, bytes):
                return v.decode("latin-1")
            return None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if not (isinstance(v, ast.Constant) and isinstance(v.value, str)):
                    return None
                parts.append(v.value)
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a = fold(node.left, depth + 1)
            if a is None:
                return None
            b = fold(node.right, depth + 1)
            if b is None:
                return None
            return a + b
        return None

    def key_rule(key):
        if is_dunder(key) and key not in dunder_allow:
            return dunder_attr_rule
        if is_reserved(key):
            return reserved_rule
        return ""

    formatter = _string.Formatter()

    def format_traversal(s, depth=0):
        if depth > 4:
            return s
        try:
            parsed = list(formatter.parse(s))
        except (ValueError, TypeError):
            return None  # fails at run time too
        import _string as _cstring
        for _lit, field, spec, _conv in parsed:
            if field is None:
                continue
            # attribute fields ({0.name}) and private index keys ({0[_x]})
            # are refused; index keys into data ({row[name]}) are not
            try:
                _first, rest = _cstring.formatter_field_name_split(field)
                for is_attr, key in rest:
                    if is_attr or (_isinstance(key, str) and key[:1] == "_"):
                        return field
            except ValueError:
                return field
            if spec:
                bad = format_traversal(spec, depth + 1)
                if bad is not None:
                    return bad
        return None

    # --- the walk ------------------------------------------------------------
    # Depth-first, children pushed in ast.iter_child_nodes order (so findings
    # come out in the same order as a walk with ast.iter_child_nodes).
    AST, _isinstance, _list, _getattr, _type = ast.AST, isinstance, list, getattr, type
    Store, Del, Add = ast.Store, ast.Del, ast.Add
    skip = set()
    stack = [(tree, 0)]
    push = stack.append
    pop = stack.pop
    deep = False
    while stack:
        node, depth = pop()
        if max_depth and depth > max_depth:
            if not deep:
                deep = True
                add("nesting-too-deep", node if hasattr(node, "lineno") else _Pos(1, 0),
                    "deeper than %d levels" % max_depth)
            continue
        if skip and id(node) in skip:
            continue

        k = kinds.get(_type(node))
        if k is None:
            pass
        elif k == 1:  # Name
            check_name(node.id, node)
        elif k == 2:  # Attribute
            if node.attr in ("__name__", "__qualname__") and _isinstance(node.value, ast.Attribute):
                type_name_reads.add(id(node.value))
            if not attr_allowed(node):
                check_attr(node.attr, node)
            m = module_of(node.value)
            if m is not None:
                check_surface(m, node.attr, node)
            if node.attr in format_methods:
                # A literal template is checked here; any other is formatted
                # at run time by a formatter with the same rule (_orq_fmt).
                val = fold(node.value)
                if val is not None:
                    bad = format_traversal(val)
                    if bad is not None:
                        add(format_rule, node, "field %r reads an attribute or a private key" % bad)
            # A write to an attribute of an imported module is refused
            # here; any other write is checked at run time (_orq_w).
            if (_isinstance(node.ctx, (Store, Del)) and _isinstance(node.value, ast.Name)
                    and node.value.id in import_bound()):
                add(write_rule, node)
        elif k == 3:  # Subscript
            key = fold(node.slice)
            if key is not None and key_rule(key):
                add("dunder-subscript", node.slice, repr(key))
                skip.add(id(node.slice))
        elif k == 15:  # Call
            check_call(node)
        elif k == 5:  # FunctionDef, AsyncFunctionDef
            annotation(node.returns)
            check_name(node.name, node)
        elif k == 6:  # ClassDef
            if not classes:
                add(class_rule, node)
            else:
                for kw in node.keywords:
                    if kw.arg is None or kw.arg == "metaclass" or kw.arg[:1] == "_":
                        add(class_keyword_rule, kw)
            check_name(node.name, node)
        elif k == 7:  # arg
            annotation(node.annotation)
            check_name(node.arg, node)
        elif k == 16:  # AnnAssign
            annotation(node.annotation)
        elif k == 8:  # keyword
            if node.arg is not None:
                check_name_shape(node.arg, node)
        elif k == 9:  # Global, Nonlocal
            for name in node.names:
                check_name(name, node)
        elif k == 10:  # ExceptHandler, MatchAs, MatchStar
            if node.name:
                check_name(node.name, node)
        elif k == 11:  # MatchMapping
            if node.rest:
                check_name(node.rest, node)
        elif k == 12:  # MatchClass
            for a in node.kwd_attrs:
                check_attr(a, node)
            if node.patterns and not (isinstance(node.cls, ast.Name) and (
                    (node.cls.id in match_self and node.cls.id not in bound_names())
                    or (classes and node.cls.id in class_only_names()))):
                add(rule_class_pattern, node, "case %s(...)" % (
                    node.cls.id if isinstance(node.cls, ast.Name) else "<dotted>"))
        elif k == 13:  # Import
            for al in node.names:
                parts = al.name.split(".")
                if parts[0] not in allowed:
                    add(rule_not_allowed, node, "module %r" % parts[0])
                for i, p in enumerate(parts[1:], 2):
                    check_attr(p, node)
                    check_submodule(parts, i, node)
                if al.asname:
                    check_name(al.asname, node)
        elif k == 14:  # ImportFrom
            if node.level:
                add(rule_relative, node)
            else:
                parts = (node.module or "").split(".")
                if parts[0] not in allowed:
                    add(rule_not_allowed, node, "module %r" % parts[0])
                for i, p in enumerate(parts[1:], 2):
                    check_attr(p, node)
                    check_submodule(parts, i, node)
            for al in node.names:
                if al.name == "*":
                    add(rule_star, node)
                    continue
                if not node.level and node.module:
                    check_surface(node.module, al.name, node)
                # from m import NAME reads m.NAME: a forbidden builtin name
                # is refused here even though the import binds it, unless
                # m's reviewed surface hands out that name (re.compile).
                if not check_attr(al.name, node):
                    if forbidden_names.get(al.name) and al.name not in surfaces.get(node.module or "", ()):
                        add(forbidden_names[al.name], node, repr(al.name))
                    else:
                        check_name(al.name, node)
                if al.asname:
                    check_name(al.asname, node)

        # = ast.iter_child_nodes(node), inlined
        d = depth + 1
        for f in node._fields:
            v = _getattr(node, f, None)
            if _isinstance(v, AST):
                push((v, d))
            elif _isinstance(v, _list):
                for item in v:
                    if _isinstance(item, AST):
                        push((item, d))

    if not findings and code == original:
        _orq_check_accepted["code"] = original
        _orq_check_accepted["tree"] = tree
    findings.sort(key=lambda f: (f["line"], f["column"]))
    return findings
