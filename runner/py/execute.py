# execute.py — the runner, part 2 of 4: one execution (check, compile, run, respond),
# the accepted-body cache and the spawn-mode driver.
#
# Part of the runner program; see imports.py for how the parts are joined.

def _orq_execute(req, state=None):
    """Validate and run one request. Returns the response as UTF-8 bytes
    (one JSON object). Never raises. The audit hook is disarmed on the way
    out, so a host process that runs many requests (tier 0) keeps working.
    `state`: a stateful session's (_orq_session_serve)."""
    try:
        return _orq_execute_one(req, state)
    finally:
        _orq_audit_disarm()


def _orq_execute_child(req, state=None):
    """_orq_execute in a process of its own (a subprocess or fork-server
    child): a MemoryError that escapes the runner's own handlers (no memory
    left even to build the response) ends the process with
    _orq_exit_memory, which Go reports as a memory kill."""
    try:
        return _orq_execute(req, state)
    except MemoryError:
        import os
        os._exit(_orq_exit_memory)


# A little ballast released on MemoryError so the runner can still build
# its response after user code exhausted the address space. Allocated once
# and reused (a fork-server zygote allocates it before it forks, so a child
# starts with it and never touches its pages); a call that frees it makes
# the next call allocate a new one.
_orq_ballast = []


def _orq_ballast_ready():
    if not _orq_ballast:
        _orq_ballast.append(bytearray(1 << 18))


# Bodies the in-interpreter checker accepted and compiled, with their
# compiled `<module>` wrapper (code objects are immutable; each execution
# still runs them in fresh globals), per rules table: [rules, {(code,
# allowed imports): code object}]. The verdict is a pure function of the
# body, the allowlist and the table, so a hit skips the parse, the check
# and the compile. A fork-server zygote fills it for bodies Go asks it to
# warm (_orq_warm), so its children start with them; tier 0 fills it as it
# runs. Bounded, oldest out first; sources longer than 16 KB are not kept.
_orq_accepted = [None, {}]
_orq_accepted_max = 128
_orq_accepted_max_bytes = _orq_warm_max_bytes


def _orq_accept(code, allowed_imports, rules, classes=False, stateful=False):
    """Check `code` under `allowed_imports` and `rules` (class statements
    allowed when `classes`) with the in-interpreter checker and compile its
    wrapper. Returns (code object, None) when accepted, else (None, (error
    kind, message, findings)).

    `stateful`: the wrapper declares global what the body binds at top
    level (its locals but args), so it persists in a session's globals."""
    import ast

    allowed = frozenset(m for m in allowed_imports if isinstance(m, str))
    classes = classes is True
    stateful = stateful is True
    if _orq_accepted[0] is rules:
        hit = _orq_accepted[1].get((code, allowed, classes, stateful))
        if hit is not None:
            return hit, None

    # 1. Re-validate with CPython's own ast (the rules table is the one
    #    validator/rules.json). Fail closed if the checker itself breaks.
    _orq_check_accepted.clear()
    try:
        findings = _orq_check(code, allowed_imports, rules, classes)
    except Exception as e:  # noqa: BLE001
        return None, ("internal", "in-sandbox validator failed: %s: %s"
                      % (type(e).__name__, e), None)
    # The tree the checker parsed and accepted, when it parsed exactly this
    # source (see checker.py); else parse here.
    checked_code = _orq_check_accepted.pop("code", None)
    checked_tree = _orq_check_accepted.pop("tree", None)
    if findings:
        f0 = findings[0]
        return None, ("validation", "validation failed: %s:%s: %s: %s" % (
            f0.get("line"), f0.get("column"), f0.get("rule"),
            f0.get("message")), findings)

    # 2. Build `def <module>(args): <body>` from the body's own AST, so
    #    line N of the body is reported as line N, string literals are not
    #    re-indented and tracebacks read "in <module>", as for a script (a
    #    name no body can write; nothing renames the code afterwards, which
    #    an armed session could not do).
    filename = "<sandbox>"
    try:
        if checked_tree is not None and checked_code == code:
            body = checked_tree
        else:
            body = ast.parse(code, filename, "exec")
    except SyntaxError as e:
        return None, _orq_syntax_error(e)
    # Every parsed node has its location; the new ones get what
    # ast.fix_missing_locations would give them (1, 0, 1, 0), without a
    # walk over the whole tree.
    loc = {"lineno": 1, "col_offset": 0, "end_lineno": 1, "end_col_offset": 0}
    own = ()
    if classes:
        own_rules = (rules.get("classes") or {}).get("own_attribute_rules") or ()
        own = [n for n, r in (rules.get("forbidden_attributes") or {}).items() if r in own_rules]
    _orq_guard_writes(body, (rules.get("private") or {}).get("allow") or (), own,
                      (rules.get("classes") or {}).get("own_dunders") or ())
    # (a match statement needs the word: most bodies skip the walk)
    bad = _orq_guard_patterns(body, rules) if "match" in code else None
    if bad is not None:
        return None, ("validation", "validation failed: %s:%s: class-pattern-attribute: %s"
                      % bad, [{"rule": "class-pattern-attribute", "message": bad[2],
                               "line": bad[0], "column": bad[1], "snippet": ""}])
    fn_def = ast.FunctionDef(
        name="<module>",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg="args", **loc)],
                           vararg=None, kwonlyargs=[], kw_defaults=[],
                           kwarg=None, defaults=[]),
        body=body.body or [ast.Pass(**loc)],
        decorator_list=[], returns=None, type_comment=None, **loc)
    module = ast.Module(body=[fn_def], type_ignores=[])
    try:
        compiled = compile(module, filename, "exec", dont_inherit=True)
    except SyntaxError as e:  # e.g. `await` outside async, bad nonlocal
        return None, _orq_syntax_error(e)
    if stateful:
        fn_code = next(c for c in compiled.co_consts
                       if type(c) is type(compiled) and c.co_name == "<module>")
        names = sorted(set(fn_code.co_varnames[fn_code.co_argcount:])
                       | (set(fn_code.co_cellvars) - {"args"}))
        if names:
            fn_def.body = [ast.Global(names=names, **loc)] + fn_def.body
            try:
                compiled = compile(module, filename, "exec", dont_inherit=True)
            except SyntaxError as e:
                return None, _orq_syntax_error(e)
    if len(code) <= _orq_accepted_max_bytes:
        if _orq_accepted[0] is not rules:
            _orq_accepted[:] = [rules, {}]
        cache = _orq_accepted[1]
        if len(cache) >= _orq_accepted_max:
            del cache[next(iter(cache))]
        cache[(code, allowed, classes, stateful)] = compiled
    return compiled, None


def _orq_guard_writes(tree, private_allow=(), own_names=(), own_dunders=()):
    """Route what the static rules leave to run time through the run-time
    guards:
      - every attribute write and delete: `o.a = v` becomes
        `_orq_w(o).a = v` (in every target position: assignment, augmented,
        for, with, del, comprehension). The static rules already refused
        dunder and module-attribute targets; _orq_w refuses objects the
        body did not make;
      - every private attribute read (a leading '_', not dunder, not
        rules.json private.allow): `o._x` becomes `_orq_own(o, '_x')._x`,
        which refuses what the body did not define; so is every read of
        own_names (with classes: the names of rules.json
        classes.own_attribute_rules: self.co_code and self.f_back of the
        user's own objects, never a frame's or a generator's);
      - every `o.format` / `o.format_map` read whose o is not a string
        literal (the static rules checked those): `_orq_fmt(o, 'format')`
        (see _orq_format_guard); every `o.__setattr__` read: `_orq_sa(o)`;
        every read of own_dunders (rules.json classes.own_dunders:
        `o.__dict__`, `o.__annotations__`): `_orq_odict(o, '__dict__')`."""
    import ast

    AST, Attribute, Load, Store, Del, Name, Call, Constant = (
        ast.AST, ast.Attribute, ast.Load, ast.Store, ast.Del, ast.Name, ast.Call, ast.Constant)
    kinds = (Attribute, Load, Constant, Name, Call)
    fr = _orq_format_read
    fmt = ("format", "format_map", "__setattr__") + tuple(
        n for n in own_dunders if n in ("__dict__", "__annotations__"))
    private_allow = frozenset(private_allow)
    own_names = frozenset(own_names)
    # One walk: each node's own children are queued before the node is
    # rewritten (a rewrite wraps an original child in a new call, which is
    # not walked; the original is), and a node's rewrite reads and changes
    # only its own fields, so the order of the walk does not matter.
    stack = [tree]
    pop, push = stack.pop, stack.append
    while stack:
        parent = pop()
        t = type(parent)
        if t is Attribute:
            v = parent.value
            push(v)
            a = parent.attr
            write = type(parent.ctx) in (Store, Del)
            private = (a[:1] == "_" and a not in private_allow
                       and not (a[:2] == "__" and a[-2:] == "__")) or a in own_names
            if write or private:
                v = fr(v, kinds, fmt) or v
                loc = {"lineno": v.lineno, "col_offset": v.col_offset,
                       "end_lineno": v.end_lineno, "end_col_offset": v.end_col_offset}
                if write:
                    parent.value = Call(func=Name(id="_orq_w", ctx=Load(), **loc),
                                        args=[v], keywords=[], **loc)
                else:
                    parent.value = Call(func=Name(id="_orq_own", ctx=Load(), **loc),
                                        args=[v, Constant(value=a, **loc)], keywords=[], **loc)
            elif type(v) is Attribute and v.attr in fmt:
                r = fr(v, kinds, fmt)
                if r is not None:
                    parent.value = r
            continue
        # o.format reads are replaced where they stand, in their parent's
        # field (the original node, queued, is walked detached: harmless).
        for field in parent._fields:
            val = getattr(parent, field, None)
            if type(val) is list:
                for i, item in enumerate(val):
                    if isinstance(item, AST):
                        push(item)
                        if type(item) is Attribute and item.attr in fmt:
                            r = fr(item, kinds, fmt)
                            if r is not None:
                                val[i] = r
            elif isinstance(val, AST):
                push(val)
                if type(val) is Attribute and val.attr in fmt:
                    r = fr(val, kinds, fmt)
                    if r is not None:
                        setattr(parent, field, r)

def _orq_guard_patterns(tree, rules):
    """Route class patterns through the run-time guard: in every match
    statement, a class pattern with positional sub-patterns (case C(a))
    matches against `_orq_cpN`, bound just before the statement to
    _orq_cpat(C) (see _orq_class_pattern_guard), which checks at match time
    the attribute names C.__match_args__ gives, wherever they came from.
    Keyword sub-patterns (case C(name=a)) read the attribute the source
    names: each must be one the attribute rules let code read. Returns
    None, or (line, column, message) of a refused keyword."""
    import ast

    ok = _orq_attr_name_ok(rules)
    n = [0]

    def classes_in(p, out):
        if isinstance(p, ast.MatchClass):
            out.append(p)
        for child in ast.iter_child_nodes(p):
            if isinstance(child, ast.pattern):
                classes_in(child, out)

    stack = [tree]
    while stack:
        node = stack.pop()
        for field, val in ast.iter_fields(node):
            if type(val) is not list:
                if isinstance(val, ast.AST):
                    stack.append(val)
                continue
            new = []
            for item in val:
                if isinstance(item, ast.AST):
                    stack.append(item)
                if isinstance(item, ast.Match):
                    found = []
                    for case in item.cases:
                        classes_in(case.pattern, found)
                    for mc in found:
                        for k in mc.kwd_attrs:
                            if not ok(k):
                                return (mc.lineno, mc.col_offset + 1,
                                        "case %s(%s=...) reads the attribute %r, which the "
                                        "sandbox does not let code read; match on public "
                                        "attributes" % (ast.unparse(mc.cls), k, k))
                        if not mc.patterns:
                            continue
                        n[0] += 1
                        name = "_orq_cp%d" % n[0]
                        loc = {"lineno": mc.lineno, "col_offset": mc.col_offset,
                               "end_lineno": mc.end_lineno, "end_col_offset": mc.end_col_offset}
                        new.append(ast.Assign(
                            targets=[ast.Name(id=name, ctx=ast.Store(), **loc)],
                            value=ast.Call(func=ast.Name(id="_orq_cpat", ctx=ast.Load(), **loc),
                                           args=[mc.cls], keywords=[], **loc), **loc))
                        mc.cls = ast.Name(id=name, ctx=ast.Load(), **loc)
                new.append(item)
            if len(new) != len(val):
                setattr(node, field, new)
    return None


def _orq_format_read(node, kinds, fmt=("format", "format_map", "__setattr__")):
    """_orq_fmt(o, 'format') for a node `o.format` / `o.format_map` (o not
    a str literal; o itself rewritten when it is such a read), _orq_sa(o)
    for `o.__setattr__`, _orq_odict(o, name) for `o.__dict__` and
    `o.__annotations__`, each when its name is in fmt; else None."""
    Attribute, Load, Constant, Name, Call = kinds
    if (type(node) is not Attribute or node.attr not in fmt
            or type(node.ctx) is not Load):
        return None
    v = node.value
    if type(v) is Constant and type(v.value) is str and node.attr[:1] != "_":
        return None
    v = _orq_format_read(v, kinds, fmt) or v
    loc = {"lineno": node.lineno, "col_offset": node.col_offset,
           "end_lineno": node.end_lineno, "end_col_offset": node.end_col_offset}
    if node.attr in ("__dict__", "__annotations__"):
        # obj.__dict__ (a snapshot whose writes are checked), obj.__annotations__
        # (a copy), of what the body made only: _orq_odict
        return Call(func=Name(id="_orq_odict", ctx=Load(), **loc),
                    args=[v, Constant(value=node.attr, **loc)], keywords=[], **loc)
    if node.attr == "__setattr__":
        # object.__setattr__(self, name, value) (a frozen dataclass's
        # __post_init__), super().__setattr__(name, value): _orq_sa
        return Call(func=Name(id="_orq_sa", ctx=Load(), **loc), args=[v], keywords=[], **loc)
    return Call(func=Name(id="_orq_fmt", ctx=Load(), **loc),
                args=[v, Constant(value=node.attr, **loc)], keywords=[], **loc)


# Set in a process that runs exactly one execution (a fork-server child):
# it may use the environment its zygote prepared as is (_orq_env).
_orq_one_shot = [False]

# Environments (curated builtins with the import shim installed, allowed
# module names) the zygote prepared, per rules table and allowlist:
# [rules, {allowed: (builtins dict, allowed)}]. Only a one-shot process
# uses one as is: whatever its execution does to it dies with it. Bounded.
_orq_envs = [None, {}]
_orq_envs_max = 32


def _orq_env(allowed_imports, rules, keep=False, classes=False, state=None):
    """The builtins dict (curated, with the import shim as __import__, the
    run-time guards of _orq_env_builtins and, with `classes`,
    __build_class__ and the class builtins), the allowed module names and
    the classes the execution builds (filled as it runs), the allowed
    modules imported. A fresh one per call, but in a one-shot
    process that finds one its zygote kept (keep=True: the zygote's warm-up
    and warm messages). With a session's `state`: refilled in place in its
    one builtins dict, which its earlier functions hold too."""
    classes = classes is True
    key = (frozenset(m for m in allowed_imports if isinstance(m, str) and m), classes)
    # A one-shot process uses what its zygote kept; the zygote (keep)
    # keeps one per allowlist and never builds it again: nothing ever ran
    # in it there, and a replaced one would be garbage it froze.
    if (_orq_one_shot[0] or keep) and state is None and _orq_envs[0] is rules:
        env = _orq_envs[1].get(key)
        if env is not None:
            return env
    if classes:
        # The user's classes say __module__ = "__sandbox__"; dataclasses
        # (string annotations) and enum look that module up in sys.modules.
        # An empty one: nothing of the body's is in it.
        import sys
        import types
        if not isinstance(sys.modules.get("__sandbox__"), types.ModuleType):
            sys.modules["__sandbox__"] = types.ModuleType("__sandbox__")
    safe = _orq_safe_builtins(rules)
    if state is not None:
        ub = state["builtins"]
        ub.clear()
        ub.update(safe)
        safe = ub
    extra, made = _orq_env_builtins(rules, safe, classes,
                                    state["made"] if state is not None else None)
    safe.update(extra)
    shim, real_import, allowed = _orq_make_import(allowed_imports, rules, safe, made)
    safe["__import__"] = shim
    surfaces = rules.get("module_surfaces") or {}
    for m in sorted(allowed):
        # with a package, the reviewed submodules its surface names
        # (urllib: urllib.parse), so that urllib.parse works after import urllib
        subs = [m + "." + n for n in surfaces.get(m) or () if isinstance(n, str)
                and isinstance(surfaces.get(m + "." + n), list)]
        for name in [m] + subs:
            try:
                real_import(name)
            except Exception:  # noqa: BLE001 - the user's import reports it
                pass
    env = (safe, allowed, made)
    if keep and state is None:
        if _orq_envs[0] is not rules:
            _orq_envs[:] = [rules, {}]
        if len(_orq_envs[1]) < _orq_envs_max:
            _orq_envs[1][key] = env
    return env


def _orq_prepare(req, rules, keep=False, state=None):
    """Prepare the environment of req's allowed_imports (imported) before
    any call, with req's extra_sys_path and extra_read_paths in place:
    a session's interpreter (with its `state`) and a zygote (keep)."""
    import sys
    for p in req.get("extra_sys_path") or ():
        if isinstance(p, str) and p and p not in sys.path:
            sys.path.append(p)
    _orq_audit_extra_read[:] = [p for p in req.get("extra_read_paths") or ()
                                if isinstance(p, str) and p.startswith("/")]
    allowed = req.get("allowed_imports") or req.get("prepare")
    if isinstance(allowed, list) and allowed:
        _orq_env(allowed, rules, keep=keep, classes=req.get("classes") is True,
                 state=state)


def _orq_syntax_error(e):
    return ("validation", "syntax error: %s" % e, [{
        "rule": "syntax-error", "message": str(e.msg),
        "line": e.lineno or 0, "column": e.offset or 0,
        "snippet": (e.text or "").strip()}])


def _orq_warm(msg, rules):
    """A fork-server zygote's handler of Go's {"t":"warm","code",
    "allowed_imports"}: check and compile a body a child just ran, so the
    children forked from now on find it accepted and compiled (trusted
    code only: nothing of the body runs here); with code "", only prepare
    the allowlist's environment (its modules imported). Never raises."""
    try:
        import json

        doc = json.loads(msg)
        code = doc.get("code")
        allowed = doc.get("allowed_imports") or []
        classes = doc.get("classes") is True
        if code == "" and isinstance(allowed, list):
            # The allowlist's environment only: its modules imported.
            _orq_env(allowed, rules, keep=True, classes=classes)
        elif (isinstance(code, str) and len(code) <= _orq_accepted_max_bytes
                and isinstance(allowed, list)):
            if _orq_accept(code, allowed, rules, classes)[0] is not None:
                _orq_env(allowed, rules, keep=True, classes=classes)
        import gc
        # The checker's garbage first: its nested functions form reference
        # cycles that hold the parsed tree, which only a collection frees.
        # Frozen, they would stay for good (~1 MB per 7 KB body; the
        # zygote grew per body, past the cache's bound). What freeze keeps
        # is then only what the cache and the environments hold (the
        # collection walks only what was made since the last freeze).
        gc.collect()
        gc.freeze()  # as before forking: a child's collection skips them
    except Exception:  # noqa: BLE001 - best effort; a child checks anyway
        pass


# The curated builtins of a rules table, looked up once per table (each
# execution gets its own copy): [(rules, {name: builtin})].
_orq_builtins_prepared = []


def _orq_safe_builtins(rules):
    import builtins

    for r, base in _orq_builtins_prepared:
        if r is rules:
            return dict(base)
    base = {}
    for name in rules.get("safe_builtins") or ():
        if isinstance(name, str) and hasattr(builtins, name):
            base[name] = getattr(builtins, name)
    base.update(_orq_guarded_builtins(rules))
    _orq_builtins_prepared[:] = [(rules, base)]
    return dict(base)


def _orq_workspace(root):
    """The builtin `workspace` of an execution with a writable directory
    root: read_bytes(name), read_text(name), write_bytes(name, data),
    write_text(name, text) (into an existing directory), mkdir(name)
    (with its missing parents), remove(name) (a file), rmdir(name) (an
    empty directory), rename(src, dst) (replacing dst), list()
    (every regular file, relative names, sorted) and path(name) (the
    absolute path, for libraries that take one: pandas.read_csv,
    savefig). A name is a clean relative path ("data.csv", "out/a.png");
    anything else is a ValueError. The kernel (Landlock) and the audit hook
    keep every write inside root whatever the body does."""
    import os
    import types

    def full(name):
        if not isinstance(name, str) or not name or name.startswith("/") \
                or "\\" in name or "\x00" in name:
            raise ValueError("workspace: a file name is a relative path such as 'data.csv', got %r" % (name,))
        if any(p in ("", ".", "..") for p in name.split("/")):
            raise ValueError("workspace: %r is not a clean relative path (no '..', '.' or empty element)" % (name,))
        return root + "/" + name

    def read_bytes(name):
        with open(full(name), "rb") as f:
            return f.read()

    def read_text(name, encoding="utf-8"):
        with open(full(name), "r", encoding=encoding) as f:
            return f.read()

    def write_bytes(name, data):
        with open(full(name), "wb") as f:
            return f.write(bytes(data))

    def write_text(name, text, encoding="utf-8"):
        if not isinstance(text, str):
            raise TypeError("workspace.write_text: text must be a str")
        with open(full(name), "w", encoding=encoding) as f:
            return f.write(text)

    def listing():
        out = []
        for dirpath, _dirs, names in os.walk(root):
            for n in names:
                p = os.path.join(dirpath, n)
                if os.path.isfile(p) and not os.path.islink(p):
                    out.append(os.path.relpath(p, root))
        return sorted(out)

    def path(name=None):
        return root if name is None else full(name)

    def mkdir(name):
        os.makedirs(full(name), exist_ok=True)

    def remove(name):
        os.remove(full(name))

    def rmdir(name):
        os.rmdir(full(name))

    def rename(src, dst):
        os.replace(full(src), full(dst))

    return types.SimpleNamespace(read_bytes=read_bytes, read_text=read_text,
                                 write_bytes=write_bytes, write_text=write_text,
                                 mkdir=mkdir, remove=remove, rmdir=rmdir, rename=rename,
                                 list=listing, path=path)


def _orq_save_figures(root):
    """Save the matplotlib figures the body left open into root as
    figure-N.png (N: the figure's number) and close them: they come back
    as artifacts. Only when the body imported matplotlib.pyplot; a figure
    that cannot be saved is reported on stderr."""
    import sys

    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        nums = list(plt.get_fignums())
    except Exception:  # noqa: BLE001 - the body's matplotlib, its problem
        return
    for n in nums:
        try:
            plt.figure(n).savefig("%s/figure-%d.png" % (root, n), format="png")
        except Exception as e:  # noqa: BLE001
            sys.stderr.write("orqest runner: figure %d was not saved: %s: %s\n"
                             % (n, type(e).__name__, e))
    try:
        plt.close("all")
    except Exception:  # noqa: BLE001
        pass


def _orq_execute_one(req, state=None):
    # hold[0] is the ballast while this call has it; a MemoryError handler
    # empties hold (which frees it); otherwise it goes back for the next call.
    _orq_ballast_ready()
    hold = [_orq_ballast.pop()]
    try:
        return _orq_execute_body(req, hold, state)
    finally:
        if hold:
            _orq_ballast.append(hold.pop())


def _orq_execute_body(req, hold, state=None):
    import json

    def respond(kind, error, findings=None):
        doc = {"success": False, "error": error, "error_kind": kind}
        if findings:
            doc["findings"] = findings
        return json.dumps(doc).encode("ascii")

    try:
        code = req.get("code")
        if not isinstance(code, str):
            return respond("internal", "request has no code")
        args = req.get("args")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return respond("invalid_args", "args must be a JSON object")
        allowed_imports = list(req.get("allowed_imports") or [])
        # extra_sys_path (e.g. a tier-2 agent's venv site-packages: -S skips
        # site.py) goes after the stdlib, so it cannot shadow stdlib modules.
        import sys
        for p in req.get("extra_sys_path") or ():
            if isinstance(p, str) and p and p not in sys.path:
                sys.path.append(p)
        _orq_audit_extra_read[:] = [p for p in req.get("extra_read_paths") or ()
                                    if isinstance(p, str) and p.startswith("/")]
        rules = req.get("rules") or {}
        max_out = int(req.get("max_output_bytes") or 0)
        classes = req.get("classes") is True

        # 1-2. The in-interpreter checker and the compiled wrapper.
        compiled, failed = _orq_accept(code, allowed_imports, rules, classes,
                                       state is not None)
        if failed is not None:
            return respond(*failed)

        # The execution's writable directory (tier 2's session workspace).
        # matplotlib's config directory points into it before the allowed
        # modules are imported (an import without it fails quietly, and the
        # body's own import then runs under the audit hook).
        ws = req.get("workspace")
        if not (isinstance(ws, str) and ws.startswith("/")):
            ws = None
        if ws is not None:
            os_env = __import__("os").environ
            os_env.setdefault("MPLCONFIGDIR", ws + "/.matplotlib")
            os_env.setdefault("MPLBACKEND", "agg")

        # 3. Curated builtins (the one list in the rules table) + import shim;
        #    the allowed modules imported.
        safe, allowed, made = _orq_env(allowed_imports, rules, classes=classes,
                                       state=state)
        if ws is not None:
            safe["workspace"] = _orq_workspace(ws)

        # 4. Run.
        if state is None:
            user_globals = {"__builtins__": safe, "__name__": "__sandbox__"}
        else:
            user_globals = state["globals"]
        try:
            exec(compiled, user_globals)
            fn = user_globals.pop("<module>")
            # The audit hook (see _orq_audit_arm) is armed only while user
            # code runs and its result is encoded.
            _orq_audit_arm(rules, allowed, ws)
            result = fn(args)
            if ws is not None:
                _orq_save_figures(ws)
        except MemoryError:
            _orq_audit_disarm()
            hold.clear()
            return respond("memory", "MemoryError: the code exceeded the "
                           "memory limit of %s MB" % (req.get("memory_mb") or "?"))
        except BaseException as e:  # noqa: BLE001 - user code, incl. SystemExit
            # Still armed, and within the call's limits: the exception's
            # texts (a user class may define __str__), then the report,
            # built without calling any method of the exceptions.
            return respond("runtime", _orq_user_traceback(e, code, _orq_exc_texts(e)))

        # 5. Encode the result (still armed): copied to exact JSON types
        #    with the builtin types' own methods (a dict subclass's items()
        #    never runs), then written by the runner's own encoder.
        try:
            result = _orq_plain(result)
            encode = _orq_encoder()
            try:
                out = encode(result).encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: escape them
                out = encode(result, True).encode("ascii")
        except MemoryError:
            hold.clear()
            return respond("memory", "MemoryError while encoding the result")
        except (TypeError, ValueError, RecursionError, OverflowError) as e:
            return respond("not_serializable",
                           "result is not JSON-serialisable: %s: %s"
                           % (type(e).__name__, e))
        except BaseException as e:  # noqa: BLE001
            return respond("not_serializable",
                           "result is not JSON-serialisable: %s: %s"
                           % (type(e).__name__, e))
        if max_out > 0 and len(out) > max_out:
            return respond("output_limit",
                           "output of %d bytes exceeds the limit of %d bytes"
                           % (len(out), max_out))
        return b'{"success": true, "output": ' + out + b"}"
    except MemoryError:
        hold.clear()
        return respond("memory", "MemoryError")
    except BaseException as e:  # noqa: BLE001
        return respond("internal", "runner failed: %s: %s"
                       % (type(e).__name__, e))


def _orq_main():
    import json
    import os
    import sys

    # Grab the response channel before anything else; it stays in this
    # frame's locals, out of the user's reach (user code has no os module
    # unless policy allows it).
    try:
        out = os.fdopen(3, "wb", buffering=0)
    except OSError:
        sys.stderr.write("orqest runner: fd 3 (response channel) is not open\n")
        os._exit(_orq_exit_cannot_serve)
    try:
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
    except Exception:  # noqa: BLE001
        pass
    try:
        raw = sys.stdin.buffer.read()
        req = json.loads(raw)
        if not isinstance(req, dict):
            raise ValueError("request is not a JSON object")
        op = req.get("op", "execute")
        if op not in ("execute", "probe", "session"):
            raise ValueError("unknown op %r" % (op,))
    except Exception as e:  # noqa: BLE001
        resp = json.dumps({"success": False, "error_kind": "internal",
                           "error": "bad request: %s" % e}).encode("ascii")
    else:
        if op == "execute":
            # One execution in this process: the audit hook is never
            # disarmed; in C when the request passes it (core_fd, the fork
            # server's C loop built as a shared object), loaded before the
            # seal forbids opening it.
            _orq_one_shot[0] = True
            _orq_core_arms[0] = True
        if op in ("execute", "session"):
            # A session's hook is armed by its first call and stays armed
            # (_orq_session_serve).
            _orq_core_load(req.get("core_fd"))
        # Sealing (see _orq_seal_prepare) happens before any user code;
        # failure of a required layer fails closed.
        resp = _orq_spawn_seal(req)
        if resp is None and op == "session":
            _orq_session_serve(req, out)  # never returns
        if resp is None:
            _orq_apply_limits(req)
            resp = _orq_execute_child(req)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    try:
        view = memoryview(resp)
        while view:
            n = out.write(view)
            view = view[n:]
        out.close()
    except OSError:
        os._exit(_orq_exit_response_lost)
    # Skip interpreter finalisation (and any user objects' finalisers).
    os._exit(0)



def _orq_core_load(fd):
    """Load the runner's C hook (runner/forkcore/audit.h) from descriptor
    fd (a shared object of forkcore.c) into _orq_core and close fd; without
    one, or built for another Python, the Python hook stays."""
    if type(fd) is not int or fd < 3:
        return
    import os
    import sys
    try:
        import ctypes
        lib = ctypes.PyDLL("/proc/self/fd/%d" % fd)
        built = ctypes.c_ulong.in_dll(lib, "orq_python_hexversion").value
        if built >> 16 == sys.hexversion >> 16:
            lib.orq_core_module.restype = ctypes.py_object
            _orq_core.append(lib.orq_core_module())
    except Exception as e:  # noqa: BLE001
        sys.stderr.write("orqest runner: the C audit hook was not loaded: %s: %s\n"
                         % (type(e).__name__, e))
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def _orq_session_serve(req, out):
    """Op "session" (runner.OpSession in runner/protocol.go says the
    protocol): serve call after call in one globals dict. Never returns."""
    import array
    import fcntl
    import os
    import socket

    ctl = socket.socket(fileno=fcntl.fcntl(out.fileno(), fcntl.F_DUPFD_CLOEXEC, 16))
    out.close()
    b = {}
    state = {"builtins": b, "made": {}, "globals": {"__builtins__": b, "__name__": "__sandbox__"}}
    if req.get("keep"):
        exec(compile(req["keep"], "<keep>", "exec"), globals())  # _orq_keep_serve
    # The session's modules imported before the first call (and before Go
    # reads the threads their libraries start).
    _orq_prepare(req, req.get("rules") or {}, state=state)
    # A trusted warm-up body, as a zygote runs one before it forks (in its
    # own globals): the checker's and the builtins' caches filled, so the
    # first call costs what the next do.
    _orq_execute({"code": _orq_warmup_body, "args": {}, "allowed_imports": [],
                  "rules": req.get("rules") or {}})
    # With the C hook, the first call arms it and nothing disarms it: the
    # calls, the user's objects they leave (finalisers, generators) and
    # this loop between calls all run armed; the loop's own steps are C
    # calls (core.next_call) and unaudited os functions. Without it the
    # Python hook is armed per call, as in a process of many executions.
    core = _orq_core[0] if _orq_core else None
    if core is not None:
        _orq_core_arms[0] = True
    # Python threads the preparation left (thread module: not a native
    # library's pool) are no library's own: Go does not spare them.
    import _thread
    os.write(ctl.fileno(), b'{"success": true, "python_threads": %d}' % _thread._count())  # seccomp: write, not send
    size = array.array("i").itemsize
    while True:
        try:
            if core is not None:
                if not core.next_call(ctl.fileno()):
                    os._exit(0)  # Go closed the session
            elif not _orq_session_next(ctl, size):
                os._exit(0)
            cell = _orq_read_request()
            if cell.get("rules") is None:
                cell["rules"] = req.get("rules") or {}
        except BaseException as e:  # noqa: BLE001
            _orq_child_fail(e)
        if cell.get("op") in ("save_globals", "load_globals"):
            # The session's globals as plain data (keep.py).
            _orq_send_response(_orq_keep_serve(cell, state))
            continue
        _orq_send_response(_orq_execute_child(cell, state))


def _orq_session_next(ctl, size):
    """core.next_call in Python, for an interpreter without the C hook (its
    Python hook is disarmed between calls): the next call's descriptors on
    0-3 and its limits set. Returns False at end-of-file."""
    import array
    import fcntl
    import os
    import resource
    import socket

    msg, anc, _, _ = ctl.recvmsg(64, socket.CMSG_SPACE(4 * size))
    fds = array.array("i")
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - (len(data) % size)])
    if not msg and not fds:
        return False  # Go closed the session
    r, mb, cpu = msg.split()
    if len(fds) != 4 or r != b"r":
        raise ValueError("bad call %r" % msg)
    high = [fcntl.fcntl(f, fcntl.F_DUPFD_CLOEXEC, 16) for f in fds]
    for i, f in enumerate(high):
        os.close(fds[i])
    for i, f in enumerate(high):
        os.dup2(f, i)
        os.close(f)
    inf = resource.RLIM_INFINITY
    if int(mb) > 0:
        resource.setrlimit(resource.RLIMIT_AS, (int(mb) << 20, inf))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    resource.setrlimit(resource.RLIMIT_CPU, (int(ru.ru_utime + ru.ru_stime) + 1 + int(cpu), inf))
    return True
