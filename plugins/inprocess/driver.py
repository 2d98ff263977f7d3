# driver.py — the tier-0 driver, appended after the shared runner
# (rules/checker.py + runner/py) and run once in the module
# namespace `__orqest_runner__` of the interpreter embedded in the plugin.
#
# The embedding C code (embed.c) puts two names into the namespace first:
#   _orq_t0_on_signal  the handler of the watchdog signal (raises the timeout
#                      exception in the running call, if it was targeted)
#   _orq_t0_Timeout    that exception class (a BaseException, so that an
#                      `except Exception` in user code does not swallow it)
#
# Each execution calls _orq_t0_call once on the interpreter thread. It does
# no I/O: the user's print() output goes to in-memory capped buffers, and the
# response is returned to Go as bytes. The user's code runs in the fresh
# globals _orq_execute builds; it never sees this namespace.

def _orq_t0_setup(rules_json, signum):
    import json
    import signal

    json.loads(rules_json)  # fail set-up, not the first call, on a bad table
    # What the runner imports lazily, imported once here so that the first
    # execution (and the first traceback) does not pay for it.
    import ast  # noqa: F401
    import builtins  # noqa: F401
    import linecache  # noqa: F401
    import traceback  # noqa: F401
    import types  # noqa: F401
    signal.signal(signum, _orq_t0_on_signal)  # noqa: F821 - set by embed.c
    # The C audit hook (embed.c put it in _orq_core): armed for each call,
    # disarmed by embed.c once the call has returned to C.
    _orq_core_arms[0] = bool(_orq_core)
    global _orq_check, _orq_t0_call
    _orq_check = _orq_t0_memo_check(_orq_check, 512)
    _orq_t0_call = _orq_t0_make_call(rules_json)
    import gc
    gc.collect()
    gc.freeze()  # what set-up made: a call's collection (_orq_t0_reset) skips it


def _orq_t0_memo_check(check, size):
    """Wrap the runner's checker so a body it accepted before (same code,
    same allowlist) is not walked again. The checker is a pure function of
    (code, allowed_imports, rules, classes) and the rules table is fixed for the life
    of the process, so a hit is the verdict a fresh check would give. Only
    clean verdicts are kept."""
    clean = {}
    _len, _tuple, _sorted = len, tuple, sorted

    def memo_check(code, allowed_imports, rules, classes=False):
        key = (code, _tuple(_sorted(allowed_imports)), classes is True)
        if key in clean:
            return []
        findings = check(code, allowed_imports, rules, classes)
        if not findings:
            if _len(clean) >= size:
                del clean[next(iter(clean))]
            clean[key] = True
        return findings

    return memo_check


def _orq_t0_capture_class():
    """Return a new class of capture streams. Each call makes its own, so a
    call that changes the class (its write method) changes nothing the next
    call uses."""

    class _OrqT0Capture:
        """A write-only text stream that keeps at most `limit` bytes (UTF-8),
        plus up to 4 more so the Go side can cut on a rune boundary."""

        __slots__ = ("limit", "parts", "n", "truncated")

        def __init__(self, limit):
            self.limit = limit
            self.parts = []
            self.n = 0
            self.truncated = False

        def write(self, s):
            if not isinstance(s, str):
                raise TypeError("write() argument must be str, not %s"
                                % type(s).__name__)
            if not self.truncated and s:
                b = s.encode("utf-8", "backslashreplace")
                room = self.limit - self.n
                if len(b) > room:
                    self.truncated = True
                    b = b[:room + 4]
                self.parts.append(b)
                self.n += len(b)
            return len(s)

        def flush(self):
            pass

        def writable(self):
            return True

        def isatty(self):
            return False

        def value(self):
            return b"".join(self.parts)
    return _OrqT0Capture


def _orq_t0_make_call(rules_json):
    """Return the per-call entry point. What it uses is bound here, once:
    the runner's execute function, the rules table as immutable bytes
    (decoded afresh for each call, so a call that mutates its table does not
    weaken the next caller's), and the stdlib functions it calls. The C side
    restores the runner's namespace before each call as well."""
    import json
    import linecache
    import sys

    execute, loads, new_capture = _orq_execute, json.loads, _orq_t0_capture_class
    reset = _orq_t0_reset
    cache = linecache.cache
    rules = bytes(rules_json, "utf-8") if isinstance(rules_json, str) else bytes(rules_json)

    def _orq_t0_call(req_json, max_out):
        """Run one request (JSON bytes without the rules table). Returns
        (response bytes, stdout bytes, stdout truncated, stderr bytes,
        stderr truncated)."""
        capture = new_capture()
        out = capture(max_out)
        err = capture(max_out)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            req = loads(req_json)
            req["rules"] = loads(rules)
            resp = execute(req)
        finally:
            reset()  # with the call's own capture streams in place
            sys.stdout, sys.stderr = saved
            cache.pop("<sandbox>", None)
        return resp, out.value(), out.truncated, err.value(), err.truncated

    return _orq_t0_call


def _orq_t0_reset():
    """After each call, still under its audit hook (embed.c disarms once
    this returns): the allowed modules' process-wide state a call can
    change through their public surface put back (the random module's
    generator reseeded, the thread's decimal context a fresh copy of the
    default, the equality-keyed caches of struct, re's replacement
    templates, _strptime, zoneinfo and typing emptied), and the call's garbage collected, so a finaliser of the
    call's objects (a generator's finally block) runs now, armed, not
    during a later call. The objects the runner holds were frozen at set-up
    (gc.freeze), so a collection walks only what calls made."""
    import gc
    import sys

    m = sys.modules.get("random")
    if m is not None:
        try:
            m.seed()
        except Exception:  # noqa: BLE001
            pass
    m = sys.modules.get("decimal")
    if m is not None:
        try:
            m.setcontext(m.Context())
        except Exception:  # noqa: BLE001
            pass
    # Caches keyed by the calls' objects, which a later caller's lookup
    # compares with: a key whose __eq__ says yes to anything (a str
    # subclass) handed the later caller the earlier call's entry
    # (strptime's regex of another format, another zone, typing's alias
    # holding the call's object, struct's format). Emptied, not trusted.
    mods = sys.modules
    try:
        if "struct" in mods:
            mods["struct"]._clearcache()
        if "re" in mods:
            mods["re"]._compile_repl.cache_clear()  # keyed by the replacement
        if "_strptime" in mods:
            mods["_strptime"]._regex_cache.clear()
        if "zoneinfo" in mods:
            mods["zoneinfo"].ZoneInfo.clear_cache()
        if "typing" in mods:
            for clear in mods["typing"]._cleanups:
                clear()
    except Exception:  # noqa: BLE001
        pass
    gc.collect()


_orq_t0_call = None
