# runner.py — the one Python runner every orqest-sandbox tier executes.
#
# The child runs `python3 -I -S -B -c <checker.py + runner.py>`. Protocol (see
# pyrunner.go): one JSON request on stdin, one JSON response on fd 3; the
# user's print() output goes to the real fd 1 / fd 2, which the host captures.
#
# Only names prefixed `_orq_` are defined at module level. All runner state
# lives in function locals; the user's code runs in a fresh globals dict that
# holds only a curated `__builtins__` dict and `__name__`, so it cannot reach
# this module's globals.
#
# Entry points, reusable by other backends:
#   _orq_apply_limits(req)   set RLIMIT_AS / RLIMIT_CPU from the request
#   _orq_execute(req)        validate + run one request, return the response
#                            as UTF-8 JSON bytes (never raises)
#   _orq_main()              the spawn-mode driver: stdin -> _orq_execute -> fd 3
#   _orq_forkserver_main()   the fork-server (zygote) driver; see below
# A fork-server would call _orq_apply_limits and _orq_execute in each forked
# child instead of _orq_main.


def _orq_apply_limits(req):
    """Defence in depth: the host also applies these with prlimit(2)."""
    try:
        import resource
    except ImportError:  # not POSIX; the host's outer limits still apply
        return
    inf = resource.RLIM_INFINITY

    def clamp(value, hard):
        return value if hard == inf else min(value, hard)

    mb = int(req.get("memory_mb") or 0)
    if mb > 0:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        n = clamp(mb * 1024 * 1024, hard)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (n, n))
        except (ValueError, OSError):
            pass
    cpu = int(req.get("cpu_seconds") or 0)
    if cpu > 0:
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = clamp(cpu, hard)
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (soft, clamp(cpu + 1, hard)))
        except (ValueError, OSError):
            pass


def _orq_isolate(fn):
    """Rebind fn to an empty globals dict so that, even through
    introspection, it does not lead back to this module's globals. fn must
    only use names from its closure."""
    import types

    return types.FunctionType(fn.__code__, {"__builtins__": {}}, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def _orq_make_import(allowed_imports, rules=None, user_builtins=None):
    """Return the `__import__` shim handed to user code.

    It honours absolute imports whose top-level module is in
    allowed_imports, denies relative imports, and returns a read-only-ish
    *view* of the module: a fresh module object holding the real module's
    public attributes, minus
      - modules that are not themselves allowed (so `re.enum.sys` does not
        lead to sys; allowed ones become views in turn),
      - every name the static rules forbid as an attribute (rules.json
        forbidden_attributes, dunders, private names): what user code cannot
        name it cannot get through `vars`-like helpers either
        (`operator.attrgetter`, `string.Formatter`, `typing.get_type_hints`),
    and with the string-to-attribute helpers that stay public replaced by
    guarded versions (see _orq_guards).

    Imports that C code makes through the frame's `__builtins__` (the
    `PyImport_Import` path: `datetime.strptime` imports `_strptime`,
    `strftime` imports `time`) pass an empty *list* as fromlist and ignore
    the return value; the user's import statements pass None or a tuple.
    Those internal imports are performed (the module is not handed to user
    code: the shim returns None for them)."""
    import builtins
    import types

    real_import = builtins.__import__
    ModuleType = types.ModuleType
    allowed = frozenset(m for m in allowed_imports if isinstance(m, str) and m)
    rules = rules or {}
    hidden_attrs = frozenset((rules.get("forbidden_attributes") or {}).keys())
    guards = _orq_guards(user_builtins)
    _isinstance, _str, _sorted, _vars, _list, _setattr, _type, _tuple = (
        isinstance, str, sorted, vars, list, setattr, type, tuple)
    _ImportError = ImportError

    def permitted(name):
        return name.partition(".")[0] in allowed

    def view(mod, memo):
        key = mod.__name__
        got = memo.get(key)
        if got is not None:
            return got
        v = ModuleType(key, mod.__doc__ if _isinstance(mod.__doc__, _str) else None)
        memo[key] = v
        for k, x in _list(_vars(mod).items()):
            if k[:1] == "_" or k in hidden_attrs:
                continue
            if _isinstance(x, ModuleType):
                if not permitted(x.__name__):
                    continue
                x = view(x, memo)
            g = guards.get((key, k))
            if g is not None:
                x = g
            _setattr(v, k, x)
        return v

    def shim(name, globals=None, locals=None, fromlist=(), level=0):
        if _type(fromlist) is _list and not fromlist and level == 0 and _type(name) is _str:
            # PyImport_Import from C code (see above): import, hand out nothing.
            real_import(name, None, None, (), 0)
            return None
        if level != 0:
            raise _ImportError("relative imports are not allowed in the sandbox")
        if not _isinstance(name, _str) or not permitted(name):
            raise _ImportError(
                "import of %r is not allowed (allowed imports: %s)"
                % (name, ", ".join(_sorted(allowed)) or "none"))
        if fromlist is not None:
            fromlist = _tuple(f for f in fromlist if _type(f) is _str)
        mod = real_import(name, None, None, fromlist, 0)
        return view(mod, {})

    view = _orq_isolate(view)
    permitted = _orq_isolate(permitted)
    return _orq_isolate(shim), real_import, allowed


def _orq_guards(user_builtins):
    """Guarded replacements for public stdlib helpers that turn strings into
    attribute access or code, keyed by (module, name). They are handed out
    in module views instead of the real ones.

    - functools.update_wrapper / wraps: the real ones getattr/setattr any
      names passed as `assigned`/`updated` (`updated=['__globals__']` copies
      a module's globals, builtins included, into the caller's globals).
      Only the default names (or a subset) are accepted, and only a function
      the tool body defined may be the wrapper.
    - functools.singledispatch: `register(func)` without a class reads the
      class from the annotations with typing.get_type_hints, which eval()s
      string annotations in the function's globals. The guarded register
      takes the class from the annotation itself and accepts only classes
      (and unions of classes).
    Every guard is rebound to empty globals (_orq_isolate) and uses only
    names from its closure."""
    import functools
    import types

    FunctionType, UnionType = types.FunctionType, types.UnionType
    real_update_wrapper = functools.update_wrapper
    real_singledispatch = functools.singledispatch
    WA, WU = tuple(functools.WRAPPER_ASSIGNMENTS), tuple(functools.WRAPPER_UPDATES)
    _type, _tuple, _isinstance, _TypeError = type, tuple, isinstance, TypeError
    _str, _all, _next, _iter, _dict, _cls = str, all, next, iter, dict, type
    ub = user_builtins

    def names(xs, allowed, what):
        out = _tuple(xs)
        for x in out:
            if _type(x) is not _str or x not in allowed:
                raise _TypeError("functools.%s: only the default names are allowed "
                                 "in the sandbox" % what)
        return out

    def update_wrapper(wrapper, wrapped, assigned=WA, updated=WU):
        assigned = names(assigned, WA, "update_wrapper: assigned")
        updated = names(updated, WU, "update_wrapper: updated")
        if ub is None or _type(wrapper) is not FunctionType or wrapper.__builtins__ is not ub:
            raise _TypeError("functools.update_wrapper/wraps: the wrapper must be "
                             "a function defined in the tool body")
        return real_update_wrapper(wrapper, wrapped, assigned, updated)

    def wraps(wrapped, assigned=WA, updated=WU):
        assigned = names(assigned, WA, "wraps: assigned")
        updated = names(updated, WU, "wraps: updated")

        def decorate(wrapper):
            return update_wrapper(wrapper, wrapped, assigned, updated)
        return decorate

    def is_class_or_union(t):
        if _isinstance(t, _cls):
            return True
        k = _type(t)
        if k is UnionType or (k.__name__ == "_UnionGenericAlias" and k.__module__ == "typing"):
            args = t.__args__
            return _type(args) is _tuple and _all(_isinstance(a, _cls) for a in args)
        return False

    def singledispatch(func):
        d = real_singledispatch(func)
        real_register = d.register

        def register(cls, func=None):
            if func is None and not is_class_or_union(cls):
                if _type(cls) is not FunctionType:
                    raise _TypeError("singledispatch.register: pass a class, or a "
                                     "function whose first parameter is annotated with one")
                ann = _dict(cls.__annotations__)
                ann.pop("return", None)
                typ = _next(_iter(ann.values()), None)
                if not is_class_or_union(typ):
                    raise _TypeError("singledispatch.register: in the sandbox the "
                                     "annotation must be a class (not a string)")
                return real_register(typ, cls)
            if func is not None and not is_class_or_union(cls):
                raise _TypeError("singledispatch.register: %r is not a class" % (cls,))
            return real_register(cls, func)

        d.register = register
        return d

    is_class_or_union = _orq_isolate(is_class_or_union)
    names = _orq_isolate(names)
    update_wrapper = _orq_isolate(update_wrapper)
    wraps = _orq_isolate(wraps)
    singledispatch = _orq_isolate(singledispatch)
    for f in (update_wrapper, wraps, singledispatch):
        f.__module__ = "functools"
    return {("functools", "update_wrapper"): update_wrapper,
            ("functools", "wraps"): wraps,
            ("functools", "singledispatch"): singledispatch}


_orq_audit_state = {}


def _orq_audit_arm(rules, allowed):
    """Defence in depth below the static rules and the module views: a
    CPython audit hook (PEP 578), installed once per process, that refuses
    while armed
      - the introspection CPython audits (`object.__getattr__`: tb_frame,
        gi_frame, cr_frame, ag_frame, f_code, gi_code, ... — except the three
        names inspect.signature reads: __code__, __defaults__,
        __kwdefaults__), and the events listed in rules.json
        runtime.audit_block (code/function construction, gc and frame walks,
        tracing, marshal/pickle loading);
      - unless allowed_imports names a module whose purpose is OS access
        (runtime.os_modules: os, io, socket, ...; the host refuses those
        unless the policy acknowledges them), also the OS events in
        runtime.audit_block_os (processes, sockets, file changes) and every
        `open` except reading files below the interpreter's library
        directories (imports) and the zoneinfo database.
    Returns the state dict; set state["armed"] = False to disarm (the runner
    does, before it formats a traceback with the traceback module)."""
    import sys

    st = _orq_audit_state
    rules = rules or {}
    prep = st.get("prepared")
    if prep is None or prep[0] is not rules:
        # Derived once per rules table (a fork-server zygote does it before
        # it forks): the OS modules and, with and without them, the events.
        rt = rules.get("runtime") or {}
        by_os = {}
        for os_too in (False, True):
            exact, prefixes = set(), []
            for ev in list(rt.get("audit_block") or ()) + (list(rt.get("audit_block_os") or ()) if os_too else []):
                if isinstance(ev, str) and ev:
                    (prefixes.append(ev) if ev.endswith(".") else exact.add(ev))
            by_os[os_too] = (frozenset(exact), tuple(prefixes))
        prep = (rules, frozenset(rt.get("os_modules") or ()), by_os)
        st["prepared"] = prep
    os_modules = prep[1]
    os_too = not any(m.partition(".")[0] in os_modules for m in allowed)
    st["exact"], st["prefixes"] = prep[2][os_too]
    st["check_open"] = os_too
    st["armed"] = True
    if st.get("installed"):
        return st
    import os

    roots = []
    for p in list(sys.path) + [os.path.dirname(os.__file__), "/usr/share/zoneinfo"]:
        if isinstance(p, str) and p:
            roots.append(os.path.normpath(p) + os.sep)
    roots = tuple(roots)
    normpath, fspath = os.path.normpath, os.fspath
    inspect_reads = frozenset(("__code__", "__defaults__", "__kwdefaults__"))
    _str, _bytes, _isinstance, _RuntimeError = str, bytes, isinstance, RuntimeError

    def hook(event, args):
        if not st["armed"]:
            return
        if event == "object.__getattr__":
            if len(args) > 1 and args[1] in inspect_reads:
                return
            raise _RuntimeError("sandbox: introspection (%s) is not allowed"
                                % (args[1] if len(args) > 1 else "?",))
        if event in ("os.listdir", "os.scandir") and args and _isinstance(args[0], _str) \
                and (normpath(args[0]) + "/").startswith(roots):
            return  # the import system refreshing its directory caches
        if event in st["exact"] or event.startswith(st["prefixes"]):
            raise _RuntimeError("sandbox: %s is not allowed" % event)
        if event == "open" and st["check_open"]:
            path = args[0] if args else None
            mode = args[1] if len(args) > 1 else "r"
            flags = args[2] if len(args) > 2 else 0
            ok = False
            if _isinstance(path, (_str, _bytes)) and (mode is None or _isinstance(mode, _str)):
                p = fspath(path)
                if _isinstance(p, _bytes):
                    p = p.decode("utf-8", "surrogateescape")
                writes = mode is not None and any(c in mode for c in "wax+")
                if _isinstance(flags, int) and flags & 0o3:  # O_WRONLY/O_RDWR
                    writes = True
                ok = not writes and (normpath(p) + "/").startswith(roots)
            if not ok:
                raise _RuntimeError("sandbox: open(%r) is not allowed" % (path,))

    sys.addaudithook(hook)
    st["installed"] = True
    return st


def _orq_user_traceback(exc, code):
    """Format exc with only the user's frames (filename "<sandbox>"), showing
    the user's source lines."""
    import linecache
    import traceback

    linecache.cache["<sandbox>"] = (len(code), None, code.splitlines(True),
                                    "<sandbox>")
    try:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__,
                                          compact=True)
    except TypeError:  # Python < 3.10
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    seen = set()
    todo = [te]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.stack is not None:
            t.stack = traceback.StackSummary.from_list(
                [f for f in t.stack if f.filename == "<sandbox>"])
        for c in (t.__cause__, t.__context__):
            if c is not None:
                todo.append(c)
    return "".join(te.format())


def _orq_execute(req):
    """Validate and run one request. Returns the response as UTF-8 bytes
    (one JSON object). Never raises. The audit hook is disarmed on the way
    out, so a host process that runs many requests (tier 0) keeps working."""
    try:
        return _orq_execute_one(req)
    finally:
        _orq_audit_state["armed"] = False


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
# compiled `__orq_user` wrapper (code objects are immutable; each execution
# still runs them in fresh globals), per rules table: [rules, {(code,
# allowed imports): code object}]. The verdict is a pure function of the
# body, the allowlist and the table, so a hit skips the parse, the check
# and the compile. A fork-server zygote fills it for bodies Go asks it to
# warm (_orq_warm), so its children start with them; tier 0 fills it as it
# runs. Bounded, oldest out first; sources longer than 16 KB are not kept.
_orq_accepted = [None, {}]
_orq_accepted_max = 128
_orq_accepted_max_bytes = 16 << 10


def _orq_accept(code, allowed_imports, rules):
    """Check `code` under `allowed_imports` and `rules` with the
    in-interpreter checker and compile its wrapper. Returns (code object,
    None) when accepted, else (None, (error kind, message, findings))."""
    import ast

    allowed = frozenset(m for m in allowed_imports if isinstance(m, str))
    if _orq_accepted[0] is rules:
        hit = _orq_accepted[1].get((code, allowed))
        if hit is not None:
            return hit, None

    # 1. Re-validate with CPython's own ast (the rules table is the one
    #    validator/rules.json). Fail closed if the checker itself breaks.
    _orq_check_accepted.clear()
    try:
        findings = _orq_check(code, allowed_imports, rules)
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

    # 2. Build `def __orq_user(args): <body>` from the body's own AST, so
    #    line N of the body is reported as line N and string literals are
    #    not re-indented.
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
    fn_def = ast.FunctionDef(
        name="__orq_user",
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
    if len(code) <= _orq_accepted_max_bytes:
        if _orq_accepted[0] is not rules:
            _orq_accepted[:] = [rules, {}]
        cache = _orq_accepted[1]
        if len(cache) >= _orq_accepted_max:
            del cache[next(iter(cache))]
        cache[(code, allowed)] = compiled
    return compiled, None


# Set in a process that runs exactly one execution (a fork-server child):
# it may use the environment its zygote prepared as is (_orq_env).
_orq_one_shot = [False]

# Environments (curated builtins with the import shim installed, allowed
# module names) the zygote prepared, per rules table and allowlist:
# [rules, {allowed: (builtins dict, allowed)}]. Only a one-shot process
# uses one as is: whatever its execution does to it dies with it. Bounded.
_orq_envs = [None, {}]
_orq_envs_max = 32


def _orq_env(allowed_imports, rules, keep=False):
    """The builtins dict (curated, with the import shim as __import__) and
    the allowed module names of one execution, the allowed modules imported.
    A fresh one per call, but in a one-shot process that finds one its
    zygote kept (keep=True: the zygote's warm-up and warm messages)."""
    key = frozenset(m for m in allowed_imports if isinstance(m, str) and m)
    if _orq_one_shot[0] and _orq_envs[0] is rules:
        env = _orq_envs[1].get(key)
        if env is not None:
            return env
    safe = _orq_safe_builtins(rules)
    shim, real_import, allowed = _orq_make_import(allowed_imports, rules, safe)
    safe["__import__"] = shim
    for m in sorted(allowed):
        try:
            real_import(m)
        except Exception:  # noqa: BLE001 - the user's import reports it
            pass
    env = (safe, allowed)
    if keep:
        if _orq_envs[0] is not rules:
            _orq_envs[:] = [rules, {}]
        if len(_orq_envs[1]) < _orq_envs_max:
            _orq_envs[1][key] = env
    return env


def _orq_syntax_error(e):
    return ("validation", "syntax error: %s" % e, [{
        "rule": "syntax-error", "message": str(e.msg),
        "line": e.lineno or 0, "column": e.offset or 0,
        "snippet": (e.text or "").strip()}])


def _orq_warm(msg, rules):
    """A fork-server zygote's handler of Go's {"t":"warm","code",
    "allowed_imports"}: check and compile a body a child just ran, so the
    children forked from now on find it accepted and compiled (trusted
    code only: nothing of the body runs here). Never raises."""
    try:
        import json

        doc = json.loads(msg)
        code = doc.get("code")
        allowed = doc.get("allowed_imports") or []
        if (isinstance(code, str) and len(code) <= _orq_accepted_max_bytes
                and isinstance(allowed, list)):
            if _orq_accept(code, allowed, rules)[0] is not None:
                _orq_env(allowed, rules, keep=True)
        import gc
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
    _orq_builtins_prepared[:] = [(rules, base)]
    return dict(base)


def _orq_execute_one(req):
    # hold[0] is the ballast while this call has it; a MemoryError handler
    # empties hold (which frees it); otherwise it goes back for the next call.
    _orq_ballast_ready()
    hold = [_orq_ballast.pop()]
    try:
        return _orq_execute_body(req, hold)
    finally:
        if hold:
            _orq_ballast.append(hold.pop())


def _orq_execute_body(req, hold):
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
        rules = req.get("rules") or {}
        max_out = int(req.get("max_output_bytes") or 0)

        # 1-2. The in-interpreter checker and the compiled wrapper.
        compiled, failed = _orq_accept(code, allowed_imports, rules)
        if failed is not None:
            return respond(*failed)

        # 3. Curated builtins (the one list in the rules table) + import shim;
        #    the allowed modules imported.
        safe, allowed = _orq_env(allowed_imports, rules)

        # 4. Run.
        user_globals = {"__builtins__": safe, "__name__": "__sandbox__"}
        try:
            exec(compiled, user_globals)
            fn = user_globals.pop("__orq_user")
            # Tracebacks read "in <module>", as for a script, not the
            # wrapper's name.
            try:
                fn.__code__ = fn.__code__.replace(co_name="<module>",
                                                  co_qualname="<module>")
            except TypeError:  # Python < 3.11 has no co_qualname
                fn.__code__ = fn.__code__.replace(co_name="<module>")
            # The audit hook (see _orq_audit_arm) is armed only while user
            # code runs and its result is encoded.
            _orq_audit_arm(rules, allowed)
            result = fn(args)
        except MemoryError:
            _orq_audit_state["armed"] = False
            hold.clear()
            return respond("memory", "MemoryError: the code exceeded the "
                           "memory limit of %s MB" % (req.get("memory_mb") or "?"))
        except BaseException as e:  # noqa: BLE001 - user code, incl. SystemExit
            _orq_audit_state["armed"] = False
            return respond("runtime", _orq_user_traceback(e, code))

        # 5. Encode the result.
        try:
            try:
                out = json.dumps(result, allow_nan=False,
                                 ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: escape them
                out = json.dumps(result, allow_nan=False).encode("ascii")
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
        os._exit(70)
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
        if op not in ("execute", "probe"):
            raise ValueError("unknown op %r" % (op,))
    except Exception as e:  # noqa: BLE001
        resp = json.dumps({"success": False, "error_kind": "internal",
                           "error": "bad request: %s" % e}).encode("ascii")
    else:
        # Sealing (see _orq_seal_prepare) happens before any user code;
        # failure of a required layer fails closed.
        resp = _orq_spawn_seal(req)
        if resp is None:
            _orq_apply_limits(req)
            resp = _orq_execute(req)
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
        os._exit(71)
    # Skip interpreter finalisation (and any user objects' finalisers).
    os._exit(0)


# ---------------------------------------------------------------------------
# Sealing and the fork-server (tier 1). Trusted runner code: it runs before
# any user code, and user code never sees ctypes, the ruleset fd or the
# control socket (all are locals of these functions, closed in the child).
#
#   _orq_seal_prepare(cfg)         process-wide layers, once: no_new_privs,
#                                  unprivileged uid, user + network namespace;
#                                  builds the Landlock ruleset and the seccomp
#                                  programs. Returns the state.
#   _orq_seal_apply(st, zygote)    per-process layers: Landlock
#                                  restrict_self, rlimits, seccomp filter.
#   _orq_forkserver_main()         the zygote: argv "forkserver", fd 3 a
#                                  SOCK_SEQPACKET control socket (see
#                                  plugins/subprocess/forkserver.go).
# ---------------------------------------------------------------------------

def _orq_seccomp_program(kind):
    """Return a seccomp BPF program (bytes of struct sock_filter) that
    denies with EPERM what pure Python never needs, or None when this
    architecture is not supported.

    kind "full": everything, for a process sealed on its own (spawn mode).
    kind "zygote": everything but new processes and signals (the zygote
    forks, and kills its children at shutdown). kind "child": only those,
    stacked by a fork-server child on top of the inherited zygote filter, so
    that installing it per fork stays cheap."""
    import os
    import struct

    if os.uname().machine != "x86_64":
        return None
    AUDIT_ARCH_X86_64 = 0xC000003E
    RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
    EPERM, ENOSYS = 1, 38
    LD_W_ABS, JEQ_K, JGE_K, AND_K, RET_K = 0x20, 0x15, 0x35, 0x54, 0x06
    deny = [
        41, 42, 43, 49, 50, 53, 288,          # socket connect accept bind listen socketpair accept4
        57, 58, 59, 322,                      # fork vfork execve execveat
        101, 310, 311, 312,                   # ptrace process_vm_readv/writev kcmp
        438,                                  # pidfd_getfd
        165, 166, 155, 161, 428, 429, 430, 431, 432, 433, 442,  # mount family, chroot
        272, 308,                             # unshare setns
        321, 298, 323, 425, 426, 427,         # bpf perf_event_open userfaultfd io_uring_*
        248, 249, 250,                        # add_key request_key keyctl
        246, 320, 175, 313, 176, 169,         # kexec_* *_module reboot
        167, 168, 163, 164, 227, 305, 159,    # swap acct clocks
        170, 171, 172, 173, 179, 443, 212, 103, 134, 135, 153, 154, 156,
        303, 304, 300,                        # *_handle_at fanotify_init
        105, 106, 113, 114, 117, 119, 122, 123, 116, 126,  # set*id setgroups capset
        141, 142, 144, 203, 314, 251, 256, 279, 440, 448,  # other processes' scheduling/memory
        319, 447, 133, 259,                   # memfd_create memfd_secret mknod mknodat
    ]
    # What the zygote itself needs: signals to its children, pidfds, and a
    # private socketpair per pre-forked child.
    procs = [62, 200, 234, 129, 297, 424, 434, 53]  # kill tkill tgkill rt_*sigqueueinfo pidfd_send_signal pidfd_open socketpair
    if kind == "full":
        deny += procs
    elif kind == "zygote":
        deny = [n for n in deny if n not in procs]
    elif kind == "child":
        deny = procs
    ins = []

    def op(code, k, jt=0, jf=0):
        ins.append(struct.pack("=HBBI", code, jt, jf, k))

    op(LD_W_ABS, 4)                       # seccomp_data.arch
    op(JEQ_K, AUDIT_ARCH_X86_64, 1, 0)
    op(RET_K, RET_KILL_PROCESS)
    op(LD_W_ABS, 0)                       # seccomp_data.nr
    op(JGE_K, 0x40000000, 0, 1)           # x32 ABI
    op(RET_K, RET_ERRNO | EPERM)
    for nr in sorted(set(deny)):
        op(JEQ_K, nr, 0, 1)
        op(RET_K, RET_ERRNO | EPERM)
    if kind != "zygote":
        # clone: threads only, never with namespace flags.
        CLONE_THREAD = 0x00010000
        NS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
        op(JEQ_K, 56, 0, 5)
        op(LD_W_ABS, 16)                  # args[0], low half
        op(AND_K, CLONE_THREAD | NS)
        op(JEQ_K, CLONE_THREAD, 0, 1)
        op(RET_K, RET_ALLOW)
        op(RET_K, RET_ERRNO | EPERM)
        # clone3 cannot be inspected (flags are behind a pointer): ENOSYS
        # makes glibc fall back to clone for threads.
        op(JEQ_K, 435, 0, 1)
        op(RET_K, RET_ERRNO | ENOSYS)
    if kind == "child":
        op(RET_K, RET_ALLOW)
        return b"".join(ins)
    # prlimit64: only on the calling process (pid 0).
    op(JEQ_K, 302, 0, 6)
    op(LD_W_ABS, 16)
    op(JEQ_K, 0, 0, 3)
    op(LD_W_ABS, 20)
    op(JEQ_K, 0, 0, 1)
    op(RET_K, RET_ALLOW)
    op(RET_K, RET_ERRNO | EPERM)
    # ioctl: no terminal input injection.
    op(JEQ_K, 16, 0, 5)
    op(LD_W_ABS, 24)                      # args[1], low half
    op(JEQ_K, 0x5412, 1, 0)               # TIOCSTI
    op(JEQ_K, 0x541C, 0, 1)               # TIOCLINUX
    op(RET_K, RET_ERRNO | EPERM)
    op(RET_K, RET_ALLOW)
    op(RET_K, RET_ALLOW)
    return b"".join(ins)


def _orq_seal_prepare(cfg):
    """Establish the process-wide layers and prepare the per-process ones.

    cfg: {"uid", "gid": the unprivileged ids used when running as root
    (default 65534); "read_paths": files/dirs the sandbox may read besides
    the stdlib; "disable": layers not to attempt (tests); "require": layers
    whose absence raises}. Returns a dict with "layers" (in force),
    "missing" ({layer: reason}) and what _orq_seal_apply needs."""
    import ctypes
    import os
    import stat
    import struct
    import sys

    cfg = cfg or {}
    disable = frozenset(cfg.get("disable") or ())
    layers, missing = [], {}
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    L = ctypes.c_long

    def sysc(*a):
        return libc.syscall(*[
            ctypes.c_void_p(None) if x is None
            else x if isinstance(x, (ctypes._SimpleCData, ctypes.Array)) else L(x)
            for x in a])

    def prctl(*a):
        return libc.prctl(*[ctypes.c_ulong(x) for x in a])

    def fail():
        e = ctypes.get_errno()
        return "%s (errno %d)" % (os.strerror(e), e)

    def want(name):
        if name in disable:
            missing[name] = "disabled"
            return False
        return True

    st = {"layers": layers, "missing": missing, "ruleset_fd": -1,
          "sysc": sysc, "prctl": prctl, "fail": fail, "ctypes": ctypes,
          "stdlib": []}

    # 1. no_new_privs: nothing this process or its children execute can gain
    #    privileges (also what Landlock and seccomp require unprivileged).
    if want("no_new_privs"):
        if prctl(38, 1, 0, 0, 0) == 0:  # PR_SET_NO_NEW_PRIVS
            layers.append("no_new_privs")
        else:
            missing["no_new_privs"] = fail()

    # 2. Never run as root: drop to an unprivileged uid/gid first. A uid
    #    change clears the parent-death signal: set it again afterwards.
    parent = os.getppid()
    if want("unprivileged_uid"):
        if os.getuid() == 0 or os.geteuid() == 0 or os.getgid() == 0:
            uid = int(cfg.get("uid") or 65534)
            gid = int(cfg.get("gid") or 65534)
            try:
                os.setgroups([])
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
                layers.append("unprivileged_uid")
            except OSError as e:
                missing["unprivileged_uid"] = str(e)
        else:
            layers.append("unprivileged_uid")
    prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != parent:
        os._exit(75)  # the parent died meanwhile

    # 3. A user namespace (no uid map is written: nothing inside maps to any
    #    host uid, least of all root) owning a fresh network namespace with
    #    only a loopback interface that is down: no network at all.
    want_ns = [want("user_namespace"), want("network_namespace")]
    if all(want_ns):
        if libc.unshare(0x10000000 | 0x40000000) == 0:  # CLONE_NEWUSER|CLONE_NEWNET
            layers += ["user_namespace", "network_namespace"]
            # Drop the capabilities the new namespace granted.
            hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
            data = (ctypes.c_uint32 * 6)()
            if sysc(126, hdr, data) != 0:  # capset
                raise OSError("capset after unshare failed: " + fail())
        else:
            why = fail()
            missing["user_namespace"] = why
            if libc.unshare(0x40000000) == 0:
                layers.append("network_namespace")
            else:
                missing["network_namespace"] = why

    # 4. Landlock: read the stdlib and the interpreter's libraries, nothing
    #    else; write nothing; no TCP bind/connect; no signals or abstract
    #    unix sockets outside the domain.
    stdlib = []
    for p in [os.path.dirname(os.__file__)] + list(sys.path):
        if p and os.path.isdir(p) and p not in stdlib:
            stdlib.append(p)
    st["stdlib"] = stdlib
    if want("landlock_fs"):
        abi = sysc(444, None, 0, 1)  # landlock_create_ruleset(VERSION)
        if abi < 1:
            missing["landlock_fs"] = "Landlock unavailable: " + fail()
        else:
            fs = (1 << 13) - 1
            if abi >= 2:
                fs |= 1 << 13   # REFER
            if abi >= 3:
                fs |= 1 << 14   # TRUNCATE
            if abi >= 5:
                fs |= 1 << 15   # IOCTL_DEV
            net = 3 if abi >= 4 and "landlock_net" not in disable else 0
            scoped = 3 if abi >= 6 and "landlock_scope" not in disable else 0
            size = 8 if abi < 4 else 16 if abi < 6 else 24
            attr = ctypes.create_string_buffer(struct.pack("=QQQ", fs, net, scoped)[:size], size)
            fd = sysc(444, attr, size, 0)
            if fd < 0:
                missing["landlock_fs"] = "landlock_create_ruleset: " + fail()
            else:
                st["ruleset_fd"] = fd
                for p in stdlib + list(cfg.get("read_paths") or ()):
                    try:
                        pfd = os.open(p, os.O_PATH | os.O_CLOEXEC)
                    except OSError:
                        continue
                    try:
                        acc = 4  # READ_FILE
                        if stat.S_ISDIR(os.fstat(pfd).st_mode):
                            acc |= 8  # READ_DIR
                        rule = ctypes.create_string_buffer(struct.pack("=Qi", acc, pfd), 12)
                        if sysc(445, fd, 1, rule, 0) != 0:
                            raise OSError("landlock_add_rule %s: %s" % (p, fail()))
                    finally:
                        os.close(pfd)
                layers.append("landlock_fs")
                if net:
                    layers.append("landlock_net")
                elif "landlock_net" not in disable:
                    missing["landlock_net"] = "Landlock ABI %d < 4" % abi
                else:
                    missing["landlock_net"] = "disabled"
                if scoped:
                    layers.append("landlock_scope")
                elif "landlock_scope" not in disable:
                    missing["landlock_scope"] = "Landlock ABI %d < 6" % abi
                else:
                    missing["landlock_scope"] = "disabled"
    if "landlock_fs" not in layers:
        for n in ("landlock_net", "landlock_scope"):
            missing.setdefault(n, missing.get("landlock_fs", "Landlock unavailable"))

    # 5. seccomp: programs built now, installed per process.
    if want("seccomp"):
        full = _orq_seccomp_program("full")
        if full is None:
            missing["seccomp"] = "no seccomp program for %s" % os.uname().machine
        elif prctl(21, 0, 0, 0, 0) < 0:  # PR_GET_SECCOMP
            missing["seccomp"] = "seccomp unavailable: " + fail()
        else:
            class _Prog(ctypes.Structure):
                _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

            for kind, prog in (("full", full), ("zygote", _orq_seccomp_program("zygote")),
                               ("child", _orq_seccomp_program("child"))):
                buf = ctypes.create_string_buffer(prog, len(prog))
                st["bpf_" + kind] = (buf, _Prog(len(prog) // 8, ctypes.addressof(buf)))
            layers.append("seccomp")

    need = [n for n in (cfg.get("require") or ()) if n not in layers]
    if need:
        raise OSError("required sealing layers not in force: " + ", ".join(
            "%s (%s)" % (n, missing.get(n, "unknown")) for n in need))
    return st


def _orq_seal_apply(st, role="full"):
    """Apply the per-process layers prepared by _orq_seal_prepare: Landlock
    restrict_self (a new, nested domain per process), RLIMIT_NOFILE,
    RLIMIT_FSIZE, RLIMIT_CORE and the seccomp filter (last: it forbids the
    calls that came before). role is "full" (a process sealed on its own),
    "zygote" or "child" (a fork-server child: the zygote's filter is
    inherited, the child stacks the rest). Raises if a prepared layer
    cannot be applied."""
    import os
    import resource

    sysc, prctl, fail, ctypes = st["sysc"], st["prctl"], st["fail"], st["ctypes"]
    layers = st["layers"]
    fd = st["ruleset_fd"]
    if "landlock_fs" in layers:
        if sysc(446, fd, 0) != 0:  # landlock_restrict_self
            raise OSError("landlock_restrict_self: " + fail())
    if role != "zygote":
        if fd >= 0:
            os.close(fd)
            st["ruleset_fd"] = -1
        for res, n in ((resource.RLIMIT_NOFILE, 64), (resource.RLIMIT_FSIZE, 0),
                       (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(res, (n, n))
    if "seccomp" in layers:
        _, prog = st["bpf_" + role]
        # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        if prctl(22, 2, ctypes.addressof(prog), 0, 0) != 0:
            raise OSError("seccomp filter: " + fail())


def _orq_spawn_seal(req):
    """Spawn mode: seal this process if the request asks for it. Returns None
    when user code may run, else the response bytes (fail closed). Op
    "probe" reports the layers in force and never runs code."""
    import json

    op = req.get("op", "execute")
    cfg = req.get("seal")
    if cfg is None and op != "probe":
        return None
    try:
        st = _orq_seal_prepare(cfg or {})
        _orq_seal_apply(st)
    except BaseException as e:  # noqa: BLE001
        return json.dumps({"success": False, "error_kind": "internal",
                           "error": "sealing failed: %s: %s"
                           % (type(e).__name__, e)}).encode("utf-8")
    if op == "probe":
        return json.dumps({"success": True, "output": {
            "layers": st["layers"], "missing": st["missing"],
            "stdlib": st["stdlib"]}}).encode("utf-8")
    return None


def _orq_child_fail(e):
    """A fork-server child that cannot serve: an internal error on fd 3
    (when it is the response pipe already), then exit 70."""
    import json
    import os

    try:
        os.write(3, json.dumps({"success": False, "error_kind": "internal",
                                "error": "fork-server child: %s: %s"
                                % (type(e).__name__, e)}).encode("utf-8"))
    finally:
        os._exit(70)


def _orq_forkserver_child(sock_fd, st, zygote_pid, rules):
    """A pre-forked child of the Python loop. While idle (off the critical
    path): make itself a process group leader, close every descriptor but
    its private socket (whose other end the zygote hands to Go), seal. Then
    wait for the four descriptors of one execution (SCM_RIGHTS, sent by
    Go), take them as fd 0-3 and serve. (forkcore.c's orq_child does the
    same in C.) Never returns."""
    import array
    import os
    import socket

    try:
        st["prctl"](1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
        if os.getppid() != zygote_pid:
            os._exit(75)
        # Its own process group: should a layer that forbids fork not be in
        # force, whatever it forks is killed with the group (Go repeats the
        # kill until the group is empty), never the zygote.
        os.setpgid(0, 0)
        lo = 3
        for keep in sorted(k for k in (sock_fd, st["ruleset_fd"]) if k >= 3):
            os.closerange(lo, keep)
            lo = keep + 1
        os.closerange(lo, 1 << 20)
        _orq_seal_apply(st, "child")
        sock = socket.socket(fileno=sock_fd)
        size = array.array("i").itemsize
        _, anc, _, _ = sock.recvmsg(16, socket.CMSG_SPACE(4 * size))
        fds = array.array("i")
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - (len(data) % size)])
        if len(fds) != 4:
            os._exit(0)  # shut down while idle
        for i, f in enumerate(fds):
            os.dup2(f, i)
        os.closerange(4, 1 << 20)
    except BaseException as e:  # noqa: BLE001
        _orq_child_fail(e)
    _orq_forkserver_serve(rules)


def _orq_forkserver_serve(rules):
    """A fork-server child, sealed, holding the execution's descriptors as
    fd 0-3: read the request from fd 0, run it, write the response to fd 3
    and exit. One execution per process; never returns.

    No warm-up run happens in a child: the zygote ran one before it forked,
    so the caches are in the shared heap; a second one per child only
    pre-copied ~280 pages, which cost more throughput (the refill competes
    for the cores) than the faults it saved an execution."""
    import json
    import os
    import sys

    _orq_one_shot[0] = True
    try:
        chunks = []
        while True:
            b = os.read(0, 1 << 16)
            if not b:
                break
            chunks.append(b)
        req = json.loads(b"".join(chunks))
        if not isinstance(req, dict) or req.get("op", "execute") != "execute":
            raise ValueError("bad request")
        if req.get("rules") is None:  # null: the zygote's table, parsed once
            req["rules"] = rules
    except BaseException as e:  # noqa: BLE001
        _orq_child_fail(e)
    if not req.get("limits_applied"):  # else Go set them with prlimit
        _orq_apply_limits(req)
    resp = _orq_execute(req)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    try:
        view = memoryview(resp)
        while view:
            view = view[os.write(3, view):]
        # EOF for the parent now, before the address space is torn down:
        # it has the whole result and need not wait for the exit.
        for fd in (3, 1, 2, 0):
            os.close(fd)
    except OSError:
        os._exit(71)
    os._exit(0)


# The largest control message Go sends a zygote (a warm message carries a
# body of at most 16 KB, JSON-escaped); forkcore.c has the same bound.
_orq_control_max = 1 << 17


def _orq_forkserver_main():
    """The zygote. Reads its config (JSON: preload, seal, pool, rules: the
    rules table used when a request carries none) from stdin, imports what
    children need, seals itself, then serves the control socket on fd 3
    (SOCK_SEQPACKET, one JSON message per packet). It keeps `pool`
    (default 2) children pre-forked, each warming up and sealing itself
    while it waits on a private socketpair, and hands each one's end of that
    socketpair and a pidfd to Go at once: Go sends an execution's four
    descriptors straight to a ready child, without a hop through here. The
    zygote only refills the pool, reaps, and reports every exit:

      zygote -> Go  {"t":"ready","pid","layers","missing"} | {"t":"fatal","error"}
      zygote -> Go  {"t":"idle","pid"} with SCM_RIGHTS [child socket, pidfd]
      Go -> child   "r" with SCM_RIGHTS [stdin, stdout, stderr, response]
      Go -> zygote  {"t":"took","pid"}  (refill the pool)
      zygote -> Go  {"t":"exit","pid","status","utime","stime"} (every
                    child, reaped, whether it ran an execution or died idle)
      Go -> zygote  {"t":"warm","code","allowed_imports"} (a body a child
                    accepted: check and compile it here once, so children
                    forked from now on skip that; see _orq_warm)

    EOF on the control socket (the plugin went away) kills every child and
    exits."""
    import array
    import gc
    import json
    import os
    import select
    import signal
    import socket
    import sys

    ctl = socket.socket(fileno=3)

    def send(doc, fds=()):
        data = json.dumps(doc).encode("utf-8")
        if fds:
            ctl.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                  array.array("i", fds))])
        else:
            ctl.send(data)

    try:
        raw = b""
        while True:
            b = os.read(0, 1 << 16)
            if not b:
                break
            raw += b
        cfg = json.loads(raw or b"{}")
        # What every child needs, imported once.
        for m in ("ast", "builtins", "json", "types", "linecache", "traceback",
                  "string", "resource"):
            try:
                __import__(m)
            except ImportError:
                pass
        for m in cfg.get("preload") or ():
            try:
                __import__(m)
            except Exception as e:  # noqa: BLE001
                sys.stderr.write("orqest fork-server: preload %s: %s\n" % (m, e))
        # The C loop (forkcore.c), when Go passed it (a sealed memfd): loaded
        # before the uid drop and Landlock, which would forbid opening it.
        core, core_error = None, ""
        core_fd = cfg.get("core_fd")
        if isinstance(core_fd, int) and core_fd >= 0:
            try:
                import ctypes
                core = ctypes.PyDLL("/proc/self/fd/%d" % core_fd)
                built = ctypes.c_ulong.in_dll(core, "orq_python_hexversion").value
                if built >> 16 != sys.hexversion >> 16:
                    raise ImportError("built for Python %d.%d, this is %d.%d" % (
                        built >> 24, (built >> 16) & 0xFF,
                        sys.hexversion >> 24, (sys.hexversion >> 16) & 0xFF))
                core.orq_zygote_loop.argtypes = [ctypes.c_int, ctypes.c_int,
                                                 ctypes.c_int, ctypes.c_void_p,
                                                 ctypes.py_object, ctypes.py_object]
                core.orq_zygote_loop.restype = ctypes.c_int
            except Exception as e:  # noqa: BLE001
                core, core_error = None, "%s: %s" % (type(e).__name__, e)
            finally:
                os.close(core_fd)
        st = _orq_seal_prepare(cfg.get("seal") or {})
        _orq_seal_apply(st, "zygote")
        rules = cfg.get("rules") or {}
        # Once here rather than in every child: the sets the checker, the
        # builtins and the audit hook derive from the rules table, the
        # ballast, and the modules and caches a first execution warms up (a
        # trusted body; the audit hook is disarmed again when it returns).
        _orq_execute({"code": "x = [i * 2 for i in range(8)]\nreturn {'n': sum(x)}",
                      "args": {}, "allowed_imports": [], "rules": rules})
        _orq_env([], rules, keep=True)  # what most executions use
        _orq_ballast_ready()
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException as e:  # noqa: BLE001
        try:
            send({"t": "fatal", "error": "%s: %s" % (type(e).__name__, e)})
        finally:
            os._exit(1)

    me = os.getpid()
    gc.collect()
    # Give back the heap pages nothing uses any more (the program's AST,
    # the warm-up's garbage): pages a fork need not map and a child's exit
    # need not unmap.
    try:
        import ctypes
        ctypes.CDLL(None).malloc_trim(0)
    except Exception:  # noqa: BLE001 - not glibc: keep them
        pass
    gc.freeze()  # keep the heap shared copy-on-write with the children
    send({"t": "ready", "pid": me, "layers": st["layers"], "missing": st["missing"],
          "core": core is not None, "core_error": core_error})
    pool = max(1, min(int(cfg.get("pool") or 2), 8))

    if core is not None:
        import ctypes

        ruleset = st["ruleset_fd"] if "landlock_fs" in st["layers"] else -1
        bpf = st.get("bpf_child") if "seccomp" in st["layers"] else None
        # A new child, sealed, fd 0-3 in place, calls the last argument and
        # ends there (ctl, whose fd 3 is now the response, is never closed:
        # the child leaves by os._exit). The call returns only if the
        # zygote cannot serve (poll failed).
        core.orq_zygote_loop(ctl.fileno(), pool, ruleset,
                             ctypes.addressof(bpf[1]) if bpf else None,
                             lambda msg: _orq_warm(msg, rules),
                             lambda: _orq_forkserver_serve(rules))
        os._exit(1)

    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)
    children = {}  # pidfd -> pid
    idle = set()   # pids pre-forked and not yet taken by Go

    def spawn_idle():
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
        except BaseException:
            a.close()
            b.close()
            raise
        if pid == 0:
            _orq_forkserver_child(b.fileno(), st, me, rules)
        b.close()
        try:
            os.setpgid(pid, pid)  # as the child does: no window either way
        except OSError:
            pass
        try:
            pfd = os.pidfd_open(pid)
        except BaseException:
            a.close()
            raise
        children[pfd] = pid
        poller.register(pfd, select.POLLIN)
        idle.add(pid)
        try:
            send({"t": "idle", "pid": pid}, [a.fileno(), pfd])
        except OSError:
            shutdown()
        finally:
            a.close()

    def shutdown():
        for pfd, pid in list(children.items()):
            try:
                signal.pidfd_send_signal(pfd, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        os._exit(0)

    fdsize = array.array("i").itemsize
    # One receive buffer for every control message (a fresh 128 KB one
    # per message would be an mmap and munmap each time).
    rbuf = bytearray(_orq_control_max)
    while True:
        try:
            while len(idle) < pool:
                # Messages first (an exit to report, a take): refilling the
                # pool waits while one is pending and a child is ready.
                if idle and poller.poll(0):
                    break
                spawn_idle()
        except OSError as e:
            sys.stderr.write("orqest fork-server: pre-fork failed: %s\n" % e)
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        for fd, ev in events:
            if fd != ctl.fileno():
                pid = children.pop(fd)
                poller.unregister(fd)
                try:
                    _, status, ru = os.wait4(pid, 0)
                except ChildProcessError:
                    status, ru = 0, None
                os.close(fd)
                idle.discard(pid)
                try:
                    send({"t": "exit", "pid": pid, "status": status,
                          "utime": ru.ru_utime if ru else 0.0,
                          "stime": ru.ru_stime if ru else 0.0})
                except OSError:
                    shutdown()
                continue
            try:
                n, anc, _, _ = ctl.recvmsg_into([rbuf], socket.CMSG_SPACE(8 * fdsize))
                msg = bytes(rbuf[:n])
            except InterruptedError:
                continue
            except OSError:
                shutdown()
            for level, typ, data in anc:  # none expected
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    extra = array.array("i")
                    extra.frombytes(data[:len(data) - (len(data) % fdsize)])
                    for f in extra:
                        os.close(f)
            if not msg and not anc:
                shutdown()
            try:
                doc = json.loads(msg)
                if doc.get("t") == "took":
                    idle.discard(doc.get("pid"))
                elif doc.get("t") == "warm":
                    _orq_warm(msg, rules)
            except Exception as e:  # noqa: BLE001
                sys.stderr.write("orqest fork-server: bad control message: %s\n" % e)


if __name__ == "__main__":
    import sys as _orq_sys

    if _orq_sys.argv[1:] == ["forkserver"]:
        del _orq_sys
        _orq_forkserver_main()
    else:
        del _orq_sys
        _orq_main()
