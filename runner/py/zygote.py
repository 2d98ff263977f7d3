# zygote.py — the runner, part 4 of 4: the fork-server (zygote) and its children.
#
# Part of the runner program; see imports.py for how the parts are joined.

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
        os._exit(_orq_exit_cannot_serve)


def _orq_read_request():
    """The request a child got on fd 0, read to end-of-file and parsed."""
    import json
    import os

    chunks = []
    while True:
        b = os.read(0, 1 << 16)
        if not b:
            break
        chunks.append(b)
    return json.loads(b"".join(chunks))


def _orq_send_response(resp):
    """Flush the user's stdout and stderr, write resp to fd 3 and close fds
    0-3: end-of-file for the parent now, before the address space is torn
    down (it has the whole result and need not wait for the exit). A
    response that cannot be written ends the process with
    _orq_exit_response_lost."""
    import os
    import sys

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    try:
        view = memoryview(resp)
        while view:
            view = view[os.write(3, view):]
        for fd in (3, 1, 2, 0):
            os.close(fd)
    except OSError:
        os._exit(_orq_exit_response_lost)


def _orq_forkserver_child(sock_fd, st, zygote_pid, rules):
    """A pre-forked child of the Python loop. While idle (off the critical
    path): make itself a process group leader, close every descriptor but
    its private socket (whose other end the zygote hands to Go), seal. Then
    wait for the four descriptors of one execution (SCM_RIGHTS, sent by
    Go), take them as fd 0-3 and serve. (forkcore.c's orq_child does the
    same in C.) Never returns."""
    import array
    import os
    import signal
    import socket

    try:
        # The zygote's SIGCHLD handler and wakeup descriptor (without
        # pidfds) are not the child's.
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        st["pdeathsig"]()
        if os.getppid() != zygote_pid:
            os._exit(_orq_exit_parent_gone)
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


def _orq_forkserver_serve(rules, max_procs=0, hold=-1):
    """A fork-server child, sealed, holding the execution's descriptors as
    fd 0-3: read the request from fd 0, run it, write the response to fd 3
    and exit. One execution per process; never returns. With hold >= 0 (the
    zygote's training child, _orq_hot_pages) it reads one byte from hold
    before it exits, so its parent can look at the pages it wrote.

    No warm-up run happens in a child: the zygote ran one before it forked,
    so the caches are in the shared heap; a second one per child only
    pre-copied ~280 pages, which cost more throughput (the refill competes
    for the cores) than the faults it saved an execution."""
    import os

    _orq_one_shot[0] = True
    _orq_core_arms[0] = True
    try:
        if max_procs > 0:  # a child of the C loop: its RLIMIT_NPROC (Seal.MaxProcs)
            import resource
            resource.setrlimit(resource.RLIMIT_NPROC, (max_procs, max_procs))
        req = _orq_read_request()
        if not isinstance(req, dict) or req.get("op", "execute") != "execute":
            raise ValueError("bad request")
        if req.get("rules") is None:  # null: the zygote's table, parsed once
            req["rules"] = rules
    except BaseException as e:  # noqa: BLE001
        _orq_child_fail(e)
    if not req.get("limits_applied"):  # else Go set them with prlimit
        _orq_apply_limits(req)
    _orq_send_response(_orq_execute_child(req))
    if hold >= 0:
        os.read(hold, 1)
    os._exit(0)


# The second training child's body (_orq_hot_pages): code of the shape
# generated code has (helpers, loops, comprehensions, a lambda key,
# unpacking, try/except, an f-string, dict and string methods) and new to
# the zygote, so the child goes the whole way of a body never seen before
# (parse, check, guard, compile, run, encode): with the pages that way
# writes copied ahead, a new body's execution takes ~30 % fewer faults.
_orq_hot_body = "\n".join((
    "def normalize(words):",
    "    return [w.strip().lower() for w in words if w and w.strip()]",
    "",
    "def score(word, weights):",
    "    total = 0",
    "    for i, ch in enumerate(word):",
    "        total += weights.get(ch, 1) * (i + 1)",
    "    return total",
    "",
    'xs = args.get("xs", [])',
    'words = normalize(["Alpha", " beta", "Gamma ", "", "delta", "beta"] * 3)',
    'weights = {c: i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}',
    "ranked = sorted(set(words), key=lambda w: (-score(w, weights), w))",
    "counts = {}",
    "for w in words:",
    "    counts[w] = counts.get(w, 0) + 1",
    "pairs = [(a, b) for a, b in zip(xs, xs[1:]) if a < b]",
    "try:",
    "    mean = sum(xs) / len(xs)",
    "except ZeroDivisionError:",
    "    mean = 0.0",
    "top, *rest = ranked or [None]",
    'label = "many" if len(rest) > 2 else "few"',
    'summary = f"{len(words)} words, top {top!r}, mean {mean:.2f}, {label}"',
    'result = {"ranked": ranked[:3], "counts": dict(sorted(counts.items())),',
    '          "pairs": len(pairs), "summary": summary.upper().split(","),',
    '          "squares": {str(x): x * x for x in xs if isinstance(x, int)},',
    '          "total": sum(x * x for x in xs), "any": any(x > 5 for x in xs),',
    '          "span": max(xs) - min(xs) if xs else 0}',
    "return result",
))


# The zygote's warm-up body: it runs it once before it forks, so the
# body is accepted and compiled in its cache, and the first training child
# runs it as every warm body runs (no parse, no check, no compile).
_orq_warmup_body = "x = [i * 2 for i in range(8)]\nreturn {'n': sum(x)}"


def _orq_hot_request(code):
    """A training child's request: code over ten numbers."""
    import json

    return json.dumps({"op": "execute", "code": code,
                       "args": {"xs": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]},
                       "allowed_imports": [], "rules": None,
                       "max_output_bytes": 65536, "limits_applied": True}).encode()


def _orq_hot_pages(core, pagemap_fd, maps_fd, rules):
    """Have the C loop learn the zygote's hot pages (forkcore.c,
    orq_learn_hot_pages) from two training children, one after the other,
    each running a request through _orq_forkserver_serve and then waiting
    so the zygote can see which of its pages the child wrote: the warm-up
    body (what every execution writes) and _orq_hot_body (what a body new
    to the zygote writes on top). pagemap_fd and maps_fd were opened
    before the seal. Returns (pages every new child copies ahead, pages a
    child forked while most executions were new copies on top); (0, 0):
    none, children fault them in."""
    import ctypes
    import os

    core.orq_learn_hot_pages.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                         ctypes.c_int, ctypes.c_int, ctypes.py_object,
                                         ctypes.c_int]
    core.orq_learn_hot_pages.restype = ctypes.c_int
    learned = []
    for extra, code in enumerate((_orq_warmup_body, _orq_hot_body)):
        pipes = [os.pipe() for _ in range(5)]  # stdin, stdout, stderr, response, hold
        try:
            os.write(pipes[0][1], _orq_hot_request(code))
            os.close(pipes[0][1])
            child = (ctypes.c_int * 5)(pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1], pipes[4][0])
            # The C side closes the child's ends, the response and the hold pipe.
            n = core.orq_learn_hot_pages(pagemap_fd, maps_fd, child, pipes[3][0], pipes[4][1],
                                         lambda hold: _orq_forkserver_serve(rules, 0, hold), extra)
            learned.append(max(n, 0))
        finally:
            for f in (pipes[1][0], pipes[2][0]):
                os.close(f)
        if not learned[0]:
            return 0, 0
    return learned[0], learned[1]


def _orq_forkserver_main():
    """The zygote. Reads its config (JSON: preload, seal, pool, rules: the
    rules table used when a request carries none) from stdin, imports what
    children need, seals itself, then serves the control socket on fd 3
    (SOCK_SEQPACKET, one JSON message per packet). It keeps `pool`
    (default 2) children pre-forked, each warming up and sealing itself
    while it waits on a private socketpair, and hands each one's end of that
    socketpair and a pidfd to Go at once: Go sends an execution's four
    descriptors straight to a ready child, without a hop through here. The
    zygote only refills the pool, reaps, and reports every exit (the
    messages and their constants are runner/childproto.go's):

      zygote -> Go  {"t":"ready","pid","layers","missing","pidfds"} | {"t":"fatal","error"}
      zygote -> Go  {"t":"idle","pid"} with SCM_RIGHTS [child socket, pidfd]
                    ([child socket] without pidfds)
      Go -> child   "r MB S" with SCM_RIGHTS [stdin, stdout, stderr, response]
      Go -> zygote  {"t":"took","pid"}  (refill the pool)
      Go -> zygote  {"t":"kill","pid"}  (without pidfds: SIGKILL a child
                    not reaped yet, and its process group)
      zygote -> Go  {"t":"exit","pid","status","utime","stime"} (every
                    child, reaped, whether it ran an execution or died idle)
      Go -> zygote  {"t":"warm","code","allowed_imports"} (a body a child
                    accepted: check and compile it here once, so children
                    forked from now on skip that; see _orq_warm)

    EOF on the control socket (the plugin went away) kills every child and
    exits."""
    import array
    import errno
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
                                                 ctypes.c_longlong, ctypes.c_int,
                                                 ctypes.py_object, ctypes.py_object]
                core.orq_zygote_loop.restype = ctypes.c_int
                core.orq_core_module.restype = ctypes.py_object
                _orq_core.append(core.orq_core_module())
            except Exception as e:  # noqa: BLE001
                core, core_error = None, "%s: %s" % (type(e).__name__, e)
            finally:
                os.close(core_fd)
        # The zygote keeps its children by pidfd where the kernel has
        # them; where pidfd_open is ENOSYS (gVisor's Sentry, kernels before
        # 5.3), or Go asked for it (no_pidfds: the test seam of that path),
        # by pid: it is their parent, so it reaps them on SIGCHLD, and Go
        # kills them through it (the kill message).
        pidfds = not cfg.get("no_pidfds")
        if pidfds:
            try:
                os.close(os.pidfd_open(os.getpid()))
            except OSError as e:
                if e.errno != errno.ENOSYS:
                    raise
                pidfds = False
        # For the C loop's hot pages (_orq_hot_pages): opened before the
        # seal, which forbids opening anything under /proc.
        hot_fds = ()
        if core is not None and not cfg.get("no_hot_pages"):
            try:
                hot_fds = (os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC),
                           os.open("/proc/self/maps", os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                hot_fds = ()
        st = _orq_seal_prepare(cfg.get("seal") or {})
        _orq_seal_apply(st, "zygote")
        rules = cfg.get("rules") or {}
        # Once here rather than in every child: the sets the checker, the
        # builtins and the audit hook derive from the rules table, the
        # ballast, and the modules and caches a first execution warms up (a
        # trusted body; the audit hook is disarmed again when it returns).
        _orq_execute({"code": _orq_warmup_body,
                      "args": {}, "allowed_imports": [], "rules": rules})
        _orq_env([], rules, keep=True)  # what most executions use
        _orq_prepare(cfg, rules, keep=True)  # the session's modules (Prepare)
        _orq_ballast_ready()
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException as e:  # noqa: BLE001
        try:
            send({"t": _orq_msg_fatal, "error": "%s: %s" % (type(e).__name__, e)})
        finally:
            os._exit(_orq_exit_zygote_failed)

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
    hot = hot_new = 0
    if hot_fds:
        hot, hot_new = _orq_hot_pages(core, hot_fds[0], hot_fds[1], rules)
        for f in hot_fds:
            os.close(f)
    send({"t": _orq_msg_ready, "pid": me, "layers": st["layers"], "missing": st["missing"],
          "core": core is not None, "core_error": core_error, "hot_pages": hot,
          "hot_pages_new": hot_new, "pidfds": pidfds})
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
                             st["fsize"], 1 if pidfds else 0,
                             lambda msg: _orq_warm(msg, rules),
                             lambda: _orq_forkserver_serve(rules, st["max_procs"]))
        os._exit(_orq_exit_zygote_failed)

    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)
    children = {}  # pid -> pidfd (-1 without pidfds), until reaped
    byfd = {}      # pidfd -> pid
    idle = set()   # pids pre-forked and not yet taken by Go
    wake = -1      # without pidfds: SIGCHLD's wakeup descriptor
    if not pidfds:
        wake, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        poller.register(wake, select.POLLIN)

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
        pfd = -1
        if pidfds:
            try:
                pfd = os.pidfd_open(pid)
            except BaseException:
                a.close()
                raise
            byfd[pfd] = pid
            poller.register(pfd, select.POLLIN)
        children[pid] = pfd
        idle.add(pid)
        try:
            send({"t": _orq_msg_idle, "pid": pid}, [a.fileno(), pfd] if pidfds else [a.fileno()])
        except OSError:
            shutdown()
        finally:
            a.close()

    def kill(pid):
        # Only a child not reaped yet: its pid (and its group's) cannot
        # have been reused.
        if pid not in children:
            return
        for target in (-pid, pid):
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass

    def shutdown():
        for pid, pfd in list(children.items()):
            try:
                if pfd >= 0:
                    signal.pidfd_send_signal(pfd, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        os._exit(0)

    def reaped(pid, status, ru):
        # Report a child's exit (pid reaped, its pidfd still open).
        pfd = children.pop(pid, -1)
        if pfd >= 0:
            byfd.pop(pfd, None)
            poller.unregister(pfd)
            os.close(pfd)
        idle.discard(pid)
        try:
            send({"t": _orq_msg_exit, "pid": pid, "status": status,
                  "utime": ru.ru_utime if ru else 0.0,
                  "stime": ru.ru_stime if ru else 0.0})
        except OSError:
            shutdown()

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
            if fd == wake:
                # SIGCHLD: reap every child that exited (the byte is
                # written after the exit, so none is missed).
                try:
                    while os.read(wake, 512):
                        pass
                except BlockingIOError:
                    pass
                while True:
                    try:
                        pid, status, ru = os.wait4(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    if pid in children:
                        reaped(pid, status, ru)
                continue
            if fd != ctl.fileno():
                pid = byfd[fd]
                try:
                    _, status, ru = os.wait4(pid, 0)
                except ChildProcessError:
                    status, ru = 0, None
                reaped(pid, status, ru)
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
                if doc.get("t") == _orq_msg_took:
                    idle.discard(doc.get("pid"))
                elif doc.get("t") == _orq_msg_kill:
                    pid = doc.get("pid")
                    if isinstance(pid, int) and pid > 0:
                        kill(pid)
                elif doc.get("t") == _orq_msg_warm:
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
