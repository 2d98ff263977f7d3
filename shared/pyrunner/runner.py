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


def _orq_make_import(allowed_imports):
    """Return the `__import__` shim handed to user code.

    It honours absolute imports whose top-level module is in
    allowed_imports, denies relative imports, and returns a read-only-ish
    *view* of the module: its public attributes, with submodules that are
    not themselves allowed removed (so `re.enum.sys` does not lead to sys)."""
    import builtins
    import types

    real_import = builtins.__import__
    ModuleType = types.ModuleType
    allowed = frozenset(m for m in allowed_imports if isinstance(m, str) and m)
    _isinstance, _str, _sorted, _vars, _list, _setattr = (
        isinstance, str, sorted, vars, list, setattr)
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
            if k[:1] == "_":
                continue
            if _isinstance(x, ModuleType):
                if not permitted(x.__name__):
                    continue
                x = view(x, memo)
            _setattr(v, k, x)
        return v

    def shim(name, globals=None, locals=None, fromlist=(), level=0):
        if level != 0:
            raise _ImportError("relative imports are not allowed in the sandbox")
        if not _isinstance(name, _str) or not permitted(name):
            raise _ImportError(
                "import of %r is not allowed (allowed imports: %s)"
                % (name, ", ".join(_sorted(allowed)) or "none"))
        mod = real_import(name, None, None, fromlist, 0)
        return view(mod, {})

    view = _orq_isolate(view)
    permitted = _orq_isolate(permitted)
    return _orq_isolate(shim), real_import, allowed


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
    (one JSON object). Never raises."""
    import json

    def respond(kind, error, findings=None):
        doc = {"success": False, "error": error, "error_kind": kind}
        if findings:
            doc["findings"] = findings
        return json.dumps(doc).encode("ascii")

    # A little ballast released on MemoryError so the runner can still build
    # its response after user code exhausted the address space.
    ballast = bytearray(1 << 18)
    try:
        import ast
        import builtins

        code = req.get("code")
        if not isinstance(code, str):
            return respond("internal", "request has no code")
        args = req.get("args")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return respond("invalid_args", "args must be a JSON object")
        allowed_imports = list(req.get("allowed_imports") or [])
        rules = req.get("rules") or {}
        max_out = int(req.get("max_output_bytes") or 0)

        # 1. Re-validate with CPython's own ast (the rules table is the one
        #    validator/rules.json). Fail closed if the checker itself breaks.
        try:
            findings = _orq_check(code, allowed_imports, rules)
        except Exception as e:  # noqa: BLE001
            return respond("internal", "in-sandbox validator failed: %s: %s"
                           % (type(e).__name__, e))
        if findings:
            f0 = findings[0]
            return respond("validation", "validation failed: %s:%s: %s: %s" % (
                f0.get("line"), f0.get("column"), f0.get("rule"),
                f0.get("message")), findings)

        # 2. Build `def __orq_user(args): <body>` from the body's own AST, so
        #    line N of the body is reported as line N and string literals are
        #    not re-indented.
        filename = "<sandbox>"
        try:
            body = ast.parse(code, filename, "exec")
        except SyntaxError as e:
            return respond("validation", "syntax error: %s" % e, [{
                "rule": "syntax-error", "message": str(e.msg),
                "line": e.lineno or 0, "column": e.offset or 0,
                "snippet": (e.text or "").strip()}])
        fn_def = ast.FunctionDef(
            name="__orq_user",
            args=ast.arguments(posonlyargs=[], args=[ast.arg(arg="args")],
                               vararg=None, kwonlyargs=[], kw_defaults=[],
                               kwarg=None, defaults=[]),
            body=body.body or [ast.Pass()],
            decorator_list=[], returns=None, type_comment=None,
            lineno=1, col_offset=0)
        module = ast.Module(body=[fn_def], type_ignores=[])
        ast.fix_missing_locations(module)
        try:
            compiled = compile(module, filename, "exec", dont_inherit=True)
        except SyntaxError as e:  # e.g. `await` outside async, bad nonlocal
            return respond("validation", "syntax error: %s" % e, [{
                "rule": "syntax-error", "message": str(e.msg),
                "line": e.lineno or 0, "column": e.offset or 0,
                "snippet": (e.text or "").strip()}])

        # 3. Curated builtins (the one list in the rules table) + import shim;
        #    pre-import the allowed modules.
        shim, real_import, allowed = _orq_make_import(allowed_imports)
        safe = {}
        for name in rules.get("safe_builtins") or ():
            if isinstance(name, str) and hasattr(builtins, name):
                safe[name] = getattr(builtins, name)
        safe["__import__"] = shim
        for m in sorted(allowed):
            try:
                real_import(m)
            except Exception:  # noqa: BLE001 - the user's import reports it
                pass

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
            result = fn(args)
        except MemoryError:
            del ballast
            return respond("memory", "MemoryError: the code exceeded the "
                           "memory limit of %s MB" % (req.get("memory_mb") or "?"))
        except BaseException as e:  # noqa: BLE001 - user code, incl. SystemExit
            return respond("runtime", _orq_user_traceback(e, code))

        # 5. Encode the result.
        try:
            try:
                out = json.dumps(result, allow_nan=False,
                                 ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: escape them
                out = json.dumps(result, allow_nan=False).encode("ascii")
        except MemoryError:
            del ballast
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
        ballast = None  # noqa: F841
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
        if op != "execute":
            raise ValueError("unknown op %r" % (op,))
    except Exception as e:  # noqa: BLE001
        resp = json.dumps({"success": False, "error_kind": "internal",
                           "error": "bad request: %s" % e}).encode("ascii")
    else:
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


if __name__ == "__main__":
    _orq_main()
