# seal.py — the runner, part 3 of 4: the kernel sealing layers.
#
# Part of the runner program; see imports.py for how the parts are joined.
#
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
