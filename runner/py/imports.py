# imports.py — the runner, part 1 of 4: limits, the import shim, the run-time guards
# and the audit hook.
#
# The runner program every orqest-sandbox tier executes is the in-child
# checker (rules/checker.py) followed by runner/py/{imports,execute,seal,
# zygote}.py, in that order, as one module (Program in runner/protocol.go).
# Protocol (runner/protocol.go): one JSON request on stdin, one JSON response
# on fd 3; the user's print() output goes to the real fd 1 / fd 2, which the
# host captures.
#
# Only names prefixed `_orq_` are defined at module level. All runner state
# lives in function locals; the user's code runs in a fresh globals dict that
# holds only a curated `__builtins__` dict and `__name__`, so it cannot reach
# this module's globals.
#
# Entry points, reusable by other backends:
#   _orq_apply_limits(req)   set RLIMIT_AS / RLIMIT_CPU from the request
#   _orq_execute(req)        validate + run one request, return the response
#                            as UTF-8 JSON bytes (never raises)   [execute.py]
#   _orq_execute_child(req)  the same in a process of its own: exits with
#                            _orq_exit_memory if no memory is left for a
#                            response                              [execute.py]
#   _orq_main()              the spawn-mode driver: stdin -> _orq_execute -> fd 3
#   _orq_forkserver_main()   the fork-server (zygote) driver      [zygote.py]

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
    only use names from its closure. With the C hook, made in C: an armed
    session's interpreter builds its next call's guards without the
    function.__new__ event the hook refuses."""
    if _orq_core:
        return _orq_core[0].isolate(fn)
    import types

    return types.FunctionType(fn.__code__, {"__builtins__": {}}, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def _orq_attr_name_ok(rules):
    """Return a predicate: may user code read attribute `name` by string?
    The static attribute rules of the rules table, applied at run time to
    every dotted part: no dunder but the allowlisted ones, no forbidden
    attribute (frames, code objects, modules), no str.format method, no
    private name, no reserved prefix. It uses only names from its closure."""
    rules = rules or {}
    dunder = rules.get("dunder") or {}
    private = rules.get("private") or {}
    dunder_allow = frozenset(dunder.get("allow") or ())
    private_allow = frozenset(private.get("allow") or ())
    # str.format/format_map walk attributes named in a template at run time
    forbidden = frozenset((rules.get("forbidden_attributes") or {}).keys()) | frozenset(
        rules.get("format_methods") or ())
    reserved = tuple((rules.get("reserved_prefixes") or {}).get("prefixes") or ())
    _type, _str, _len = type, str, len

    def ok(name):
        if _type(name) is not _str or not name:
            return False
        for p in name.split("."):
            if not p or p in forbidden or (reserved and p.startswith(reserved)):
                return False
            if p[:1] == "_":
                if _len(p) >= 5 and p[:2] == "__" and p[-2:] == "__":
                    if p not in dunder_allow:
                        return False
                elif p not in private_allow:
                    return False
        return True
    return _orq_isolate(ok)


def _orq_guarded_builtins(rules):
    """The guarded builtins of rules.json guarded_builtins: getattr and
    hasattr that refuse (TypeError) a name the attribute rules forbid, so a
    name computed at run time reaches no more than a literal one."""
    import builtins

    ok = _orq_attr_name_ok(rules)
    # hasattr hands out a bool: it may test the dunders readable of the
    # code's own objects (hasattr(obj, "__dict__")) on anything
    testable = frozenset((rules.get("classes") or {}).get("hasattr_dunders") or ())
    real_getattr, real_hasattr = builtins.getattr, builtins.hasattr
    _TypeError, _type, _str = TypeError, type, str

    def getattr(obj, name, *default):
        if not ok(name):
            raise _TypeError("getattr: %r is not an attribute the sandbox lets code read by "
                             "name; read public attributes (obj.name)" % (name,))
        return real_getattr(obj, name, *default)

    def hasattr(obj, name):
        if not ok(name) and not (_type(name) is _str and name in testable):
            raise _TypeError("hasattr: %r is not an attribute the sandbox lets code test by "
                             "name" % (name,))
        return real_hasattr(obj, name)

    out = {"getattr": _orq_isolate(getattr), "hasattr": _orq_isolate(hasattr)}
    return {n: out[n] for n in rules.get("guarded_builtins") or () if n in out}


def _orq_make_import(allowed_imports, rules=None, user_builtins=None, made=None):
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
    # A listed package allows its reviewed submodules (package_submodules),
    # imported with it before the code runs (_orq_env).
    subs = rules.get("package_submodules") or {}
    allowed = allowed | frozenset(
        s for m in allowed if isinstance(subs.get(m), list)
        for s in subs[m] if isinstance(s, str) and s.startswith(m + "."))
    hidden_attrs = frozenset((rules.get("forbidden_attributes") or {}).keys())
    surfaces = {m: frozenset(ns) for m, ns in (rules.get("module_surfaces") or {}).items()
                if isinstance(m, str) and isinstance(ns, list)}
    guards = _orq_guards(user_builtins, rules, made)
    # With an egress proxy, the allowed modules of rules.json egress_modules are
    # the runner's views; urllib (the package) then offers them too.
    egress = {}
    served = frozenset(rules.get("egress_modules") or ())
    if _orq_egress and any(m in allowed for m in served):
        egress = {m: v for m, v in _orq_egress_views(_orq_egress[0]).items()
                  if m in allowed and m in served}
    # guards of names that exist only once their module is imported: built
    # now (a function built while the audit hook is armed is refused), given
    # the real one when a view first hands it out
    wrappers = {("dataclasses", "dataclass"): _orq_dataclass_guard()}
    _isinstance, _str, _sorted, _vars, _list, _setattr, _type, _tuple, _hasattr = (
        isinstance, str, sorted, vars, list, setattr, type, tuple, hasattr)
    _ImportError, _RuntimeError = ImportError, RuntimeError

    def permitted(name):
        return name.partition(".")[0] in allowed

    def view(mod, memo):
        key = mod.__name__
        got = memo.get(key)
        if got is not None:
            return got
        v = ModuleType(key, mod.__doc__ if _isinstance(mod.__doc__, _str) else None)
        memo[key] = v
        surface = surfaces.get(key)
        for k, x in _list(_vars(mod).items()):
            # (a module-attribute name the policy allows as a module is
            # fine: socket.socket with socket allowed)
            if k[:1] == "_" or (k in hidden_attrs and k not in allowed):
                continue
            # A reviewed module hands out its surface only: no module-level
            # state (copy.dispatch_table), registries or re-exported modules.
            if surface is not None and k not in surface:
                continue
            if _isinstance(x, ModuleType):
                if not permitted(x.__name__):
                    continue
                x = view(x, memo)
            g = guards.get((key, k))
            if g is not None:
                x = g
            wrap = wrappers.get((key, k))
            if wrap is not None:
                guard, real = wrap
                if not real:
                    real.append(x)
                x = guard
            _setattr(v, k, x)
        return v

    def shim(name, globals=None, locals=None, fromlist=(), level=0):
        if _type(fromlist) is _list and not fromlist and level == 0 and _type(name) is _str:
            # PyImport_Import from C code (see above): import, hand out nothing.
            real_import(name, None, None, (), 0)
            return None
        if level != 0:
            raise _ImportError("relative imports are not allowed in the sandbox")
        if egress and (name in egress or name == "urllib"):
            return egress_import(name, fromlist)
        if not _isinstance(name, _str) or not permitted(name):
            raise _ImportError(
                "import of %r is not allowed (allowed imports: %s)"
                % (name, ", ".join(_sorted(allowed)) or "none"))
        if name not in surfaces and name.partition(".")[0] in surfaces:
            raise _ImportError(
                "import of %r is not allowed: only the reviewed parts of %r are "
                "(import %s and use what it offers)" % (name, name.partition(".")[0], name.partition(".")[0]))
        asked = fromlist
        if fromlist is not None:
            asked = fromlist = _tuple(f for f in fromlist if _type(f) is _str)
            # only names of the surface: a fromlist imports submodules
            # (from urllib import request would run urllib.request's code)
            surface = surfaces.get(name)
            fromlist = _tuple(f for f in fromlist if surface is None or f in surface)
        try:
            mod = real_import(name, None, None, fromlist, 0)
        except _RuntimeError as e:
            # A submodule imported for the first time by the code runs its
            # import under the audit hook, which may refuse what it does.
            if name in allowed or not _str(e).startswith("sandbox:"):
                raise
            raise _ImportError(
                "import of %r failed: importing it does what the sandbox refuses (%s); "
                "list %r in allowed_imports, so it is imported before the code runs"
                % (name, e, name)) from None
        v = view(mod, {})
        # `from m import x` falls back to sys.modules["m.x"] when the view
        # has no x: that would hand out the real submodule.
        for f in asked or ():
            if f != "*" and not _hasattr(v, f):
                raise _ImportError(
                    "cannot import name %r from %r: it is not in the module's reviewed "
                    "surface (import what the module offers, or list %r in allowed_imports "
                    "if it is a reviewed submodule)" % (f, name, name + "." + f))
        return v

    def egress_import(name, fromlist):
        asked = _tuple(f for f in fromlist or () if _type(f) is _str)
        if name == "urllib":
            v = view(real_import("urllib", None, None, (), 0), {}) if permitted("urllib") \
                else ModuleType("urllib")
        else:
            v = egress[name]
            if not asked:  # import urllib.request: binds urllib
                v = view(real_import("urllib", None, None, (), 0), {}) if permitted("urllib") \
                    else ModuleType("urllib")
        if v.__name__ == "urllib":
            for m, mv in egress.items():
                _setattr(v, m.partition(".")[2], mv)
        for f in asked:
            if f != "*" and not _hasattr(v, f):
                raise _ImportError(
                    "cannot import name %r from %r: the sandbox's %s offers %s" % (
                        f, name, name, ", ".join(k for k in _sorted(_vars(v)) if k[:1] != "_")))
        return v

    view = _orq_isolate(view)
    permitted = _orq_isolate(permitted)
    egress_import = _orq_isolate(egress_import)
    return _orq_isolate(shim), real_import, allowed


def _orq_dataclass_guard():
    """dataclasses.dataclass as handed to user code. The real one builds
    the source of __init__, __repr__, ... from the class's annotation names
    and exec()s it with the real builtins: a class whose annotations are
    not identifiers (typing.TypedDict('T', {'a=__import__("os")...': int}))
    would inject code. The guard takes only classes whose own annotations
    are a plain dict of identifiers (no keyword, no dunder). Returns
    (guard, box): the caller puts the real dataclass into box."""
    import keyword

    box = []

    iskeyword = keyword.iskeyword
    _type, _isinstance, _dict, _str, _TypeError, _cls, _len = (
        type, isinstance, dict, str, TypeError, type, len)

    def check(c):
        if not _isinstance(c, _cls):
            raise _TypeError("dataclass() takes a class")
        ann = _cls.__getattribute__(c, "__dict__").get("__annotations__", {})
        if _type(ann) is not _dict:
            raise _TypeError("dataclass(): the class's annotations must be a plain dict")
        for k in ann:
            if (_type(k) is not _str or not k.isidentifier() or iskeyword(k)
                    or (_len(k) >= 5 and k[:2] == "__" and k[-2:] == "__")):
                raise _TypeError("dataclass(): field names must be plain identifiers, "
                                 "not %r" % (k,))

    def dataclass(cls=None, /, **kw):
        def wrap(c):
            check(c)
            return box[0](c, **kw)
        if cls is None:
            return wrap
        return wrap(cls)

    check = _orq_isolate(check)
    dataclass = _orq_isolate(dataclass)
    dataclass.__module__ = "dataclasses"
    return dataclass, box


def _orq_guards(user_builtins, rules=None, made=None):
    """Guarded replacements for public stdlib helpers that turn strings into
    attribute access or code, keyed by (module, name). They are handed out
    in module views instead of the real ones.

    - functools.update_wrapper / wraps: the real ones getattr/setattr any
      names passed as `assigned`/`updated` (`updated=['__globals__']` copies
      a module's globals, builtins included, into the caller's globals).
    - operator.attrgetter / methodcaller: they turn strings into attribute
      reads and method calls. Only names the attribute rules allow (every
      dotted part: no dunder, private, frame or code attribute) pass.
      Only the default names (or a subset) are accepted, and only a function
      the tool body defined may be the wrapper.
    - functools.singledispatch: `register(func)` without a class reads the
      class from the annotations with typing.get_type_hints, which eval()s
      string annotations in the function's globals. The guarded register
      takes the class from the annotation itself and accepts only classes
      (and unions of classes).
    - string.Formatter: the guarded Formatter of _orq_format_guard (the
      real one's get_field reads any attribute a template names).
    - typing.get_type_hints: the real one eval()s string annotations in
      the object's globals and reads the annotations of any object. The
      guard reads only the `__annotations__` of a function the body
      defined or of the classes the body made on a class's MRO (`made`),
      evaluates nothing, and resolves a string annotation only when it is
      a name bound in the function's globals or a builtin class ('int';
      else it stays the string); a string that is not written like a type
      (a call: "__import__('os')") is refused.
    Every guard is rebound to empty globals (_orq_isolate) and uses only
    names from its closure."""
    import functools
    import types

    FunctionType, UnionType = types.FunctionType, types.UnionType
    real_update_wrapper = functools.update_wrapper
    real_singledispatch = functools.singledispatch
    WA, WU = tuple(functools.WRAPPER_ASSIGNMENTS), tuple(functools.WRAPPER_UPDATES)
    _type, _tuple, _isinstance, _TypeError = type, tuple, isinstance, TypeError
    _str, _all, _next, _iter, _dict, _cls, _any = str, all, next, iter, dict, type, any
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

    import operator

    real_attrgetter, real_methodcaller = operator.attrgetter, operator.methodcaller

    name_ok = _orq_attr_name_ok(rules)

    def plain(name, what):
        if not name_ok(name):
            raise _TypeError("operator.%s: only public attribute names are allowed in the "
                             "sandbox (no dunder, private, frame or code attribute), not %r"
                             % (what, name))

    def attrgetter(attr, *attrs):
        for a in (attr,) + attrs:
            plain(a, "attrgetter")
        return real_attrgetter(attr, *attrs)

    def methodcaller(name, *args, **kwargs):
        plain(name, "methodcaller")
        if "." in name:
            raise _TypeError("operator.methodcaller: %r is not a method name" % (name,))
        return real_methodcaller(name, *args, **kwargs)

    made = {} if made is None else made
    tgetattr = type.__getattribute__
    _id, _reversed, _None, _NoneType = id, reversed, None, type(None)

    # the characters of a type written as a string ('list[str]',
    # 'Optional[Item]', 'int | None'): no call, no operator but |
    type_chars = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                           "_.[], |'\"-")
    _ValueError = ValueError

    def hints_of(ann, ns, out):
        if _type(ann) is not _dict:
            return
        for k, v in ann.items():
            if _type(v) is _str:
                if v.isidentifier():
                    # a name of the function's globals, or a builtin class
                    got = ns.get(v, ub.get(v) if ub is not None else None)
                    if got is not None and (v in ns or _isinstance(got, _cls)):
                        v = got
                elif not type_chars.issuperset(v):
                    raise _ValueError(
                        "typing.get_type_hints: the annotation of %r is the string %r, which is "
                        "not a type; the sandbox evaluates no annotation: annotate with the type "
                        "itself (x: int, x: list[str])" % (k, v))
            elif v is _None:
                v = _NoneType
            out[k] = v

    def get_type_hints(obj, globalns=None, localns=None, include_extras=False):
        out = {}
        if _type(obj) is FunctionType and ub is not None and obj.__builtins__ is ub:
            hints_of(obj.__annotations__, obj.__globals__, out)
        elif _isinstance(obj, _cls) and made.get(_id(obj)) is obj:
            for k in _reversed(tgetattr(obj, "__mro__")):
                if made.get(_id(k)) is k:
                    hints_of(tgetattr(k, "__dict__").get("__annotations__"), {}, out)
        else:
            raise _TypeError("typing.get_type_hints: in the sandbox only of classes and "
                             "functions the code defines (get_type_hints(MyClass)), not of %s "
                             "objects" % _type(obj).__name__)
        return out

    hints_of = _orq_isolate(hints_of)
    get_type_hints = _orq_isolate(get_type_hints)
    get_type_hints.__module__ = "typing"
    plain = _orq_isolate(plain)
    attrgetter = _orq_isolate(attrgetter)
    methodcaller = _orq_isolate(methodcaller)
    attrgetter.__module__ = methodcaller.__module__ = "operator"
    is_class_or_union = _orq_isolate(is_class_or_union)
    names = _orq_isolate(names)
    update_wrapper = _orq_isolate(update_wrapper)
    wraps = _orq_isolate(wraps)
    singledispatch = _orq_isolate(singledispatch)
    for f in (update_wrapper, wraps, singledispatch):
        f.__module__ = "functools"
    return {("functools", "update_wrapper"): update_wrapper,
            ("functools", "wraps"): wraps,
            ("functools", "singledispatch"): singledispatch,
            ("operator", "attrgetter"): attrgetter,
            ("operator", "methodcaller"): methodcaller,
            ("string", "Formatter"): _orq_format_guard()[1],
            ("typing", "get_type_hints"): get_type_hints}


# The request's extra_read_paths (runner.Request.ExtraReadPaths), set by
# the runner before it arms the audit hook.
_orq_audit_extra_read = []


# The session's egress proxy (runner.Egress: {"url", "host", "port"}), set
# by _orq_seal_prepare from the seal config: [proxy] or []. With it the
# modules of rules.json egress_modules are the runner's views (_orq_egress_views),
# and the audit hook lets a socket connect to the proxy alone.
_orq_egress = []

# _orq_egress_views by proxy URL.
_orq_egress_built = {}


def _orq_egress_views(eg):
    """The runner-made urllib.request and urllib.error for the egress proxy
    eg: {"urllib.request": module, "urllib.error": module}: the modules of
    rules.json egress_modules while there is an egress proxy (they are not
    OS modules then: the audit hook's OS events stay refused).

    urllib.request offers urlopen(url_or_Request, data=None, timeout=...),
    Request, HTTPError and URLError; urllib.error offers HTTPError, URLError
    and ContentTooShortError. urlopen opens http:// and https:// URLs only,
    through an opener of the runner's that has the HTTP and HTTPS handlers,
    redirects and errors, and the proxy fixed to eg's URL: no file://,
    ftp:// or data: handler, no handler, opener or proxy the code chooses
    (a Request is copied into a fresh one: its URL, data, headers, method).
    A refusal of the proxy is an HTTPError (plain HTTP: 403 with the
    policy's words as its message) or a URLError (a refused CONNECT:
    "Tunnel connection failed: 403 Forbidden (...)"). Built before the
    audit hook is armed; everything it uses is in the closure."""
    got = _orq_egress_built.get(eg["url"])
    if got is not None:  # built once per process: a session's later calls run armed
        return got
    import encodings.idna  # noqa: F401 - http.client encodes host names with it
    import io
    import socket
    import types
    import urllib.error as ue
    import urllib.request as ur

    proxy = eg["url"]
    Request, HTTPError, URLError = ur.Request, ue.HTTPError, ue.URLError
    BytesIO = io.BytesIO
    default_timeout = socket._GLOBAL_DEFAULT_TIMEOUT
    _type, _str, _isinstance, _dict, _TypeError = type, str, isinstance, dict, TypeError

    class _Errors(ur.HTTPDefaultErrorHandler):
        # The proxy's refusal (X-Orqest-Egress: refused) says why in its
        # body: that is the error's message.
        def http_error_default(self, req, fp, code, msg, hdrs):
            if hdrs.get("X-Orqest-Egress") == "refused":
                body = fp.read(4096)
                fp.close()
                text = body.decode("utf-8", "replace").strip() or msg
                raise HTTPError(req.full_url, code, "%s: %s" % (msg, text), hdrs, BytesIO(body))
            raise HTTPError(req.full_url, code, msg, hdrs, fp)

    opener = ur.OpenerDirector()
    https = getattr(ur, "HTTPSHandler", None)  # None: no ssl here (https:// is an unknown type)
    for h in (ur.ProxyHandler({"http": proxy, "https": proxy}), ur.HTTPHandler(),
              https() if https else None, _Errors(), ur.HTTPRedirectHandler(), ur.HTTPErrorProcessor(),
              ur.UnknownHandler()):
        if h is not None:
            opener.add_handler(h)
    open_ = opener.open

    def urlopen(url, data=None, timeout=default_timeout):
        if _type(url) is _str:
            req = Request(url, data=data)
        elif _isinstance(url, Request):
            req = Request(url.full_url, data=url.data if data is None else data,
                          headers=_dict(url.header_items()), method=url.get_method())
        else:
            raise _TypeError("urlopen: pass a URL (str) or a urllib.request.Request")
        if req.type not in ("http", "https"):
            raise URLError("the sandbox's urlopen fetches http:// and https:// URLs only, "
                           "through the session's egress proxy (not %s:)" % req.type)
        return open_(req, timeout=timeout)

    urlopen.__module__ = "urllib.request"
    req_mod = types.ModuleType("urllib.request", "urlopen through the session's egress proxy")
    err_mod = types.ModuleType("urllib.error", ue.__doc__)
    for k, v in (("urlopen", _orq_isolate(urlopen)), ("Request", Request), ("HTTPError", HTTPError),
                 ("URLError", URLError)):
        setattr(req_mod, k, v)
    for k in ("HTTPError", "URLError", "ContentTooShortError"):
        setattr(err_mod, k, getattr(ue, k))
    got = _orq_egress_built[eg["url"]] = {"urllib.request": req_mod, "urllib.error": err_mod}
    return got


# The runner's audit hook in C (runner/forkcore/audit.h) when this process
# has it: [module]. Filled by the fork-server zygote (from its C loop), tier
# 0's embedding code or the spawn-mode driver, and held only here.
_orq_core = []

# Whether this process arms the C hook (a process of one execution, where
# it is never disarmed, or tier 0, whose C side disarms it once the call has
# returned to C): [bool].
_orq_core_arms = [False]


def _orq_audit_make():
    """Return (arm, disarm, report) over the audit hook's state, which lives
    in this closure only (no module global holds it). With the C hook
    (_orq_core, _orq_core_arms) arm() arms it and disarm() does nothing:
    Python cannot disarm it. Without it (the Python hook, a fallback)
    disarm() does nothing either in a process of one execution
    (_orq_one_shot), and report(obj) lets the hook pass the reads of a
    traceback's tb_frame and a frame's f_code of exactly the objects the
    runner walks after the user's code has ended (_orq_frames)."""
    st = {"report": {}}
    core = _orq_core
    arms = _orq_core_arms

    def arm(rules, allowed, workspace=None):
        if core and not arms[0]:
            return st  # a zygote's own warm-up: trusted, and C's arming is for good
        st["report"].clear()  # an earlier call's tracebacks (a session's)
        return _orq_audit_arm_in(st, rules, allowed, workspace, core[0] if core else None)

    def disarm():
        if arms[0] or _orq_one_shot[0]:
            return
        st["armed"] = False

    def report(obj):
        st["report"][id(obj)] = obj

    return arm, disarm, report


def _orq_audit_arm_in(st, rules, allowed, workspace=None, core=None):
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
        (runtime.os_modules, a module or its package: os, _io, socket,
        urllib.request, ...; the host refuses those
        unless the policy acknowledges them), also the OS events in
        runtime.audit_block_os (processes, sockets, file changes) and every
        `open` except reading files below the interpreter's library
        directories (imports) and the zoneinfo database;
      - but lets through the events of runtime.workspace_events (open,
        os.listdir, os.scandir, os.mkdir, os.rmdir, os.remove, os.rename)
        whose path is absolute and below `workspace` (the execution's
        writable directory; for os.rename both paths), for reading and
        writing: Landlock grants that directory and nothing else, and no
        link out of it can be made there (no MAKE_SYM; seccomp refuses
        symlinkat and linkat). A relative path (with dir_fd) is refused.
    st is the state (_orq_audit_make's closure); _orq_audit_disarm() disarms
    (the runner does, before it formats a traceback with the traceback
    module). Returns st."""
    import sys

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
        prep = (rules, frozenset(rt.get("os_modules") or ()), by_os,
                frozenset(e for e in rt.get("workspace_events") or () if isinstance(e, str)))
        st["prepared"] = prep
    os_modules = prep[1]
    st["ws_events"] = prep[3]
    st["ws"] = None
    if isinstance(workspace, str) and workspace.startswith("/"):
        import os as _os
        st["ws"] = _os.path.normpath(workspace) + "/"
    # The modules of rules.json egress_modules are not OS modules: with an
    # egress proxy they are the runner's views, and the hook lets through
    # what their urlopen does, towards the proxy only (egress_ok); without
    # one the import shim refuses them. Listing them never lifts the OS
    # events.
    served = frozenset(rules.get("egress_modules") or ())
    os_too = not any(m not in served and (m in os_modules or m.partition(".")[0] in os_modules)
                     for m in allowed)
    eg = _orq_egress[0] if _orq_egress and any(m in served for m in allowed) else None
    st["egress"] = (eg["host"], eg["port"]) if eg else None
    st["exact"], st["prefixes"] = prep[2][os_too]
    st["check_open"] = os_too
    import os

    # What the import system may read: sys.path as it is now (a request's
    # extra_sys_path is appended after the hook was installed, e.g. in a
    # zygote), the stdlib, the time zones and the request's
    # extra_read_paths (package data such as matplotlib's mpl-data).
    key = (tuple(sys.path), tuple(_orq_audit_extra_read))
    if st.get("roots_key") != key:
        roots = []
        for p in list(sys.path) + [os.path.dirname(os.__file__), "/usr/share/zoneinfo"] \
                + list(_orq_audit_extra_read):
            if isinstance(p, str) and p:
                roots.append(os.path.normpath(p) + os.sep)
        st["roots"], st["roots_key"] = tuple(roots), key
    if core is not None:
        classes = rules.get("classes") or {}
        cfg = {"exact": sorted(st["exact"]), "prefixes": list(st["prefixes"]),
                  "roots": list(st["roots"]), "ws": st["ws"],
                  "ws_events": sorted(st["ws_events"]), "check_open": bool(os_too),
                  "egress": list(st["egress"]) if st["egress"] else None,
                  "class_dunders": [n for n in list(classes.get("methods") or ())
                                    + list(classes.get("hooks") or ())
                                    + list((rules.get("dunder") or {}).get("allow") or ())
                                    if isinstance(n, str)]
                  + ["__module__", "__qualname__", "__doc__", "__annotations__",
                     "__classcell__", "__orig_bases__"]}
        if core.armed():
            # A stateful session's later call: the hook its first call
            # armed stays, and serves only calls of the same configuration
            # (a wider one would find the hook narrower; a narrower one
            # would not be held to it).
            if cfg != st.get("core_cfg"):
                raise RuntimeError("sandbox: this stateful interpreter's audit hook was "
                                   "armed for another policy; start a new session")
            return st
        core.arm(cfg)
        st["core_cfg"] = cfg
        return st
    st["armed"] = True
    if st.get("installed"):
        return st

    normpath, fspath = os.path.normpath, os.fspath
    inspect_reads = frozenset(("__code__", "__defaults__", "__kwdefaults__"))
    _str, _bytes, _isinstance, _RuntimeError = str, bytes, isinstance, RuntimeError

    def in_ws(p, ws):
        if _isinstance(p, _bytes):
            p = p.decode("utf-8", "surrogateescape")
        return _isinstance(p, _str) and p.startswith("/") and (normpath(p) + "/").startswith(ws)

    def egress_ok(event, args, eg):
        # What the egress views' urlopen does, towards the proxy eg (host,
        # port) only; runner/forkcore/audit.h orq_egress_ok is the same.
        n = len(args)
        if event == "urllib.Request":
            return n > 0 and _isinstance(args[0], _str) and args[0][:8].lower().startswith(("http://", "https://"))
        if event == "http.client.send":
            return True  # on a connection socket.connect let reach the proxy
        if event == "http.client.connect":
            return n > 2 and args[1] == eg[0] and args[2] == eg[1]
        if event == "socket.getaddrinfo":
            return n > 1 and args[0] == eg[0] and args[1] == eg[1]
        if event == "socket.__new__":
            return n > 1 and args[1] in (2, 10)  # AF_INET, AF_INET6: the kernel checks the rest
        if event == "socket.connect":
            a = args[1] if n > 1 else None
            return _isinstance(a, tuple) and len(a) > 1 and a[0] == eg[0] and a[1] == eg[1]
        return False

    def hook(event, args):
        if not st["armed"]:
            return
        eg = st["egress"]
        if eg is not None and egress_ok(event, args, eg):
            return
        ws = st["ws"]
        if ws is not None and args and event in st["ws_events"] \
                and in_ws(args[0], ws) \
                and (event != "os.rename" or (len(args) > 1 and in_ws(args[1], ws))):
            return
        if event == "object.__getattr__":
            if len(args) > 1 and args[1] in inspect_reads:
                return
            if len(args) > 1 and args[1] in ("tb_frame", "f_code") \
                    and st["report"].get(id(args[0])) is args[0]:
                return
            raise _RuntimeError("sandbox: introspection (%s) is not allowed"
                                % (args[1] if len(args) > 1 else "?",))
        if event in ("os.listdir", "os.scandir", "os.walk") and args \
                and _isinstance(args[0], _str) \
                and (normpath(args[0]) + "/").startswith(st["roots"]):
            return  # the import system's directory caches; package data (fonts)
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
                ok = not writes and (normpath(p) + "/").startswith(st["roots"])
            if not ok:
                raise _RuntimeError("sandbox: open(%r) is not allowed" % (path,))

    sys.addaudithook(hook)
    st["installed"] = True
    return st


_orq_audit_arm, _orq_audit_disarm, _orq_audit_report = _orq_audit_make()


def _orq_frames(tb):
    """[(line, function name)] of the traceback's frames that run the
    user's code: from the C structures with the C hook (no attribute read,
    no Python code runs), else through the Python hook's report()."""
    if _orq_core:
        return _orq_core[0].frames(tb)
    out = []
    n = 0
    while tb is not None and n < 10000:
        _orq_audit_report(tb)
        f = tb.tb_frame
        _orq_audit_report(f)
        co = f.f_code
        if type(co.co_filename) is str and co.co_filename == "<sandbox>":
            out.append((tb.tb_lineno, co.co_name))
        tb = tb.tb_next
        n += 1
    return out


# type's own descriptors of a class's names, taken before any user code
# runs: a metaclass's property of the same name never runs.
_orq_type_attr = (type.__dict__["__qualname__"].__get__, type.__dict__["__module__"].__get__)


def _orq_exc_name(e):
    """The name of e's type as a traceback shows it (module.qualname; the
    module left out for builtins and the user's own), read with type's own
    descriptors."""
    t = type(e)
    try:
        q = _orq_type_attr[0](t, type)
        m = _orq_type_attr[1](t, type)
    except Exception:  # noqa: BLE001
        q, m = None, None
    if type(q) is not str:
        q = _orq_core[0].type_name(e) if _orq_core else "Exception"
    if type(m) is str and m not in ("builtins", "__main__", "__sandbox__"):
        return m + "." + q
    return q


def _orq_user_traceback(exc, code, texts=None):
    """The report of exc: the user's frames (filename "<sandbox>") with the
    user's source lines, and the chained exceptions, as Python prints
    them; built by hand, so no method of the exceptions runs and no
    attribute of their classes is read through them. `texts` (from
    _orq_exc_texts, taken while the call's limits and audit hook were in
    force): id of each exception of the chain -> its text."""
    if texts is None:
        texts = _orq_exc_texts(exc)
    lines = code.splitlines()
    BaseExc = BaseException
    chain = []
    seen = set()
    e = exc
    # The chain, innermost last: what Python prints first comes first.
    while e is not None and id(e) not in seen and len(chain) < 64:
        seen.add(id(e))
        cause, context = e.__cause__, e.__context__
        if isinstance(cause, BaseExc):
            chain.append((e, "\nThe above exception was the direct cause of the following exception:\n\n"))
            e = cause
        elif isinstance(context, BaseExc) and not e.__suppress_context__:
            chain.append((e, "\nDuring handling of the above exception, another exception occurred:\n\n"))
            e = context
        else:
            chain.append((e, ""))
            e = None
    out = []
    for i in range(len(chain) - 1, -1, -1):
        e, _ = chain[i]
        frames = _orq_frames(e.__traceback__)
        if frames:
            out.append("Traceback (most recent call last):\n")
            for line, name in frames:
                out.append('  File "<sandbox>", line %d, in %s\n' % (line, name))
                if 1 <= line <= len(lines) and lines[line - 1].strip():
                    out.append("    %s\n" % lines[line - 1].strip())
        name = _orq_exc_name(e)
        text = texts.get(id(e), "<exception str() failed>")
        out.append("%s: %s\n" % (name, text) if text else "%s\n" % name)
        if i > 0:
            out.append(chain[i - 1][1])
    return "".join(out)


def _orq_exc_texts(exc):
    """str() of exc and of the exceptions chained to it (at most 64), taken
    while the call's limits and audit hook are in force: a user exception
    class may define __str__. Returns {id(exception): text}."""
    texts = {}
    todo = [exc]
    while todo and len(texts) < 64:
        e = todo.pop()
        if id(e) in texts:
            continue
        try:
            t = str(e)
            t = str.__getitem__(t, slice(None))  # a str subclass: an exact copy
        except BaseException:  # noqa: BLE001 - a broken __str__ (even raising SystemExit)
            t = "<exception str() failed>"
        texts[id(e)] = t
        for c in (e.__cause__, e.__context__):
            if isinstance(c, BaseException):
                todo.append(c)
    return texts


def _orq_plain(x, depth=0):
    """x as exact JSON types (dict, list, str, int, float, bool, None),
    reading subclasses of the builtin types through the builtin types' own
    methods, so no method a user class defines runs (a dict subclass's
    items(), a list subclass's __iter__). Anything else is a TypeError."""
    t = type(x)
    if x is None or t is str or t is int or t is float or t is bool:
        return x
    if depth > 200:
        raise RecursionError("the result is nested more than 200 levels deep")
    d = depth + 1
    if t is list or t is tuple:
        return [_orq_plain(v, d) for v in x]
    if t is dict:
        return {_orq_plain_key(k): _orq_plain(v, d) for k, v in x.items()}
    if issubclass(t, str):
        return str.__getitem__(x, slice(None))
    if issubclass(t, int):
        return int.__int__(x)
    if issubclass(t, float):
        return float.__float__(x)
    if issubclass(t, dict):
        return {_orq_plain_key(k): _orq_plain(v, d) for k, v in dict.items(x)}
    if issubclass(t, list):
        return [_orq_plain(v, d) for v in list.__iter__(x)]
    if issubclass(t, tuple):
        return [_orq_plain(v, d) for v in tuple.__iter__(x)]
    raise TypeError("Object of type %s is not JSON serializable: return dicts, lists, "
                    "strings, numbers, booleans or None (dataclasses.asdict(x) for a "
                    "dataclass)" % t.__name__)


def _orq_plain_key(k):
    t = type(k)
    if k is None or t is str or t is int or t is float or t is bool:
        return k
    if issubclass(t, (str, int, float)):
        return _orq_plain(k)
    raise TypeError("keys must be str, int, float, bool or None, not %s" % t.__name__)


# The JSON encoder of results (built once): [encode].
_orq_encoders = []


def _orq_encoder():
    """Return encode(x, ascii): the JSON text of x, made only of exact
    JSON types (_orq_plain's result), as json.dumps(x, allow_nan=False)
    writes it. It uses the C string escapers and the builtin types' own
    methods, bound here: no class of the json module (whose attributes a
    tier-0 call could reach) and no method of the result's objects runs."""
    if _orq_encoders:
        return _orq_encoders[0]
    import _json

    esc = (_json.encode_basestring, _json.encode_basestring_ascii)
    frepr, irepr = float.__repr__, int.__repr__
    _type, _str, _int, _float, _bool, _list, _dict = str, str, int, float, bool, list, dict
    _type = type
    _ValueError, _TypeError = ValueError, TypeError
    inf = float("inf")

    def num(x):
        if x != x or x == inf or x == -inf:
            raise _ValueError("Out of range float values are not JSON compliant")
        return frepr(x)

    def key(k, e):
        t = _type(k)
        if t is _str:
            return e(k)
        if k is True:
            return '"true"'
        if k is False:
            return '"false"'
        if k is None:
            return '"null"'
        if t is _int:
            return '"' + irepr(k) + '"'
        if t is _float:
            return '"' + num(k) + '"'
        raise _TypeError("keys must be str, int, float, bool or None, not %s" % t.__name__)

    def enc(x, e, out):
        t = _type(x)
        if t is _str:
            out.append(e(x))
        elif x is None:
            out.append("null")
        elif x is True:
            out.append("true")
        elif x is False:
            out.append("false")
        elif t is _int:
            out.append(irepr(x))
        elif t is _float:
            out.append(num(x))
        elif t is _list:
            if not x:
                out.append("[]")
                return
            out.append("[")
            first = True
            for v in x:
                if not first:
                    out.append(", ")
                first = False
                enc(v, e, out)
            out.append("]")
        elif t is _dict:
            if not x:
                out.append("{}")
                return
            out.append("{")
            first = True
            for k, v in x.items():
                if not first:
                    out.append(", ")
                first = False
                out.append(key(k, e))
                out.append(": ")
                enc(v, e, out)
            out.append("}")
        else:
            raise _TypeError("Object of type %s is not JSON serializable" % t.__name__)

    def encode(x, ascii=False):
        out = []
        enc(x, esc[1] if ascii else esc[0], out)
        return "".join(out)

    _orq_encoders.append(encode)
    return encode


# The safe str.format of this process and its Formatter class (built
# once): [_orq_fmt, Formatter].
_orq_format_guards = []


def _orq_format_guard():
    """Return (_orq_fmt, Formatter). _orq_fmt(obj, name) is what
    `obj.format` / `obj.format_map` compile to (see _orq_guard_writes):
    obj's attribute, except that str.format and str.format_map (bound to
    any string, or unbound) come back as versions that format with
    Formatter. Formatter is string.Formatter as module views hand it out:
    the same methods (format, vformat, parse, get_field, get_value,
    convert_field, format_field, check_unused_args), but its field walk
    refuses attribute fields ({0.name}) and index keys that start with '_'
    ({0[_x]}) at run time, the rule the static checkers apply to literal
    templates; index keys into data ({row[name]}) work as in str.format.
    It does not derive from the real string.Formatter, so no super() of a
    subclass reaches the real walk (which reads any attribute a template
    names). Its methods are isolated functions."""
    if _orq_format_guards:
        return tuple(_orq_format_guards)
    import _string
    import types

    split, parser = _string.formatter_field_name_split, _string.formatter_parser
    _type, _str, _ValueError, _isinstance, _TypeError, _int, _set = (
        type, str, ValueError, isinstance, TypeError, int, set)
    import builtins
    _format, _repr, _ascii = builtins.format, repr, ascii
    real_getattr = getattr
    BuiltinMethod, MethodType = types.BuiltinMethodType, types.MethodType
    str_format, str_format_map = str.format, str.format_map
    import collections
    UserString = collections.UserString
    us_format, us_format_map = UserString.format, UserString.format_map

    def get_field(self, field_name, args, kwargs):
        first, rest = split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attr, key in rest:
            if is_attr:
                raise _ValueError(
                    "format field %r reads the attribute %r: the sandbox formats only "
                    "names and index keys; pass the value itself ('{x}'.format(x=value))"
                    % (field_name, key))
            if _isinstance(key, _str) and key[:1] == "_":
                raise _ValueError("format field %r: index keys may not start with '_'"
                                  % (field_name,))
            obj = obj[key]
        return obj, first

    def get_value(self, key, args, kwargs):
        if _isinstance(key, _int):
            return args[key]
        return kwargs[key]

    def check_unused_args(self, used_args, args, kwargs):
        pass

    def format_field(self, value, format_spec):
        return _format(value, format_spec)

    def convert_field(self, value, conversion):
        if conversion is None:
            return value
        if conversion == "s":
            return _str(value)
        if conversion == "r":
            return _repr(value)
        if conversion == "a":
            return _ascii(value)
        raise _ValueError("Unknown conversion specifier %s" % (conversion,))

    def parse(self, format_string):
        return parser(format_string)

    def walk(self, format_string, args, kwargs, used, depth, auto=0):
        # string.Formatter._vformat
        if depth < 0:
            raise _ValueError("Max string recursion exceeded")
        out = []
        for literal, field, spec, conversion in self.parse(format_string):
            if literal:
                out.append(literal)
            if field is None:
                continue
            if field == "":
                if auto is False:
                    raise _ValueError("cannot switch from manual field specification to "
                                      "automatic field numbering")
                field = _str(auto)
                auto += 1
            elif field.isdigit():
                if auto:
                    raise _ValueError("cannot switch from manual field specification to "
                                      "automatic field numbering")
                auto = False
            obj, arg_used = self.get_field(field, args, kwargs)
            used.add(arg_used)
            obj = self.convert_field(obj, conversion)
            spec, auto = walk(self, spec, args, kwargs, used, depth - 1, auto)
            out.append(self.format_field(obj, spec))
        return "".join(out), auto

    def vformat(self, format_string, args, kwargs):
        used = _set()
        result, _ = walk(self, format_string, args, kwargs, used, 2)
        self.check_unused_args(used, args, kwargs)
        return result

    def format_(self, format_string, /, *args, **kwargs):
        return self.vformat(format_string, args, kwargs)

    walk = _orq_isolate(walk)
    ns = {"__module__": "string", "__qualname__": "Formatter",
          "__doc__": "string.Formatter whose field walk reads no attribute."}
    for name, f in (("format", format_), ("vformat", vformat), ("parse", parse),
                    ("get_field", get_field), ("get_value", get_value),
                    ("check_unused_args", check_unused_args), ("format_field", format_field),
                    ("convert_field", convert_field)):
        f = _orq_isolate(f)
        f.__name__ = name
        f.__qualname__ = "Formatter." + name
        ns[name] = f
    Formatter = _type("Formatter", (), ns)
    vformat = Formatter().vformat

    def template_of(t, what):
        if _isinstance(t, UserString):  # its format/format_map call data's
            t = t.data
        if not _isinstance(t, _str):
            raise _TypeError("descriptor '%s' for 'str' objects doesn't apply to a '%s' object"
                             % (what, _type(t).__name__))
        return t

    def format(template, *args, **kwargs):
        return vformat(template_of(template, "format"), args, kwargs)

    def format_map(template, mapping):
        return vformat(template_of(template, "format_map"), (), mapping)

    def fmt(obj, name):
        r = real_getattr(obj, name)
        n = 0
        # UserString's format/format_map call its data's: the method it calls
        while _type(r) is MethodType and (r.__func__ is us_format or r.__func__ is us_format_map):
            if n == 64:
                raise _TypeError("format: UserString nested too deep")
            r = real_getattr(r.__self__.data, "format" if r.__func__ is us_format else "format_map")
            n += 1
        if r is str_format or r is us_format:
            return format
        if r is str_format_map or r is us_format_map:
            return format_map
        if (_type(r) is BuiltinMethod and _isinstance(r.__self__, _str)
                and r.__name__ in ("format", "format_map")):
            s = r.__self__
            if r.__name__ == "format":
                def bound(*args, **kwargs):
                    return vformat(s, args, kwargs)
            else:
                def bound(mapping):
                    return vformat(s, (), mapping)
            return bound
        return r

    template_of = _orq_isolate(template_of)
    format = _orq_isolate(format)
    format_map = _orq_isolate(format_map)
    fmt = _orq_isolate(fmt)
    _orq_format_guards[:] = [fmt, Formatter]
    return fmt, Formatter


def _orq_class_pattern_guard(rules):
    """Return _orq_cpat(C), what a class pattern with positional
    sub-patterns matches against (see _orq_guard_patterns): C itself when
    it is one of the builtin types that match the subject itself (they
    have no __match_args__ and none can be set on them), else a stand-in
    class: isinstance() against it is isinstance() against C, and its
    __match_args__, read by the match statement when it tries the pattern,
    is C's, provided every name in it is one the attribute rules let code
    read (else the match raises TypeError). A stand-in of a subclass of a
    builtin type that matches itself derives from that type, so it keeps
    that behaviour. One per execution environment: its stand-ins (and
    the classes they stand for) go with it."""
    ok, selfish, _OrqPattern = _orq_class_pattern_meta(rules)
    made = {}
    _type, _id, _TypeError, _issubclass, _len = type, id, TypeError, issubclass, len
    tgetattr = type.__getattribute__

    def cpat(c):
        if not _issubclass(_type(c), _type):
            raise _TypeError("called match pattern must be a class")
        for s in selfish:
            if c is s:
                return c
        got = made.get(_id(c))
        if got is not None and got[0] is c:
            return got[1]
        base = ()
        for s in selfish:
            if _issubclass(c, s):
                base = (s,)
                break
        ns = {"_orq_real": c}
        if not base:
            ns["__slots__"] = ()
        stand = _OrqPattern(tgetattr(c, "__name__"), base, ns)
        if _len(made) < 4096:
            made[_id(c)] = (c, stand)
        return stand

    return _orq_isolate(cpat)


# The stand-ins' metaclass of each rules table, built once (before any
# user code): [(rules, (ok, match-self types, metaclass))].
_orq_cpat_metas = []


def _orq_class_pattern_meta(rules):
    """(ok, match-self types, _OrqPattern) for _orq_class_pattern_guard:
    the stand-ins' metaclass, whose __match_args__ property checks the
    names of the real class's (a stand-in's _orq_real) and whose isinstance
    is the real class's."""
    for r, m in _orq_cpat_metas:
        if r is rules:
            return m
    import builtins

    ok = _orq_attr_name_ok(rules)
    selfish = tuple(getattr(builtins, n) for n in rules.get("match_self_types") or ()
                    if isinstance(getattr(builtins, n, None), type))
    _type, _tuple, _isinstance, _TypeError, _AttributeError = (
        type, tuple, isinstance, TypeError, AttributeError)
    _getattr, _issubclass = getattr, issubclass
    tgetattr = type.__getattribute__
    missing = object()

    def real_of(cls):
        return tgetattr(cls, "__dict__")["_orq_real"]

    class _OrqPattern(type):
        @property
        def __match_args__(cls):
            real = real_of(cls)
            ma = _getattr(real, "__match_args__", missing)
            if ma is missing:
                raise _AttributeError("__match_args__")
            if _type(ma) is not _tuple:
                raise _TypeError("%s.__match_args__ must be a tuple" % tgetattr(real, "__name__"))
            for a in ma:
                if not ok(a):
                    raise _TypeError("case %s(...): __match_args__ names %r, an attribute the "
                                     "sandbox does not let code read; match on public "
                                     "attributes" % (tgetattr(real, "__name__"), a))
            return ma

        def __instancecheck__(cls, x):
            return _isinstance(x, real_of(cls))

        def __subclasscheck__(cls, c):
            return _issubclass(c, real_of(cls))

    m = (ok, selfish, _OrqPattern)
    _orq_cpat_metas[:] = [(rules, m)]
    return m


def _orq_abc_guard():
    """Put a guard in front of abc.ABCMeta.register (once per process,
    before any user code): registering a class with an ABC the code did not
    define (io.IOBase.register(int), collections.abc.Mapping.register(int))
    would change isinstance for every later caller in the process, the
    runner and a session's next call included. For an ABC whose
    __module__ is not the sandbox's, called with sandboxed code on the
    stack (a frame whose builtins are not the interpreter's: the body's,
    or the runner's isolated guards) before any module's top-level code
    (an import the code set off: pathlib registers with os.PathLike), the
    guard raises the audit event "abc.register" (rules.json
    runtime.audit_block), which the armed hook refuses. The standard
    library's own registrations go through; the code's, however it reaches
    register (map, functools.partial), do not. The code's own ABCs
    (class Shape(ABC)) register as before."""
    import abc
    import builtins
    import sys

    real = type.__getattribute__(abc.ABCMeta, "__dict__")["register"]
    if getattr(real, "__name__", "") == "_orq_register":
        return
    audit, tgetattr, getframe = sys.audit, type.__getattribute__, sys._getframe
    real_builtins = builtins.__dict__
    _RuntimeError, _TypeError = RuntimeError, TypeError

    def sandboxed():
        f = getframe(2)
        while f is not None:
            if f.f_builtins is not real_builtins:
                return True
            if f.f_locals is f.f_globals:
                return False  # a module's top-level code: an import
            f = f.f_back
        return False

    def _orq_register(cls, subclass):
        if tgetattr(cls, "__module__") != "__sandbox__" and sandboxed():
            try:
                audit("abc.register", cls, subclass)
            except _RuntimeError:
                raise _TypeError(
                    "%s.register: the sandbox does not let code register classes with an "
                    "abstract base class it did not define (that changes isinstance for all "
                    "code); subclass it, or define your own ABC and register with that"
                    % (tgetattr(cls, "__name__"),)) from None
        return real(cls, subclass)

    sandboxed = _orq_isolate(sandboxed)
    guard = _orq_isolate(_orq_register)
    guard.__doc__ = real.__doc__
    abc.ABCMeta.register = guard


def _orq_env_builtins(rules, ub, classes, made=None):
    """The builtins an execution adds to its curated builtins dict `ub`:
    always _orq_w, the run-time guard of attribute writes, _orq_own, that of
    private attribute reads (see _orq_guard_writes), _orq_fmt, that of
    str.format (see _orq_format_guard), and the guarded setattr; with `classes` also __build_class__ (without class
    keywords: no metaclass) and rules.json classes.builtins (super,
    property, ...). Returns (dict, made): made maps id -> class for every
    class the execution's class statements built (into `made` if given)."""
    import builtins
    import types

    if made is None:
        made = {}
    _orq_abc_guard()
    import sys

    FunctionType = types.FunctionType
    _type, _id, _TypeError = type, id, TypeError
    modules = sys.modules

    def w(obj):
        t = _type(obj)
        if t is FunctionType:
            if obj.__builtins__ is ub:
                return obj
        elif made.get(_id(obj)) is obj or made.get(_id(t)) is t:
            return obj
        else:
            # decimal's contexts (getcontext().prec = 28): their
            # attributes are numbers and flags, checked by decimal itself;
            # tier 0 puts the thread's context back after every call
            d = modules.get("decimal")
            if d is not None and t is d.Context:
                return obj
        raise _TypeError("cannot set or delete attributes of %s objects in the sandbox: only "
                         "of functions and classes the code defines and their instances; keep "
                         "the value in a dict or a local variable" % t.__name__)

    type_getattribute = type.__getattribute__
    object_getattribute = object.__getattribute__
    _AttributeError, _dict = AttributeError, dict

    def own(obj, name):
        # A private attribute (a leading '_') of a function the body
        # defined, or found on a class the body made (or in an instance's
        # own dict) before any class the body did not make: never an
        # inherited stdlib internal, nor one of a class's metaclass
        # (Enum._convert_ is EnumType's).
        t = _type(obj)
        if t is FunctionType:
            if obj.__builtins__ is ub:
                return obj
        else:
            cls = None
            if made.get(_id(obj)) is obj:
                cls = obj
                for k in type_getattribute(t, "__mro__"):
                    if name in type_getattribute(k, "__dict__"):
                        cls = None
                        break
            elif made.get(_id(t)) is t:
                cls = t
            if cls is not None:
                for k in type_getattribute(cls, "__mro__"):
                    if name in type_getattribute(k, "__dict__"):
                        if made.get(_id(k)) is k:
                            return obj
                        break
                else:
                    # No class defines it: only an instance's own
                    # attribute, never what a foreign __getattr__ would
                    # make of the name (typing's aliases forward it to
                    # their __origin__).
                    if cls is t:
                        try:
                            d = object_getattribute(obj, "__dict__")
                        except _AttributeError:
                            d = None
                        if _type(d) is _dict and name in d:
                            return obj
                    raise _AttributeError("%r object has no attribute %r"
                                          % (type_getattribute(t, "__name__"), name))
        if name[:2] == "__":
            raise _TypeError("%s is readable only of functions and classes' instances the code "
                             "defines (vars(self)), not of %s objects; return data instead"
                             % (name, t.__name__))
        if name[:1] != "_":
            raise _TypeError("%s: frame, generator, traceback and code-object attributes are not "
                             "readable; the name is fine for attributes of functions and classes "
                             "the code defines and their instances, not of %s objects"
                             % (name, t.__name__))
        raise _TypeError("%s: private attributes (a leading '_') are readable only of functions "
                         "and classes the code defines and their instances, not of %s objects"
                         % (name, t.__name__))

    real_setattr = builtins.setattr
    name_ok = _orq_attr_name_ok(rules)

    _len = len

    def vars(*obj):
        # vars(obj) of what the body made: a copy of obj.__dict__ (never
        # vars(), a namespace, a module's or a class's; never the real
        # dict, which would take dunder keys that copy.copy looks up on
        # the instance: __reduce_ex__)
        if _len(obj) != 1:
            raise _TypeError("vars() takes one argument in the sandbox: an object the code made "
                             "(vars(self)); return data rather than a namespace")
        return _dict(own(obj[0], "__dict__").__dict__)

    def setattr(obj, name, value):
        if not name_ok(name):
            raise _TypeError("setattr: %r is not an attribute the sandbox lets code set by name"
                             % (name,))
        real_setattr(w(obj), name, value)

    WrapperDescriptor, MethodWrapper = types.WrapperDescriptorType, types.MethodWrapperType
    object_setattr = object.__setattr__

    def sa(obj):
        # obj.__setattr__ read in the body: a slot of the builtin types
        # (object.__setattr__, super().__setattr__) comes back as a
        # version that sets only what the guarded setattr may (a name the
        # rules allow, on what the body made); a method the body wrote is
        # its own.
        r = obj.__setattr__
        t = _type(r)
        if t is WrapperDescriptor:
            def unbound(target, name, value):
                if not name_ok(name):
                    raise _TypeError("__setattr__: %r is not an attribute the sandbox lets code "
                                     "set by name" % (name,))
                return object_setattr(w(target), name, value)
            return unbound
        if t is MethodWrapper:
            target = r.__self__

            def bound(name, value):
                if not name_ok(name):
                    raise _TypeError("__setattr__: %r is not an attribute the sandbox lets code "
                                     "set by name" % (name,))
                return object_setattr(w(target), name, value)
            return bound
        return r

    own_dunders = frozenset((rules.get("classes") or {}).get("own_dunders") or ())
    _isinstance, _cls = isinstance, type
    # id(obj) -> (obj, its snapshot): one snapshot per object, refreshed on
    # every read (the execution's environment holds them)
    snaps = {}

    def key_ok(k):
        if not name_ok(k):
            raise _TypeError("__dict__: %r is not an attribute the sandbox lets code set by name; "
                             "use plain public names" % (k,))

    def real_of(snap):
        got = snaps.get(_id(snap))
        return got[1] if got is not None and got[0] is snap else None

    class OwnDict(dict):
        # obj.__dict__ of what the body made: a snapshot of the real dict
        # whose writes go through to it, refusing names setattr refuses
        # (no dunder key: copy.copy looks __reduce_ex__ up on the instance)
        __slots__ = ()

        def __setitem__(self, k, v):
            key_ok(k)
            real_of(self)[k] = v
            _dict.__setitem__(self, k, v)

        def __delitem__(self, k):
            del real_of(self)[k]
            _dict.__delitem__(self, k)

        def update(self, *a, **kw):
            for k, v in _dict(*a, **kw).items():
                self[k] = v

        def __ior__(self, other):
            self.update(other)
            return self

        def setdefault(self, k, v=None):
            if k not in self:
                self[k] = v
            return _dict.__getitem__(self, k)

        def pop(self, k, *d):
            if k in self:
                real_of(self).pop(k, None)
            return _dict.pop(self, k, *d)

        def popitem(self):
            k, v = _dict.popitem(self)
            real_of(self).pop(k, None)
            return k, v

        def clear(self):
            real_of(self).clear()
            _dict.clear(self)

    for n in ("__setitem__", "__delitem__", "update", "__ior__", "setdefault", "pop",
              "popitem", "clear"):
        f = _orq_isolate(type_getattribute(OwnDict, "__dict__")[n])
        _cls.__setattr__(OwnDict, n, f)
    OwnDict.__name__ = OwnDict.__qualname__ = "dict"
    key_ok = _orq_isolate(key_ok)
    real_of = _orq_isolate(real_of)

    def odict(obj, name):
        # obj.__dict__ / obj.__annotations__ read in the body (with classes)
        if name not in own_dunders:
            raise _TypeError("%s is not readable in the sandbox" % (name,))
        t = _type(obj)
        mine = (t is FunctionType and obj.__builtins__ is ub) or made.get(_id(t)) is t
        if name == "__annotations__":
            if t is FunctionType and mine:
                return _dict(obj.__annotations__)
            c = obj if made.get(_id(obj)) is obj else (t if mine else None)
            if c is not None:
                a = type_getattribute(c, "__dict__").get("__annotations__")
                return _dict(a) if _type(a) is _dict else {}
        elif mine:
            real = object_getattribute(obj, "__dict__")
            got = snaps.get(_id(obj))
            if got is not None and got[0] is obj:
                snap = got[1]
                _dict.clear(snap)
            else:
                snap = OwnDict()
                snaps[_id(obj)] = (obj, snap)
                snaps[_id(snap)] = (snap, real)
            _dict.update(snap, real)
            return snap
        raise _TypeError("%s is readable only of functions and classes the code defines and "
                         "their instances (self.%s), not of %s objects; return data instead"
                         % (name, name, t.__name__))

    w = _orq_isolate(w)  # setattr calls it through its closure
    out = {"_orq_w": w, "_orq_own": _orq_isolate(own), "_orq_fmt": _orq_format_guard()[0],
           "_orq_cpat": _orq_class_pattern_guard(rules), "_orq_sa": _orq_isolate(sa), "_orq_odict": _orq_isolate(odict)}
    if "setattr" in (rules.get("guarded_builtins") or ()):
        out["setattr"] = _orq_isolate(setattr)
    if "vars" in (rules.get("guarded_builtins") or ()):
        out["vars"] = _orq_isolate(vars)
    if not classes:
        return out, made
    real_build_class = builtins.__build_class__

    def build_class(func, name, /, *bases, **kw):
        if "metaclass" in kw:
            raise _TypeError("a class may not choose its metaclass in the sandbox")
        for k in kw:
            if k[:1] == "_":
                # typing's internals take _root=True to be subclassed
                raise _TypeError("class keyword %r: private class keywords are not allowed in "
                                 "the sandbox; pass public keywords to your own "
                                 "__init_subclass__" % (k,))
        cls = real_build_class(func, name, *bases, **kw)
        made[_id(cls)] = cls
        return cls

    out["__build_class__"] = _orq_isolate(build_class)
    for name in (rules.get("classes") or {}).get("builtins") or ():
        if isinstance(name, str) and hasattr(builtins, name):
            out[name] = getattr(builtins, name)
    return out, made
