# seal.py — the runner, part 3 of 4: the kernel sealing layers.
#
# Part of the runner program; see imports.py for how the parts are joined.
#
# ---------------------------------------------------------------------------
# Sealing and the fork-server (tier 1). Trusted runner code: it runs before
# any user code, and user code never sees ctypes, the ruleset fd or the
# control socket (all are locals of these functions, closed in the child).
#
# Every system call number, kernel constant and seccomp program comes from
# the seal config's "kernel" table (runner.KernelTable, built in Go for the
# architecture it runs on); none is written here.
#
#   _orq_seal_prepare(cfg)         process-wide layers, once: no_new_privs,
#                                  unprivileged uid, user + network namespace;
#                                  builds the Landlock ruleset and loads the
#                                  seccomp programs. Returns the state.
#   _orq_seal_apply(st, zygote)    per-process layers: Landlock
#                                  restrict_self, rlimits, seccomp filter.
#   _orq_forkserver_main()         the zygote: argv "forkserver", fd 3 a
#                                  SOCK_SEQPACKET control socket (see
#                                  plugins/subprocess/forkserver.go).
# ---------------------------------------------------------------------------

def _orq_seal_prepare(cfg):
    """Establish the process-wide layers and prepare the per-process ones.

    cfg: {"uid", "gid": the unprivileged ids used when running as root
    (default 65534); "read_paths": files/dirs the sandbox may read besides
    the stdlib; "write_paths": directories it may also write (regular
    files and directories in them); "egress": the session's egress proxy
    ({"url", "host", "port"}: runner.Egress) or absent; "disable": layers
    not to attempt (tests); "require": layers
    whose absence raises; "kernel": {"machine", "sys": system call numbers,
    "const": kernel constants, "seccomp": {kind: program as hex},
    "seccomp_error"}}. Without a kernel table for this machine, every layer
    but the uid drop is missing. Returns a dict with "layers" (in force),
    "missing" ({layer: reason}) and what _orq_seal_apply needs."""
    import ctypes
    import os
    import stat
    import struct
    import sys

    cfg = cfg or {}
    disable = frozenset(cfg.get("disable") or ())
    # The egress proxy: the sandbox keeps its network namespace (the
    # session's: its only route out is the proxy), and the seccomp net
    # programs and Landlock's port rule let it reach the proxy.
    egress = cfg.get("egress")
    if not (isinstance(egress, dict) and isinstance(egress.get("port"), int)
            and 0 < egress["port"] < 65536 and isinstance(egress.get("host"), str)
            and isinstance(egress.get("url"), str)):
        egress = None
    layers, missing = [], {}
    machine = os.uname().machine
    kernel = cfg.get("kernel")
    if not isinstance(kernel, dict):
        no_kernel = "the seal config has no kernel table"
    elif kernel.get("machine") != machine:
        no_kernel = "the seal config's kernel table is for %s, this is %s" % (
            kernel.get("machine"), machine)
    else:
        no_kernel = None
    if no_kernel:
        kernel = {}
    nr = kernel.get("sys") or {}
    c = kernel.get("const") or {}
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

    def want(name, table=True):
        if name in disable:
            missing[name] = "disabled"
            return False
        if table and no_kernel:
            missing[name] = no_kernel
            return False
        return True

    def pdeathsig():
        # The parent's death kills this process (a no-op without a table:
        # the layers are all missing then).
        if c:
            prctl(c["PR_SET_PDEATHSIG"], c["SIGKILL"], 0, 0, 0)

    st = {"layers": layers, "missing": missing, "ruleset_fd": -1,
          "sysc": sysc, "prctl": prctl, "fail": fail, "ctypes": ctypes,
          "const": c, "sys": nr, "pdeathsig": pdeathsig, "stdlib": [],
          "max_procs": int(cfg.get("max_procs") or 0)}

    # 0. Not root, with subordinate ids (Seal.SubIDs): fork the helper that
    #    maps this process's user namespace (step 3) to them, now, before
    #    no_new_privs, which would keep the setuid newuidmap from working,
    #    and before the namespace, in which its owner (root) is unmapped.
    #    It waits for a byte (EOF: no namespace, nothing to map), then runs
    #    newuidmap and newgidmap on this process.
    root = os.getuid() == 0 or os.geteuid() == 0 or os.getgid() == 0
    in_uid = int(cfg.get("uid") or 65534)
    in_gid = int(cfg.get("gid") or 65534)
    mapper = None
    sub = cfg.get("subids")
    if "separate_uid" in disable:
        missing["separate_uid"] = "disabled"
    elif root:
        pass
    elif not isinstance(sub, dict):
        missing["separate_uid"] = cfg.get("subids_missing") or "no subordinate ids configured"
    elif no_kernel or "user_namespace" in disable:
        missing["separate_uid"] = no_kernel or "no user namespace (disabled)"
    else:
        me = os.getpid()
        go_r, go_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(go_w)
                os.close(err_r)
                os.dup2(err_w, 2)
                if os.read(go_r, 1) != b"m":
                    os._exit(0)
                for tool, inside, outside in ((sub["newuidmap"], in_uid, sub["uid"]),
                                              (sub["newgidmap"], in_gid, sub["gid"])):
                    k = os.fork()
                    if k == 0:
                        os.execve(tool, [tool, str(me), str(inside), str(outside), "1"], {})
                    _, status = os.waitpid(k, 0)
                    if status != 0:
                        os._exit(_orq_exit_id_map)
                os._exit(0)
            except BaseException:  # noqa: BLE001
                os._exit(_orq_exit_id_map)
        os.close(go_r)
        os.close(err_w)
        mapper = (pid, go_w, err_r)

    def map_ids():
        # Step 3's namespace exists (go is True) or not: let the helper
        # map it or leave, and reap it. Returns None or why not mapped.
        pid, go_w, err_r = mapper
        try:
            os.write(go_w, b"m" if go else b"")
        finally:
            os.close(go_w)
        _, status = os.waitpid(pid, 0)
        with os.fdopen(err_r, "rb") as f:
            err = f.read(4096).decode("utf-8", "replace").strip()
        if not go:
            return None
        if status != 0:
            return "newuidmap/newgidmap failed (wait status %d): %s" % (status, err or "no message")
        return None

    # 1. no_new_privs: nothing this process or its children execute can gain
    #    privileges (also what Landlock and seccomp require unprivileged).
    if want("no_new_privs"):
        if prctl(c["PR_SET_NO_NEW_PRIVS"], 1, 0, 0, 0) == 0:
            layers.append("no_new_privs")
        else:
            missing["no_new_privs"] = fail()

    # 2. Never run as root: drop to an unprivileged uid/gid first. A uid
    #    change clears the parent-death signal: set it again afterwards.
    parent = os.getppid()
    if want("unprivileged_uid", table=False):
        if root:
            try:
                os.setgroups([])
                os.setresgid(in_gid, in_gid, in_gid)
                os.setresuid(in_uid, in_uid, in_uid)
                layers.append("unprivileged_uid")
                if "separate_uid" not in disable:
                    layers.append("separate_uid")  # the plugin's uid is root
            except OSError as e:
                missing["unprivileged_uid"] = str(e)
                missing.setdefault("separate_uid", str(e))
        else:
            layers.append("unprivileged_uid")
    elif root:
        missing.setdefault("separate_uid", "unprivileged_uid disabled: the child stays root")
    pdeathsig()
    if os.getppid() != parent:
        os._exit(_orq_exit_parent_gone)  # the parent died meanwhile

    # 3. A user namespace (no uid map is written: nothing inside maps to any
    #    host uid, least of all root) owning a fresh network namespace with
    #    only a loopback interface that is down: no network at all.
    #    Not root, with subordinate ids: the helper maps in_uid/in_gid of
    #    the namespace to them and this process takes them (it holds every
    #    capability in its new namespace until the capset below), so the
    #    kernel checks files against an id no account owns, not against
    #    the plugin's uid; its supplementary groups go too.
    #    With a mount namespace of its own too, an empty read-only tmpfs
    #    hides /proc (proc_hidden): no host pid can be stat'ed, no
    #    /proc/<pid> of another process read (there is no pid namespace:
    #    a fork server's children share the host's pids).
    #    With an egress proxy there is no network namespace of its own: the
    #    proxy listens in the session's.
    if egress:
        missing["network_namespace"] = ("egress: the sandbox stays in the session's network "
                                        "namespace, whose only route out is the egress proxy")
        want_ns = [want("user_namespace")]
        newnet, net_layer = 0, []
    else:
        want_ns = [want("user_namespace"), want("network_namespace")]
        newnet, net_layer = None, ["network_namespace"]
    go = False
    if all(want_ns):
        if newnet is None:
            newnet = c["CLONE_NEWNET"]
        hide = want("proc_hidden")
        ok = hide and libc.unshare(c["CLONE_NEWUSER"] | newnet | c["CLONE_NEWNS"]) == 0
        if hide and not ok:
            missing["proc_hidden"] = "unshare(CLONE_NEWNS): " + fail()
        if not ok:
            ok = libc.unshare(c["CLONE_NEWUSER"] | newnet) == 0
        elif libc.mount(None, b"/", None, c["MS_REC"] | c["MS_PRIVATE"], None) != 0 \
                or libc.mount(b"none", b"/proc", b"tmpfs", c["MS_RDONLY"] | c["MS_NOSUID"]
                              | c["MS_NODEV"] | c["MS_NOEXEC"], b"size=4k,mode=555") != 0:
            missing["proc_hidden"] = "mount: " + fail()
        else:
            layers.append("proc_hidden")
        if ok:
            layers += ["user_namespace"] + net_layer
            if mapper:
                go = True
                why = map_ids()
                mapper = None
                if why:
                    missing["separate_uid"] = why
                else:
                    os.setgroups([])
                    os.setresgid(in_gid, in_gid, in_gid)
                    os.setresuid(in_uid, in_uid, in_uid)
                    layers.append("separate_uid")
                    # A uid change clears the parent-death signal.
                    pdeathsig()
                    if os.getppid() != parent:
                        os._exit(_orq_exit_parent_gone)
            # Drop the capabilities the new namespace granted.
            hdr = (ctypes.c_uint32 * 2)(c["LINUX_CAPABILITY_VERSION_3"], 0)
            data = (ctypes.c_uint32 * 6)()
            if sysc(nr["capset"], hdr, data) != 0:
                raise OSError("capset after unshare failed: " + fail())
        else:
            why = fail()
            missing["user_namespace"] = why
            if egress:
                pass  # the session's namespace (see above)
            elif libc.unshare(c["CLONE_NEWNET"]) == 0:
                layers.append("network_namespace")
            else:
                missing["network_namespace"] = why
    if mapper:  # no namespace to map: the helper leaves
        map_ids()
        missing.setdefault("separate_uid", missing.get("user_namespace", "no user namespace"))

    # 4. Landlock: read the stdlib and the interpreter's libraries, nothing
    #    else; write nothing; no TCP bind, and no TCP connect but, with an
    #    egress proxy, to the proxy's port; no signals or abstract unix
    #    sockets outside the domain.
    stdlib = []
    for p in [os.path.dirname(os.__file__)] + list(sys.path):
        if p and os.path.isdir(p) and p not in stdlib:
            stdlib.append(p)
    st["stdlib"] = stdlib
    # RLIMIT_FSIZE: 0 (no file written), else the cap of one file.
    st["fsize"] = int(cfg.get("max_file_bytes") or 8 << 20) if cfg.get("write_paths") else 0
    if want("landlock_fs"):
        abi = sysc(nr["landlock_create_ruleset"], None, 0, c["LANDLOCK_CREATE_RULESET_VERSION"])
        if abi < 1:
            missing["landlock_fs"] = "Landlock unavailable: " + fail()
        else:
            fs = 0
            for right in ("EXECUTE", "WRITE_FILE", "READ_FILE", "READ_DIR", "REMOVE_DIR",
                          "REMOVE_FILE", "MAKE_CHAR", "MAKE_DIR", "MAKE_REG", "MAKE_SOCK",
                          "MAKE_FIFO", "MAKE_BLOCK", "MAKE_SYM"):  # ABI 1
                fs |= c["LANDLOCK_ACCESS_FS_" + right]
            if abi >= 2:
                fs |= c["LANDLOCK_ACCESS_FS_REFER"]
            if abi >= 3:
                fs |= c["LANDLOCK_ACCESS_FS_TRUNCATE"]
            if abi >= 5:
                fs |= c["LANDLOCK_ACCESS_FS_IOCTL_DEV"]
            net = scoped = 0
            if abi >= 4 and "landlock_net" not in disable:
                net = c["LANDLOCK_ACCESS_NET_BIND_TCP"] | c["LANDLOCK_ACCESS_NET_CONNECT_TCP"]
            if abi >= 6 and "landlock_scope" not in disable:
                scoped = c["LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET"] | c["LANDLOCK_SCOPE_SIGNAL"]
            size = 8 if abi < 4 else 16 if abi < 6 else 24
            attr = ctypes.create_string_buffer(struct.pack("=QQQ", fs, net, scoped)[:size], size)
            fd = sysc(nr["landlock_create_ruleset"], attr, size, 0)
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
                        acc = c["LANDLOCK_ACCESS_FS_READ_FILE"]
                        if stat.S_ISDIR(os.fstat(pfd).st_mode):
                            acc |= c["LANDLOCK_ACCESS_FS_READ_DIR"]
                        rule = ctypes.create_string_buffer(struct.pack("=Qi", acc, pfd), 12)
                        if sysc(nr["landlock_add_rule"], fd, c["LANDLOCK_RULE_PATH_BENEATH"],
                                rule, 0) != 0:
                            raise OSError("landlock_add_rule %s: %s" % (p, fail()))
                    finally:
                        os.close(pfd)
                # write_paths: directories the sandbox may also write (a
                # tier-2 session's workspace): create, write and truncate
                # regular files, make and remove directories, remove and
                # rename (REFER: from one directory to another) below
                # them; nothing else (no link, symbolic link, device,
                # socket or FIFO; seccomp refuses linkat and symlinkat
                # too). A rename or removal needs the right on the parent
                # directory, so the write path itself cannot be removed or
                # renamed, and nothing moves in or out of it.
                wr = c["LANDLOCK_ACCESS_FS_READ_FILE"] | c["LANDLOCK_ACCESS_FS_READ_DIR"]
                wr |= c["LANDLOCK_ACCESS_FS_WRITE_FILE"] | c["LANDLOCK_ACCESS_FS_MAKE_REG"]
                wr |= c["LANDLOCK_ACCESS_FS_MAKE_DIR"] | c["LANDLOCK_ACCESS_FS_REMOVE_DIR"]
                wr |= c["LANDLOCK_ACCESS_FS_REMOVE_FILE"]
                if abi >= 2:
                    wr |= c["LANDLOCK_ACCESS_FS_REFER"]
                if abi >= 3:
                    wr |= c["LANDLOCK_ACCESS_FS_TRUNCATE"]
                for p in list(cfg.get("write_paths") or ()):
                    try:
                        pfd = os.open(p, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY | os.O_NOFOLLOW)
                    except OSError:
                        continue
                    try:
                        rule = ctypes.create_string_buffer(struct.pack("=Qi", wr, pfd), 12)
                        if sysc(nr["landlock_add_rule"], fd, c["LANDLOCK_RULE_PATH_BENEATH"],
                                rule, 0) != 0:
                            raise OSError("landlock_add_rule %s: %s" % (p, fail()))
                    finally:
                        os.close(pfd)
                if net and egress:
                    # struct landlock_net_port_attr {allowed_access; port}
                    rule = ctypes.create_string_buffer(struct.pack(
                        "=QQ", c["LANDLOCK_ACCESS_NET_CONNECT_TCP"], egress["port"]), 16)
                    if sysc(nr["landlock_add_rule"], fd, c["LANDLOCK_RULE_NET_PORT"], rule, 0) != 0:
                        raise OSError("landlock_add_rule port %d: %s" % (egress["port"], fail()))
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

    # 5. seccomp: the programs of the kernel table (runner/seccomp), loaded
    #    now, installed per process. A seal with write_paths takes the
    #    workspace kinds ("full-ws", ...), which also let through mkdirat,
    #    unlinkat and renameat, only when Landlock is in force to keep
    #    them below write_paths: without it the plain programs refuse them
    #    everywhere (the workspace then takes new files only). A seal with
    #    an egress proxy takes the net kinds ("full-net", "child-ws-net",
    #    ...), which also let a TCP client through (socket for TCP only,
    #    connect, send, receive; no bind, listen or accept): Landlock,
    #    where in force (not in gVisor's Sentry), narrows connect to the
    #    proxy's port; the namespace has no route but to the proxy either way.
    if want("seccomp"):
        progs = kernel.get("seccomp") or {}
        kinds = ("full", "zygote", "child")
        suffix = "-ws" if cfg.get("write_paths") and "landlock_fs" in layers else ""
        if egress:
            suffix += "-net"
        if not all(progs.get(k + suffix) for k in kinds):
            missing["seccomp"] = kernel.get("seccomp_error") or (
                "no seccomp programs for %s in the seal config" % machine)
        elif prctl(c["PR_GET_SECCOMP"], 0, 0, 0, 0) < 0:
            missing["seccomp"] = "seccomp unavailable: " + fail()
        else:
            class _Prog(ctypes.Structure):
                _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

            for kind in kinds:
                prog = bytes.fromhex(progs[kind + suffix])
                if len(prog) % 8:
                    raise ValueError("seccomp program %s: %d bytes" % (kind, len(prog)))
                buf = ctypes.create_string_buffer(prog, len(prog))
                st["bpf_" + kind] = (buf, _Prog(len(prog) // 8, ctypes.addressof(buf)))
            layers.append("seccomp")

    # The runner's view of urllib.request (imports.py) sends through the
    # proxy, and its audit hook lets a socket connect to it alone.
    _orq_egress[:] = [dict(egress)] if egress else []

    need = [n for n in (cfg.get("require") or ()) if n not in layers]
    if need:
        raise OSError("required sealing layers not in force: " + ", ".join(
            "%s (%s)" % (n, missing.get(n, "unknown")) for n in need))
    return st


def _orq_seal_apply(st, role="full"):
    """Apply the per-process layers prepared by _orq_seal_prepare: Landlock
    restrict_self (a new, nested domain per process), RLIMIT_NOFILE,
    RLIMIT_FSIZE, RLIMIT_CORE, RLIMIT_NPROC and the seccomp filter (last: it forbids the
    calls that came before). role is "full" (a process sealed on its own),
    "zygote" or "child" (a fork-server child: the zygote's filter is
    inherited, the child stacks the rest). Raises if a prepared layer
    cannot be applied."""
    import os
    import resource

    sysc, prctl, fail, ctypes = st["sysc"], st["prctl"], st["fail"], st["ctypes"]
    c, nr = st["const"], st["sys"]
    layers = st["layers"]
    fd = st["ruleset_fd"]
    if "landlock_fs" in layers:
        if sysc(nr["landlock_restrict_self"], fd, 0) != 0:
            raise OSError("landlock_restrict_self: " + fail())
    if st["fsize"]:
        # A process that writes a workspace makes what it creates
        # writable by every uid (umask 0; a zygote's children inherit it):
        # the runtime that serves the workspace is root without
        # CAP_DAC_OVERRIDE and reaches the children's files and
        # directories through their "other" bits (an upload into a
        # directory the code made). The container has no third uid.
        os.umask(0)
    if role != "zygote":
        if fd >= 0:
            os.close(fd)
            st["ruleset_fd"] = -1
        for res, n in ((resource.RLIMIT_NOFILE, 64), (resource.RLIMIT_FSIZE, st["fsize"]),
                       (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(res, (n, n))
        if st["max_procs"] > 0:  # threads of escaped code: see Seal.MaxProcs
            n = st["max_procs"]
            resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
    if "seccomp" in layers:
        _, prog = st["bpf_" + role]
        if prctl(c["PR_SET_SECCOMP"], c["SECCOMP_MODE_FILTER"], ctypes.addressof(prog), 0, 0) != 0:
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
