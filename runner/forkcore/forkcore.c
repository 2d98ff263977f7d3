/*
 * forkcore: the fork-server zygote's loop in C.
 *
 * The zygote (runner/py/zygote.py, _orq_forkserver_main) imports and
 * seals itself in Python, then hands its control socket to
 * orq_zygote_loop, loaded with ctypes.PyDLL (the GIL stays held: no other
 * Python thread exists, and no Python code runs in the zygote again). The
 * loop speaks the same protocol as the Python loop it replaces
 * (runner/childproto.go states it; protocol.h is generated from it):
 *
 *   zygote -> Go  {"t":"idle","pid":N} with SCM_RIGHTS [child socket, pidfd]
 *                 ([child socket] without pidfds)
 *   Go -> zygote  {"t":"took","pid":N,"new":B}
 *   Go -> zygote  {"t":"kill","pid":N}  (SIGKILL a child not reaped yet)
 *   zygote -> Go  {"t":"exit","pid":N,"status":S,"utime":U,"stime":T}
 *   Go -> zygote  {"t":"warm",...}  (handed to the Python callable `warm`:
 *                 check and compile a body once, in the zygote, so the
 *                 children forked afterwards find it done)
 *
 * Why C: every fork write-protects the zygote's whole heap, so every page a
 * Python loop touches between two forks is a page fault (copy-on-write
 * while a child shares it), ~100-160 per fork; this loop touches its stack
 * and a small table. And a new child does, before it returns to Python,
 * what the Python child did while idle (parent-death signal, its own
 * process group, no inherited descriptors, the per-child Landlock domain,
 * rlimits, the child seccomp filter, the execution's four descriptors as
 * fd 0-3, and the execution's RLIMIT_AS and RLIMIT_CPU) without touching
 * the Python heap either. The policy (the
 * ruleset, the BPF program) is prepared in Python; this file only applies
 * it.
 *
 * A new child, sealed and holding fd 0-3, with its Python state
 * re-initialised (PyOS_AfterFork_Child, as os.fork does), calls the Python
 * callable `serve`, which runs its execution and ends the process (without
 * one, orq_zygote_loop returns in the child). In the zygote it never
 * returns: EOF on the control socket kills every child and exits.
 *
 * Where pidfd_open is ENOSYS (gVisor's Sentry, kernels before 5.3) the
 * zygote tells the loop so (pidfds = 0) and the loop keeps its children by
 * pid: it polls a self-pipe its SIGCHLD handler writes to and reaps with
 * wait4(-1, WNOHANG); a kill message names a pid it signals only while it
 * has not reaped it, so the pid cannot have been reused.
 */
#define _GNU_SOURCE
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol.h"
#include "audit.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef PR_SET_SECCOMP
#define PR_SET_SECCOMP 22
#endif
#define ORQ_SECCOMP_MODE_FILTER 2

#define ORQ_MAX_KIDS 1024

/* The runner's audit hook and class guard (audit.h) as a module object,
 * loaded by the zygote before it forks: a new reference. */
PyObject *orq_core_module(void)
{
    return orq_core_module_make();
}

/* The Python this file was compiled against: the zygote loads it only into
 * the same major.minor version (the C API it calls is version-specific). */
const unsigned long orq_python_hexversion = PY_VERSION_HEX;

struct orq_kid {
    pid_t pid;
    int pidfd; /* -1 without pidfds */
    int idle;
};

/* Without pidfds: the write end of the self-pipe the SIGCHLD handler
 * wakes the loop with (-1: none). Set once, before the loop forks. */
static int orq_sigchld_w = -1;

static void orq_on_sigchld(int sig)
{
    (void)sig;
    int saved = errno;
    if (write(orq_sigchld_w, "c", 1) < 0) {
        /* full: a wake-up is pending already */
    }
    errno = saved;
}

/* Room for the descriptors of one message (at most 8 here). */
union orq_cmsg {
    struct cmsghdr h;
    char buf[CMSG_SPACE(8 * sizeof(int))];
};

/* A one-buffer message header over buf, with ctl as its control space
 * (ctllen bytes of it; 0: none). */
static struct msghdr orq_msghdr(struct iovec *iov, void *buf, size_t len, union orq_cmsg *ctl, size_t ctllen)
{
    struct msghdr mh = {0};
    iov->iov_base = buf;
    iov->iov_len = len;
    mh.msg_iov = iov;
    mh.msg_iovlen = 1;
    if (ctllen > 0) {
        memset(ctl, 0, sizeof(*ctl));
        mh.msg_control = ctl->buf;
        mh.msg_controllen = ctllen;
    }
    return mh;
}

static void orq_close_from(int lo, int keep1, int keep2)
{
    int keep[2] = {keep1 < keep2 ? keep1 : keep2, keep1 < keep2 ? keep2 : keep1};
    for (int i = 0; i < 2; i++) {
        if (keep[i] < lo)
            continue;
        if (keep[i] > lo)
            syscall(SYS_close_range, (unsigned)lo, (unsigned)keep[i] - 1, 0);
        lo = keep[i] + 1;
    }
    syscall(SYS_close_range, (unsigned)lo, ~0U, 0);
}

/* The pages a child writes during a typical execution, learned once by
 * orq_learn_hot_pages as (start, length) runs. An idle child copies them
 * with one madvise(MADV_POPULATE_WRITE) per run instead of taking a
 * copy-on-write fault per page during its execution: off the critical
 * path, and a fraction of the CPU of the faults (each fault is a trap;
 * where traps are expensive, as in a paravirtualised guest, ~25 us against
 * ~8 us a page populated). Runs [0, common) are what every execution
 * writes (a warm body); runs [common, n) what a body new to the zygote
 * writes on top (its parse, check and compile), copied only while most
 * recent executions were new (new_score, from the took messages): a
 * tenant that calls warm tool bodies does not pay for them. Written once
 * before the loop starts, but for new_score. */
#define ORQ_HOT_MAX_RUNS 4096
#define ORQ_NEW_SCORE_MAX 256
static struct {
    unsigned long long runs[2 * ORQ_HOT_MAX_RUNS];
    int n, common;
    int new_score; /* 0..ORQ_NEW_SCORE_MAX, a moving share of new bodies */
} orq_hot = {.new_score = ORQ_NEW_SCORE_MAX};

/* Scratch space of orq_learn_hot_pages, static so that learning writes
 * no page of the heap it measures (these pages are left out). */
static struct {
    char maps[1 << 18];
    unsigned long long pm[4096];
    char resp[4096]; /* the head of the training response */
} orq_learn;

static ssize_t orq_read_all(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, cap - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -1 : (ssize_t)got;
        got += (size_t)n;
        if (got == cap) { /* keep only the head; drain the rest */
            char sink[512];
            while ((n = read(fd, sink, sizeof(sink))) > 0 || (n < 0 && errno == EINTR))
                ;
            return (ssize_t)got;
        }
    }
}

/* Is page in one of the runs [0, common)? (They are sorted: learned in
 * the order of /proc/self/maps, each mapping upwards.) */
static int orq_hot_common_has(unsigned long long page)
{
    int lo = 0, hi = orq_hot.common;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        unsigned long long start = orq_hot.runs[2 * mid], len = orq_hot.runs[2 * mid + 1];
        if (page < start)
            hi = mid;
        else if (page >= start + len)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

static void orq_hot_add(unsigned long long page)
{
    unsigned long long lo = (uintptr_t)&orq_learn, hi = lo + sizeof(orq_learn);
    if (page + 4096 > lo && page < hi)
        return;
    if (orq_hot_common_has(page))
        return;
    int n = orq_hot.n;
    if (n > orq_hot.common && orq_hot.runs[2 * n - 2] + orq_hot.runs[2 * n - 1] == page) {
        orq_hot.runs[2 * n - 1] += 4096;
        return;
    }
    if (n == ORQ_HOT_MAX_RUNS)
        return;
    orq_hot.runs[2 * n] = page;
    orq_hot.runs[2 * n + 1] = 4096;
    orq_hot.n = n + 1;
}

/* orq_learn_hot_pages learns the zygote's hot pages from one training
 * child. fds are the child's ends of its stdin (holding a typical request),
 * stdout, stderr and response pipes, and the read end of a hold pipe;
 * resp_r and hold_w are the zygote's ends. The child takes fds[0-3] as fd
 * 0-3 and calls serve (a Python callable that runs the execution and then
 * waits on the hold pipe before it exits). Every page the child wrote
 * since the fork is a copy now, so the zygote's own page is mapped once
 * ("exclusively mapped", bit 56 of /proc/self/pagemap, pagemap_fd) where
 * before the fork it was shared. The zygote waits for the response and
 * reads its pagemap here, in C with static buffers, so that its own writes
 * after the fork (a few stack pages) are not mistaken for the child's.
 * maps_fd is /proc/self/maps. Both were opened before the seal. extra 0
 * learns what every execution writes (a warm body's request: runs [0,
 * common)); extra 1, called after, what a body new to the zygote writes on
 * top (runs [common, n)). Returns how many pages that call learned (0:
 * none), -1 if the child could not be started. Call before
 * orq_zygote_loop. */
int orq_learn_hot_pages(int pagemap_fd, int maps_fd, const int fds[5], int resp_r, int hold_w, PyObject *serve,
                        int extra)
{
    if (!extra)
        orq_hot.common = 0;
    orq_hot.n = orq_hot.common;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        PyOS_AfterFork_Child();
        close(resp_r);
        close(hold_w);
        int hold = fcntl(fds[4], F_DUPFD_CLOEXEC, 10);
        for (int i = 0; i < 4; i++)
            if (hold < 0 || dup2(fds[i], i) != i)
                _exit(ORQ_EXIT_DESCRIPTORS);
        orq_close_from(4, hold, -1);
        PyObject *r = PyObject_CallOneArg(serve, PyLong_FromLong(hold));
        if (r == NULL)
            PyErr_Print();
        _exit(ORQ_EXIT_CANNOT_SERVE);
    }
    for (int i = 0; i < 5; i++)
        close(fds[i]);
    /* Any response will do: a body the rules table refuses, or that
     * fails, still went through the request path; no response means the
     * child did not get that far. */
    ssize_t n = orq_read_all(resp_r, orq_learn.resp, sizeof(orq_learn.resp));
    int ok = n > 0;
    ssize_t m = ok && lseek(maps_fd, 0, SEEK_SET) == 0 ? orq_read_all(maps_fd, orq_learn.maps, sizeof(orq_learn.maps) - 1) : -1;
    if (m > 0) {
        orq_learn.maps[m] = 0;
        for (char *line = orq_learn.maps; line != NULL && *line != 0;) {
            char *next = strchr(line, '\n');
            if (next != NULL)
                *next++ = 0;
            unsigned long long lo, hi;
            char perms[8];
            int off = 0;
            if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms, &off) >= 3 &&
                perms[1] == 'w' && perms[3] == 'p' && hi - lo <= (1ULL << 30) &&
                strncmp(line + off, "[v", 2) != 0) { /* [vvar], [vdso], [vsyscall] */
                for (unsigned long long a = lo; a < hi;) {
                    size_t want = (size_t)((hi - a) / 4096);
                    if (want > sizeof(orq_learn.pm) / sizeof(orq_learn.pm[0]))
                        want = sizeof(orq_learn.pm) / sizeof(orq_learn.pm[0]);
                    ssize_t got = pread(pagemap_fd, orq_learn.pm, want * 8, (off_t)(a / 4096 * 8));
                    if (got <= 0)
                        break;
                    for (ssize_t k = 0; k < got / 8; k++) {
                        unsigned long long v = orq_learn.pm[k];
                        if ((v >> 63 & 1) && (v >> 56 & 1)) /* present, exclusively mapped */
                            orq_hot_add(a + (unsigned long long)k * 4096);
                    }
                    a += (unsigned long long)(got / 8) * 4096;
                }
            }
            line = next;
        }
    }
    close(hold_w); /* the child exits */
    close(resp_r);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (!ok)
        orq_hot.n = orq_hot.common;
    if (!extra)
        orq_hot.common = orq_hot.n;
    int pages = 0;
    for (int i = extra ? orq_hot.common : 0; i < orq_hot.n; i++)
        pages += (int)(orq_hot.runs[2 * i + 1] / 4096);
    return pages;
}

/* Copy the hot pages into this child now, while it is idle: the common
 * runs, and a new body's too when `extra`. Best effort: a run that is no
 * longer mapped, or a kernel without MADV_POPULATE_WRITE (< 5.14), leaves
 * those pages to be faulted in as before. */
static void orq_populate_hot(int extra)
{
    int saved = errno;
    for (int i = 0, n = extra ? orq_hot.n : orq_hot.common; i < n; i++)
        (void)madvise((void *)(uintptr_t)orq_hot.runs[2 * i], (size_t)orq_hot.runs[2 * i + 1], MADV_POPULATE_WRITE);
    errno = saved;
}

/* The child, before it returns to Python: exits rather than run unsealed. */
static int orq_child(int sock, pid_t zygote, int ruleset_fd, const void *bpf, long long fsize, int extra)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != zygote)
        _exit(ORQ_EXIT_PARENT_GONE);
    /* Its own process group (the zygote does the same from its side). */
    setpgid(0, 0);
    orq_close_from(3, sock, ruleset_fd);
    /* A nested Landlock domain per child. */
    if (ruleset_fd >= 0) {
        if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) != 0)
            _exit(ORQ_EXIT_LANDLOCK);
        close(ruleset_fd);
    }
    struct rlimit nofile = {64, 64}, zero = {0, 0}, file = {(rlim_t)fsize, (rlim_t)fsize};
    if (setrlimit(RLIMIT_NOFILE, &nofile) != 0 || setrlimit(RLIMIT_FSIZE, &file) != 0 ||
        setrlimit(RLIMIT_CORE, &zero) != 0)
        _exit(ORQ_EXIT_RLIMITS);
    orq_populate_hot(extra);
    /* Last: the child filter forbids new processes and signals. */
    if (bpf != NULL && prctl(PR_SET_SECCOMP, ORQ_SECCOMP_MODE_FILTER, bpf, 0, 0) != 0)
        _exit(ORQ_EXIT_SECCOMP);

    /* Wait for the execution: ORQ_EXEC_FORMAT (memory MB, CPU seconds) and
     * its four descriptors. */
    char b[64];
    struct iovec iov;
    union orq_cmsg u;
    struct msghdr mh = orq_msghdr(&iov, b, sizeof(b) - 1, &u, CMSG_SPACE(4 * sizeof(int)));
    ssize_t n;
    do {
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    if (n <= 0 || c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len != CMSG_LEN(4 * sizeof(int)))
        _exit(0); /* shut down while idle */
    b[n] = 0;
    /* The limits before a byte of the request is read (soft CPU limit:
     * SIGXCPU; one second later the hard one: SIGKILL). Lowering them is
     * always allowed; a failure would leave them unset: exit instead. */
    int mem = 0, cpu = 0;
    if (sscanf(b, ORQ_EXEC_FORMAT, &mem, &cpu) != 2 || mem < 0 || cpu < 0)
        _exit(ORQ_EXIT_LIMITS);
    if (mem > 0) {
        struct rlimit as = {(rlim_t)mem << 20, (rlim_t)mem << 20};
        struct rlimit cur;
        if (getrlimit(RLIMIT_AS, &cur) == 0 && cur.rlim_max != RLIM_INFINITY && cur.rlim_max < as.rlim_max)
            as.rlim_cur = as.rlim_max = cur.rlim_max;
        if (setrlimit(RLIMIT_AS, &as) != 0)
            _exit(ORQ_EXIT_LIMITS);
    }
    if (cpu > 0) {
        struct rlimit c = {(rlim_t)cpu, (rlim_t)cpu + 1};
        struct rlimit cur;
        if (getrlimit(RLIMIT_CPU, &cur) == 0 && cur.rlim_max != RLIM_INFINITY) {
            if (cur.rlim_max < c.rlim_max)
                c.rlim_max = cur.rlim_max;
            if (c.rlim_cur > c.rlim_max)
                c.rlim_cur = c.rlim_max;
        }
        if (setrlimit(RLIMIT_CPU, &c) != 0)
            _exit(ORQ_EXIT_LIMITS);
    }
    int fds[4], high[4];
    memcpy(fds, CMSG_DATA(c), sizeof(fds));
    for (int i = 0; i < 4; i++) {
        high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10);
        if (high[i] < 0)
            _exit(ORQ_EXIT_DESCRIPTORS);
    }
    for (int i = 0; i < 4; i++)
        if (dup2(high[i], i) != i) /* dup2 clears close-on-exec */
            _exit(ORQ_EXIT_DESCRIPTORS);
    orq_close_from(4, -1, -1);
    return 0;
}

static int orq_send(int ctl, const char *msg, int len, const int *fds, int nfds)
{
    struct iovec iov;
    union orq_cmsg u;
    struct msghdr mh = orq_msghdr(&iov, (void *)msg, (size_t)len, &u, nfds > 0 ? CMSG_SPACE(nfds * sizeof(int)) : 0);
    if (nfds > 0) {
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    ssize_t n;
    do {
        n = sendmsg(ctl, &mh, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == len ? 0 : -1;
}

static void orq_shutdown(struct orq_kid *kids, int nkids)
{
    for (int i = 0; i < nkids; i++) {
        if (kids[i].pidfd >= 0)
            syscall(SYS_pidfd_send_signal, kids[i].pidfd, SIGKILL, NULL, 0);
        else
            kill(kids[i].pid, SIGKILL); /* not reaped yet: still ours */
        while (waitpid(kids[i].pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    _exit(0);
}

/* Pre-fork one child (kept by pidfd when pidfds, else by pid). Returns
 * the child's socket in the child, 0 in the zygote, -1 on failure
 * (logged). */
static int orq_spawn(int ctl, pid_t me, int ruleset_fd, const void *bpf, long long fsize, int pidfds,
                     struct orq_kid *kids, int *nkids, int *nidle)
{
    if (*nkids >= ORQ_MAX_KIDS) {
        errno = EMFILE;
        return -1;
    }
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(sp[0]);
        close(sp[1]);
        return -1;
    }
    if (pid == 0) {
        /* The zygote's SIGCHLD handler is not the child's (its self-pipe
         * is closed below). */
        if (orq_sigchld_w >= 0)
            signal(SIGCHLD, SIG_DFL);
        /* What os.fork does in a child: Python's state for this process
         * (the GIL, the import lock, threads) and the at-fork hooks. */
        PyOS_AfterFork_Child();
        close(sp[0]);
        /* The child's socket must not be fd 0-3. */
        int s = sp[1];
        if (s < 10) {
            s = fcntl(sp[1], F_DUPFD_CLOEXEC, 10);
            if (s < 0)
                _exit(ORQ_EXIT_DESCRIPTORS);
            close(sp[1]);
        }
        /* The share of new bodies as the zygote saw it when it forked. */
        orq_child(s, me, ruleset_fd, bpf, fsize, orq_hot.new_score * 2 >= ORQ_NEW_SCORE_MAX);
        return s;
    }
    close(sp[1]);
    setpgid(pid, pid); /* as the child does: no window either way */
    int pidfd = pidfds ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
    if (pidfds && pidfd < 0) {
        close(sp[0]);
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return -1;
    }
    kids[*nkids].pid = pid;
    kids[*nkids].pidfd = pidfd;
    kids[*nkids].idle = 1;
    (*nkids)++;
    (*nidle)++;
    char msg[64];
    int len = snprintf(msg, sizeof(msg), "{\"t\":\"idle\",\"pid\":%d}", (int)pid);
    int fds[2] = {sp[0], pidfd};
    int rc = orq_send(ctl, msg, len, fds, pidfds ? 2 : 1);
    close(sp[0]);
    if (rc != 0)
        orq_shutdown(kids, *nkids);
    return 0;
}

/* Read one control message: "took" marks a child as no longer idle, "warm"
 * goes to the Python callable warm (bytes -> ignored); EOF or an error
 * shuts down. */
static void orq_control(int ctl, struct orq_kid *kids, int *nkids, int *nidle, PyObject *warm)
{
    static char buf[ORQ_CONTROL_MAX + 1];
    struct iovec iov;
    union orq_cmsg u;
    struct msghdr mh = orq_msghdr(&iov, buf, ORQ_CONTROL_MAX, &u, sizeof(u.buf));
    ssize_t n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) { /* none expected */
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int *fds = (int *)CMSG_DATA(c);
            for (int i = 0; i < k; i++)
                close(fds[i]);
        }
    }
    if (n <= 0)
        orq_shutdown(kids, *nkids);
    buf[n] = 0;
    static const char warm_prefix[] = "{\"t\":\"warm\"";
    if (strncmp(buf, warm_prefix, sizeof(warm_prefix) - 1) == 0) {
        if (warm != NULL && warm != Py_None && !(mh.msg_flags & MSG_TRUNC)) {
            PyObject *msg = PyBytes_FromStringAndSize(buf, (Py_ssize_t)n);
            PyObject *r = msg != NULL ? PyObject_CallOneArg(warm, msg) : NULL;
            if (r == NULL)
                PyErr_Clear(); /* best effort: a child checks anyway */
            Py_XDECREF(r);
            Py_XDECREF(msg);
        }
        return;
    }
    /* Anything else must be exactly the kill or the took message Go
     * writes. */
    int pid = 0, isnew = 0, end = 0;
    if (sscanf(buf, ORQ_KILL_FORMAT "%n", &pid, &end) == 1 && end == (int)n && pid > 0) {
        /* Only a child not reaped yet (in the table): neither its pid nor
         * its process group's can have been reused. */
        for (int i = 0; i < *nkids; i++) {
            if (kids[i].pid == (pid_t)pid) {
                kill(-(pid_t)pid, SIGKILL);
                kill((pid_t)pid, SIGKILL);
                return;
            }
        }
        return;
    }
    end = 0;
    if (sscanf(buf, ORQ_TOOK_FORMAT "%n", &pid, &isnew, &end) != 2 || end != (int)n || pid <= 0)
        return;
    /* A moving share of new bodies (a quarter of the way to this one's):
     * three warm executions in a row after only new ones bring it below
     * half, three new ones after only warm ones above. */
    orq_hot.new_score += ((isnew ? ORQ_NEW_SCORE_MAX : 0) - orq_hot.new_score) / 4;
    for (int i = 0; i < *nkids; i++) {
        if (kids[i].pid == (pid_t)pid && kids[i].idle) {
            kids[i].idle = 0;
            (*nidle)--;
            return;
        }
    }
}

/* Report the exit of kids[i], reaped with status and ru, and drop it. */
static void orq_report(int ctl, struct orq_kid *kids, int *nkids, int *nidle, int i, int status,
                       const struct rusage *r)
{
    struct rusage ru = *r;
    if (kids[i].pidfd >= 0)
        close(kids[i].pidfd);
    if (kids[i].idle)
        (*nidle)--;
    char msg[160];
    int len = snprintf(msg, sizeof(msg),
                       "{\"t\":\"exit\",\"pid\":%d,\"status\":%d,\"utime\":%ld.%06ld,\"stime\":%ld.%06ld}",
                       (int)kids[i].pid, status, (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec,
                       (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec);
    kids[i] = kids[*nkids - 1];
    (*nkids)--;
    if (orq_send(ctl, msg, len, NULL, 0) != 0)
        orq_shutdown(kids, *nkids);
}

/* Reap kids[i] (its pidfd is readable) and report its exit. */
static void orq_reap(int ctl, struct orq_kid *kids, int *nkids, int *nidle, int i)
{
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    while (wait4(kids[i].pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    orq_report(ctl, kids, nkids, nidle, i, status, &ru);
}

/* Without pidfds, after SIGCHLD: drain the self-pipe (rd), then reap and
 * report every child that has exited. The handler writes after the exit,
 * so an exit after the last wait4 leaves a byte for the next poll. */
static void orq_reap_any(int ctl, int rd, struct orq_kid *kids, int *nkids, int *nidle)
{
    char sink[64];
    while (read(rd, sink, sizeof(sink)) > 0)
        ;
    for (;;) {
        int status = 0;
        struct rusage ru;
        memset(&ru, 0, sizeof(ru));
        pid_t pid = wait4(-1, &status, WNOHANG, &ru);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        for (int i = 0; i < *nkids; i++) {
            if (kids[i].pid == pid) {
                orq_report(ctl, kids, nkids, nidle, i, status, &ru);
                break;
            }
        }
    }
}

/* Set up the SIGCHLD self-pipe of a loop without pidfds; returns its read
 * end, -1 with errno set on failure. */
static int orq_sigchld_pipe(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    orq_sigchld_w = p[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = orq_on_sigchld;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGCHLD, &sa, NULL) != 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        orq_sigchld_w = -1;
        errno = e;
        return -1;
    }
    return p[0];
}

/* The zygote's loop: keep `pool` children pre-forked, reap and report
 * every exit. ruleset_fd is the Landlock ruleset each child restricts
 * itself with (-1: none), bpf the struct sock_fprog of the child seccomp
 * filter (NULL: none), fsize each child's RLIMIT_FSIZE (0: it writes no
 * file; a workspace's per-file cap otherwise), pidfds whether to keep the
 * children by pidfd (0: by pid, where pidfd_open is ENOSYS), warm the
 * Python callable
 * for warm messages (NULL or
 * None: ignore them), serve the Python callable a new child calls, sealed
 * and holding fd 0-3, to run its execution (it never returns; NULL or
 * None: return to the caller instead). Returns the child's socket in a new
 * child (without serve); -1 with errno set if the zygote cannot serve at
 * all. */
int orq_zygote_loop(int ctl, int pool, int ruleset_fd, const void *bpf, long long fsize, int pidfds, PyObject *warm,
                    PyObject *serve)
{
    static struct orq_kid kids[ORQ_MAX_KIDS];
    static struct pollfd pfds[ORQ_MAX_KIDS + 1];
    int nkids = 0, nidle = 0;
    pid_t me = getpid();
    int sigchld_r = -1;
    if (!pidfds && (sigchld_r = orq_sigchld_pipe()) < 0)
        return -1;
    if (pool < 1)
        pool = 1;
    if (pool > 8)
        pool = 8;
    for (;;) {
        while (nidle < pool) {
            /* Messages first (an exit to report, a take): refilling the
             * pool waits while one is pending and a child is ready. */
            if (nidle > 0) {
                struct pollfd q = {ctl, POLLIN, 0};
                if (poll(&q, 1, 0) > 0)
                    break;
            }
            int s = orq_spawn(ctl, me, ruleset_fd, bpf, fsize < 0 ? 0 : fsize, pidfds, kids, &nkids, &nidle);
            if (s > 0) { /* the new child */
                if (serve == NULL || serve == Py_None)
                    return s;
                /* Straight into the execution: no return through ctypes
                 * and the zygote's Python frame (~90 page faults). serve
                 * ends the process; should it return, exit here. */
                PyObject *r = PyObject_CallNoArgs(serve);
                if (r == NULL)
                    PyErr_Print();
                _exit(ORQ_EXIT_CANNOT_SERVE);
            }
            if (s < 0) {
                fprintf(stderr, "orqest fork-server: pre-fork failed: %s\n", strerror(errno));
                break;
            }
        }
        pfds[0].fd = ctl;
        pfds[0].events = POLLIN;
        pfds[0].revents = 0;
        /* The children's pidfds, or the SIGCHLD self-pipe. */
        int nk = pidfds ? nkids : 0;
        for (int i = 0; i < nk; i++) {
            pfds[i + 1].fd = kids[i].pidfd;
            pfds[i + 1].events = POLLIN;
            pfds[i + 1].revents = 0;
        }
        nfds_t nfds = (nfds_t)nk + 1;
        if (!pidfds) {
            pfds[1].fd = sigchld_r;
            pfds[1].events = POLLIN;
            pfds[1].revents = 0;
            nfds = 2;
        }
        if (poll(pfds, nfds, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (!pidfds && pfds[1].revents != 0)
            orq_reap_any(ctl, sigchld_r, kids, &nkids, &nidle);
        /* Exits first, from the highest index (orq_reap moves the last
         * entry into the reaped one's slot). */
        for (int i = nk - 1; i >= 0; i--)
            if (pfds[i + 1].revents != 0)
                orq_reap(ctl, kids, &nkids, &nidle, i);
        if (pfds[0].revents != 0)
            orq_control(ctl, kids, &nkids, &nidle, warm);
    }
}
