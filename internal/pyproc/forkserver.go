package pyproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// forkServerStartTimeout bounds how long a zygote may take to import, seal
// itself and say "ready".
const forkServerStartTimeout = 15 * time.Second

// forkServerPreparedTimeout replaces it for a zygote that imports modules
// first (runner.ForkServerConfig.Prepare: seconds for pandas, far more on
// a loaded machine).
const forkServerPreparedTimeout = 2 * time.Minute

// ForkServerOptions configures StartForkServer.
type ForkServerOptions struct {
	// Logger receives debug and warning messages (nil: none).
	Logger Logger
	// Stderr receives the zygote's (and its children's pre-execution)
	// stderr; nil discards it.
	Stderr io.Writer
	// Dir is the zygote's working directory, which its children inherit
	// ("" means "/").
	Dir string
	// Core is forkcore.c built as a shared object (nil: none). The zygote
	// gets it as a sealed memfd and runs its fork loop in C; if it cannot
	// load it, it loops in Python and says why (CoreError).
	Core []byte
	// NoWarm: never ask the zygote to warm a body (Run's warm message).
	NoWarm bool
	// Env is the zygote's (and its children's) environment (nil: empty). -I makes Python
	// ignore PYTHON* variables whatever it holds.
	Env []string
	// NoPidfds makes the zygote keep its children by pid even where the
	// kernel has pidfds, as it does where pidfd_open is ENOSYS (gVisor's
	// Sentry): the way that path is tested on any host. Only Go code sets
	// it; no request or config block reaches it.
	NoPidfds bool
}

// zygoteConfig is what the zygote reads on its stdin: the caller's
// runner.ForkServerConfig and this package's own switches.
type zygoteConfig struct {
	runner.ForkServerConfig
	NoPidfds bool `json:"no_pidfds,omitempty"`
}

// ForkServer is one running zygote (python3 -c <Program()> forkserver) and
// the Go end of its control socket. It is safe for concurrent use.
//
// The zygote keeps a pool of pre-forked children that warm up and seal
// themselves while idle, and hands each one's control socket and a pidfd
// to Go as soon as it exists ({"t":"idle"}, SCM_RIGHTS; where pidfds do
// not exist, the socket only: see runner.KillFormat). Run takes a ready
// child, sends it the child's ends of four pipes (stdin, stdout, stderr,
// response) directly, and tells the zygote to refill ({"t":"took"}); the
// child takes them as fd 0-3 and runs the request it reads from fd 0, so Go
// reads its stdout, stderr and response directly. The wall clock kills
// through the pidfd (race-free), or, without pidfds, through the zygote (a
// kill message: it signals only a child it has not reaped, which is
// race-free too); the zygote reaps every child and reports
// {"t":"exit"} with its wait status and CPU time. When Run returns, the
// child is SIGKILLed or gone: it never runs again, and it is reaped soon
// after (a child without a usable response is reaped before Run returns).
type ForkServer struct {
	logger Logger
	cmd    *exec.Cmd
	conn   *net.UnixConn
	pid    int
	layers []string
	miss   map[string]string
	core   bool   // the zygote runs forkcore's C loop
	coreEr string // why it does not, when a core was offered
	hot    int    // pages each idle child copies ahead (fsMsg.HotPages)
	hotNew int    // pages copied on top while most bodies are new (fsMsg.HotPagesNew)
	noFork bool   // seccomp in force: children cannot fork
	noWarm bool   // ForkServerOptions.NoWarm
	pidfds bool   // the zygote hands over a pidfd with each child

	wmu sync.Mutex // serialises sends

	warmMu    sync.Mutex
	warmed    map[string]bool // body+allowlist keys seen once (false) or warmed (true)
	envWarmed map[string]bool // allowlist keys whose environment the zygote prepared
	warmFO    []string        // the same keys, oldest first

	idle chan *fsChild // ready children, oldest first

	mu   sync.Mutex
	kids map[int]*fsChild // by pid, until their exit is reported
	err  error            // why the zygote is gone; set before done is closed
	done chan struct{}    // closed when the control socket failed (zygote gone)

	waited chan struct{} // closed when the zygote process was reaped

	runMu    sync.Mutex
	inflight int  // Runs in progress
	draining bool // Drain was called: close when inflight reaches 0
}

// fsChild is one pre-forked child the zygote handed over.
type fsChild struct {
	pid    int
	sock   int         // its control socket: the execution's descriptors go here
	pidfd  int         // -1 from a zygote without pidfds
	exited chan fsExit // the zygote's report (buffered)
}

func (c *fsChild) closeFDs() {
	if c.sock >= 0 {
		unix.Close(c.sock)
		c.sock = -1
	}
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
		c.pidfd = -1
	}
}

type fsExit struct {
	status syscall.WaitStatus
	cpu    time.Duration
}

// fsMsg is one control message from the zygote.
type fsMsg struct {
	T       string            `json:"t"`
	ID      uint64            `json:"id"`
	PID     int               `json:"pid"`
	Status  int               `json:"status"`
	UTime   float64           `json:"utime"`
	STime   float64           `json:"stime"`
	Error   string            `json:"error"`
	Layers  []string          `json:"layers"`
	Missing map[string]string `json:"missing"`
	Core    bool              `json:"core"`
	CoreErr string            `json:"core_error"`
	// HotPages is how many pages each idle child of the C loop copies
	// ahead of its execution (runner.ForkServerConfig.NoHotPages).
	HotPages int `json:"hot_pages"`
	// HotPagesNew is how many pages a body new to the zygote writes on
	// top of those; the C loop's children copy them too while most recent
	// executions had a new body (the took messages say which).
	HotPagesNew int `json:"hot_pages_new"`
	// PIDFDs says the zygote keeps its children by pidfd and hands one
	// over with each; false: by pid (pidfd_open is ENOSYS there, or
	// ForkServerOptions.NoPidfds), and Go kills through the zygote.
	PIDFDs bool `json:"pidfds"`
}

// StartForkServer launches a zygote with argv (runner.ForkServerArgv, or
// an equivalent) and waits until it is ready: imported, sealed and serving.
func StartForkServer(argv []string, cfg runner.ForkServerConfig, opts ForkServerOptions) (*ForkServer, error) {
	logger := orNop(opts.Logger)
	python := argv[0]
	extra := []*os.File{nil} // fd 3: the control socket, below
	if len(opts.Core) > 0 {
		core, err := sealedMemfd("orqest-forkcore", opts.Core)
		if err != nil {
			return nil, fmt.Errorf("fork-server: core: %w: %w", err, shared.ErrInternal)
		}
		defer core.Close()
		extra = append(extra, core) // fd 4
		cfg.CoreFD = 4
	}
	cfgJSON, err := json.Marshal(zygoteConfig{ForkServerConfig: cfg, NoPidfds: opts.NoPidfds})
	if err != nil {
		return nil, err
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("fork-server: socketpair: %w: %w", err, shared.ErrInternal)
	}
	goEnd := os.NewFile(uintptr(sp[0]), "forkserver-ctl")
	zEnd := os.NewFile(uintptr(sp[1]), "forkserver-ctl-child")
	defer zEnd.Close()
	extra[0] = zEnd
	c, err := net.FileConn(goEnd)
	goEnd.Close()
	if err != nil {
		return nil, fmt.Errorf("fork-server: control socket: %w: %w", err, shared.ErrInternal)
	}
	conn := c.(*net.UnixConn)

	dir := opts.Dir
	if dir == "" {
		dir = "/"
	}
	cmd := &exec.Cmd{
		Path:       python,
		Args:       argv,
		Env:        envOf(opts.Env), // -I ignores PYTHON*
		Dir:        dir,
		Stdin:      bytes.NewReader(cfgJSON),
		Stderr:     opts.Stderr,
		ExtraFiles: extra, // fd 3: control socket; fd 4: the core, if any
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // one kill reaches the zygote
			Pdeathsig: syscall.SIGKILL, // dies with its parent
		},
	}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("fork-server: start %s: %w: %w", python, err, shared.ErrUnavailable)
	}
	zEnd.Close()
	fs := &ForkServer{
		logger: logger, cmd: cmd, conn: conn, pid: cmd.Process.Pid, noWarm: opts.NoWarm,
		idle: make(chan *fsChild, 16), kids: map[int]*fsChild{}, warmed: map[string]bool{}, envWarmed: map[string]bool{},
		done: make(chan struct{}), waited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(fs.waited)
	}()

	// The first message is "ready" (or "fatal").
	start := forkServerStartTimeout
	if len(cfg.Prepare) > 0 {
		start = forkServerPreparedTimeout
	}
	_ = conn.SetReadDeadline(time.Now().Add(start))
	buf := make([]byte, 64<<10)
	n, _, _, _, err := conn.ReadMsgUnix(buf, nil)
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil || n == 0 {
		fs.Kill()
		return nil, fmt.Errorf("fork-server: no ready message from %s (%v): %w", python, err, shared.ErrUnavailable)
	}
	m, err := readyMessage(buf[:n], python)
	if err != nil {
		fs.Kill()
		return nil, err
	}
	fs.layers, fs.miss = m.Layers, m.Missing
	fs.core, fs.coreEr, fs.hot, fs.hotNew, fs.pidfds = m.Core, m.CoreErr, m.HotPages, m.HotPagesNew, m.PIDFDs
	fs.noFork = slices.Contains(m.Layers, runner.LayerSeccomp)
	go fs.read()
	logger.Debug("fork-server ready", "pid", fs.pid, "layers", m.Layers, "c_loop", m.Core, "hot_pages", m.HotPages, "hot_pages_new", m.HotPagesNew, "pidfds", m.PIDFDs)
	return fs, nil
}

// readyMessage parses the zygote's first control message, b: "ready", or
// "fatal" with why python could not start serving.
func readyMessage(b []byte, python string) (fsMsg, error) {
	var m fsMsg
	switch {
	case json.Unmarshal(b, &m) != nil:
		return m, fmt.Errorf("fork-server: malformed ready message %q: %w", b, shared.ErrInternal)
	case m.T == runner.MsgFatal:
		return m, fmt.Errorf("fork-server: %s failed to start: %s: %w", python, m.Error, shared.ErrUnavailable)
	case m.T != runner.MsgReady:
		return m, fmt.Errorf("fork-server: unexpected first message %q: %w", b, shared.ErrInternal)
	}
	return m, nil
}

// PID is the zygote's process id.
func (fs *ForkServer) PID() int { return fs.pid }

// Layers lists the sealing layers the zygote put in force (every child
// requires them).
func (fs *ForkServer) Layers() []string { return fs.layers }

// Missing names the layers not in force, with the reason.
func (fs *ForkServer) Missing() map[string]string { return fs.miss }

// Core reports whether the zygote runs forkcore's C loop and, if a core
// was offered and not used, why.
func (fs *ForkServer) Core() (bool, string) { return fs.core, fs.coreEr }

// PIDFDs reports whether the zygote keeps its children by pidfd (false:
// by pid, where the kernel has no pidfds; kills go through the zygote).
func (fs *ForkServer) PIDFDs() bool { return fs.pidfds }

// HotPages is how many of the zygote's pages each idle child copies ahead
// of its execution (0: none; see runner.ForkServerConfig.NoHotPages).
func (fs *ForkServer) HotPages() int { return fs.hot }

// HotPagesNew is how many more pages an idle child copies ahead while most
// recent executions had a body new to the zygote (one it parses, checks
// and compiles): the pages that way writes on top of HotPages.
func (fs *ForkServer) HotPagesNew() int { return fs.hotNew }

// sealedMemfd returns a read-only-forever memfd holding data: what the
// zygote loads is exactly what the caller checked, whatever happens to the
// file it came from.
func sealedMemfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Alive reports whether the zygote is still serving.
func (fs *ForkServer) Alive() bool {
	select {
	case <-fs.done:
		return false
	default:
		return true
	}
}

// fail records why the zygote is gone and wakes every caller.
func (fs *ForkServer) fail(err error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.err == nil {
		fs.err = err
		close(fs.done)
	}
	for {
		select {
		case c := <-fs.idle:
			c.closeFDs() // EOF on its socket: an idle child exits
		default:
			return
		}
	}
}

// read dispatches control messages until the socket fails.
func (fs *ForkServer) read() {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*8))
	for {
		n, oobn, _, _, err := fs.conn.ReadMsgUnix(buf, oob)
		fds := parseRights(oob[:oobn])
		if err != nil || (n == 0 && oobn == 0) {
			closeFDs(fds)
			if err == nil {
				err = errors.New("control socket closed")
			}
			fs.fail(fmt.Errorf("fork-server (pid %d) is gone: %v", fs.pid, err))
			return
		}
		fs.handle(buf[:n], fds)
	}
}

// handle dispatches the control message b, which came with the
// descriptors fds: an idle child's go to it (its socket and pidfd, or its
// socket only from a zygote without pidfds), any other message's are
// closed.
func (fs *ForkServer) handle(b []byte, fds []int) {
	var m fsMsg
	if err := json.Unmarshal(b, &m); err != nil {
		closeFDs(fds)
		fs.logger.Warn("fork-server: malformed control message", "error", err)
		return
	}
	switch m.T {
	case runner.MsgIdle:
		want := 1
		if fs.pidfds {
			want = 2
		}
		if len(fds) != want || m.PID <= 1 {
			closeFDs(fds)
			fs.logger.Warn("fork-server: idle child without its socket and pidfd", "pid", m.PID, "descriptors", len(fds))
			return
		}
		c := &fsChild{pid: m.PID, sock: fds[0], pidfd: -1, exited: make(chan fsExit, 1)}
		if fs.pidfds {
			c.pidfd = fds[1]
		}
		fs.mu.Lock()
		fs.kids[c.pid] = c
		fs.mu.Unlock()
		select {
		case fs.idle <- c:
		default: // more than the pool can hold: let it go
			c.closeFDs()
		}
	case runner.MsgExit:
		closeFDs(fds)
		fs.mu.Lock()
		c := fs.kids[m.PID]
		delete(fs.kids, m.PID)
		fs.mu.Unlock()
		if c != nil {
			cpu := time.Duration((m.UTime + m.STime) * float64(time.Second))
			c.exited <- fsExit{status: syscall.WaitStatus(m.Status), cpu: cpu}
		}
	default:
		closeFDs(fds)
	}
}

// take returns a ready child, its socket still open. It skips children
// that died while idle.
func (fs *ForkServer) take(ctx context.Context) (*fsChild, error) {
	for {
		if !fs.Alive() {
			// Checked first: an idle child of a dead zygote is dying too
			// (PDEATHSIG), and a request sent to it may be lost midway.
			return nil, fs.notSent()
		}
		var c *fsChild
		select {
		case c = <-fs.idle:
		case <-fs.done:
			return nil, fs.notSent()
		case <-ctx.Done():
			return nil, fmt.Errorf("execute: %w", ctx.Err())
		}
		select {
		case <-c.exited: // died idle (reaped and reported)
			c.closeFDs()
			continue
		default:
		}
		if !fs.Alive() {
			c.closeFDs()
			return nil, fs.notSent()
		}
		return c, nil
	}
}

// takeWithin is take bounded by job's wall clock when it counts from the
// call's start (Job.Started): a call whose clock runs out before a ready
// child comes returns nil and no error (the caller's result is
// job.TimedOut()).
func (fs *ForkServer) takeWithin(ctx context.Context, job *Job) (*fsChild, error) {
	if job.Started.IsZero() {
		return fs.take(ctx)
	}
	tctx, cancel := context.WithDeadline(ctx, job.Started.Add(job.Limits.Timeout))
	defer cancel()
	c, err := fs.take(tctx)
	if err != nil && ctx.Err() == nil && tctx.Err() != nil {
		return nil, nil
	}
	return c, err
}

// notSent is the error of a call that found the zygote gone before its
// request reached a child: it wraps shared.ErrNotRun as well as Err's
// ErrUnavailable, so the pool runs it on a new zygote (nothing of it ran).
func (fs *ForkServer) notSent() error {
	return fmt.Errorf("%w: %w", fs.Err(), shared.ErrNotRun)
}

// took tells the zygote that c was taken, so it forks a replacement, and
// whether c's body is new to the zygote (see runner.TookFormat).
func (fs *ForkServer) took(c *fsChild, isNew bool) error {
	n := 0
	if isNew {
		n = 1
	}
	msg := fmt.Appendf(nil, runner.TookFormat, c.pid, n)
	fs.wmu.Lock()
	_, err := fs.conn.Write(msg)
	fs.wmu.Unlock()
	if err != nil {
		fs.fail(fmt.Errorf("fork-server (pid %d): send: %v", fs.pid, err))
	}
	return err
}

// kill SIGKILLs child c: through its pidfd, or, from a zygote without
// pidfds, through the zygote, which signals it (and its process group) only
// if it has not reaped it yet. Best effort: a zygote that is gone took its
// children with it (PDEATHSIG).
func (fs *ForkServer) kill(c *fsChild) {
	if c.pidfd >= 0 {
		_ = unix.PidfdSendSignal(c.pidfd, unix.SIGKILL, nil, 0)
		return
	}
	msg := fmt.Appendf(nil, runner.KillFormat, c.pid)
	fs.wmu.Lock()
	_, err := fs.conn.Write(msg)
	fs.wmu.Unlock()
	if err != nil {
		fs.fail(fmt.Errorf("fork-server (pid %d): send: %v", fs.pid, err))
	}
}

// warmMax is how many bodies Go remembers having seen or warmed; below
// the runner's 128 (_orq_accepted_max), so the zygote never drops a body Go
// still counts as warm (its own warm-up body takes one entry).
const warmMax = 96

// warm asks the zygote to prepare for bodies like one a child just
// accepted (it runs nothing of them), so the children it forks from then on
// do less:
//
//   - the first time an allowlist (with the classes switch) is accepted, the
//     zygote prepares its environment: the curated builtins, the import
//     shim, and the allowed modules imported. A new body under that
//     allowlist then imports nothing in its child. No body is sent: this
//     holds nothing of any caller's code, so it happens with NoWarm too.
//   - the second time a body (with the same allowlist) was accepted, once,
//     the zygote checks and compiles it: a one-off body costs the zygote
//     nothing, a tool body called again is warm from then on.
//
// Best effort: a child that does not find the body warm checks and
// compiles it itself, as before.
func (fs *ForkServer) warm(k warmKey, code string, classes bool) {
	allowed, envKey := k.allowed, k.env
	fs.warmMu.Lock()
	envDone := fs.envWarmed[envKey]
	if !envDone && len(fs.envWarmed) < envWarmMax {
		fs.envWarmed[envKey] = true
	}
	fs.warmMu.Unlock()
	if !envDone {
		fs.sendWarm("", allowed, classes)
	}

	if fs.noWarm || k.body == "" {
		return
	}
	fs.warmMu.Lock()
	done, seen := fs.warmed[k.body]
	switch {
	case done:
		fs.warmMu.Unlock()
		return
	case seen:
		fs.warmed[k.body] = true
		fs.warmMu.Unlock()
	default:
		if len(fs.warmFO) >= warmMax {
			delete(fs.warmed, fs.warmFO[0])
			fs.warmFO = fs.warmFO[1:]
		}
		fs.warmed[k.body] = false
		fs.warmFO = append(fs.warmFO, k.body)
		fs.warmMu.Unlock()
		return
	}
	fs.sendWarm(code, allowed, classes)
}

// warmKey names a body and its allowlist for warm: allowed is the
// allowlist sorted and without duplicates, env the allowlist's key (with
// the classes switch), body env with the code ("" when the body is never
// warmed: NoWarm, or longer than runner.WarmMaxBytes).
type warmKey struct {
	allowed   []string
	env, body string
}

// warmKeyOf returns the warmKey of a body under an allowlist.
func (fs *ForkServer) warmKeyOf(code string, allowed []string, classes bool) warmKey {
	allowed = slices.Clone(allowed)
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	var key strings.Builder
	key.Grow(len(code) + 16*len(allowed) + 2)
	for _, m := range allowed {
		key.WriteString(m)
		key.WriteByte(0)
	}
	key.WriteByte(0)
	if classes {
		key.WriteByte('c')
	}
	key.WriteByte(0)
	k := warmKey{allowed: allowed, env: key.String()}
	if !fs.noWarm && len(code) <= runner.WarmMaxBytes {
		key.WriteString(code)
		k.body = key.String()
	}
	return k
}

// isWarm reports whether the zygote was asked to warm the body k names:
// a child forked since then finds it checked and compiled.
func (fs *ForkServer) isWarm(k warmKey) bool {
	if k.body == "" {
		return false
	}
	fs.warmMu.Lock()
	defer fs.warmMu.Unlock()
	return fs.warmed[k.body]
}

// envWarmMax bounds the allowlists a zygote prepares an environment for
// (the runner keeps at most _orq_envs_max of them).
const envWarmMax = 16

// sendWarm sends the zygote a warm message: code "" prepares the
// allowlist's environment only.
func (fs *ForkServer) sendWarm(code string, allowed []string, classes bool) {
	msg, err := json.Marshal(struct {
		T       string   `json:"t"`
		Code    string   `json:"code"`
		Allowed []string `json:"allowed_imports"`
		Classes bool     `json:"classes,omitempty"`
	}{runner.MsgWarm, code, allowed, classes})
	if err != nil || len(msg) > runner.ControlMax {
		return
	}
	fs.wmu.Lock()
	_, err = fs.conn.Write(msg)
	fs.wmu.Unlock()
	if err != nil {
		fs.fail(fmt.Errorf("fork-server (pid %d): send: %v", fs.pid, err))
	}
}

// warmable reports whether a result says the child's checker accepted and
// compiled the body (it ran, or its result was judged).
func warmable(res shared.ExecutionResult) bool {
	switch res.ErrorKind {
	case shared.KindNone, shared.KindRuntime, shared.KindMemory, shared.KindTimeout,
		shared.KindNotSerializable, shared.KindOutputLimit:
		return true
	}
	return false
}

// Idle is how many ready children Go holds right now.
func (fs *ForkServer) Idle() int { return len(fs.idle) }

// Err is the error a caller returns when the zygote died under it.
func (fs *ForkServer) Err() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fmt.Errorf("execute: %v: %w", fs.err, shared.ErrUnavailable)
}

// Kill ends the zygote and its children now and reaps the zygote.
func (fs *ForkServer) Kill() {
	fs.conn.Close()
	select {
	case <-fs.waited:
	default:
		_ = syscall.Kill(-fs.pid, syscall.SIGKILL)
		<-fs.waited
	}
	fs.fail(errors.New("fork-server stopped"))
}

// acquire counts a Run in progress; it fails once Drain was called.
func (fs *ForkServer) acquire() bool {
	fs.runMu.Lock()
	defer fs.runMu.Unlock()
	if fs.draining {
		return false
	}
	fs.inflight++
	return true
}

// release ends a Run counted by acquire; the last one of a draining
// fork-server closes it.
func (fs *ForkServer) release() {
	fs.runMu.Lock()
	fs.inflight--
	last := fs.draining && fs.inflight == 0
	fs.runMu.Unlock()
	if last {
		go fs.Close()
	}
}

// Drain closes the fork-server once the Runs in progress have ended (at
// once when there are none) and refuses new ones: a Pool evicts a
// fork-server this way, so a call already running on it is not killed.
func (fs *ForkServer) Drain() {
	fs.runMu.Lock()
	already := fs.draining
	fs.draining = true
	idle := fs.inflight == 0
	fs.runMu.Unlock()
	if !already && idle {
		go fs.Close()
	}
}

// Close asks the zygote to stop (EOF on its control socket: it kills its
// children and exits), then makes sure of it.
func (fs *ForkServer) Close() {
	fs.conn.Close()
	select {
	case <-fs.waited:
	case <-time.After(2 * time.Second):
	}
	fs.Kill()
}

func parseRights(oob []byte) []int {
	if len(oob) == 0 {
		return nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// childPipe makes a pipe whose one end goes to the child (a blocking raw
// fd, closed by the caller once sent) and whose other end stays here (a
// non-blocking *os.File, so reads and writes use the poller).
func childPipe(childReads bool) (mine *os.File, theirs int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, err
	}
	m, t := p[0], p[1]
	if childReads {
		m, t = p[1], p[0]
	}
	if err := unix.SetNonblock(m, true); err != nil {
		unix.Close(m)
		unix.Close(t)
		return nil, -1, err
	}
	return os.NewFile(uintptr(m), "child-pipe"), t, nil
}

// callPipes are a call's four pipes for a child that gets its ends as
// SCM_RIGHTS (a fork-server child, a notebook): mine are ours (stdin's
// writer; stdout's, stderr's and the response's readers), theirs the
// child's, sent with rights().
type callPipes struct {
	mine   []*os.File
	theirs [4]int
}

func newCallPipes() (*callPipes, error) {
	p := &callPipes{theirs: [4]int{-1, -1, -1, -1}}
	for i := range p.theirs {
		f, fd, err := childPipe(i == 0)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("execute: pipes: %w: %w", err, shared.ErrInternal)
		}
		p.mine = append(p.mine, f)
		p.theirs[i] = fd
	}
	return p, nil
}

// rights is the SCM_RIGHTS message that hands the child its ends.
func (p *callPipes) rights() []byte { return unix.UnixRights(p.theirs[:]...) }

// sent closes the child's ends once they were sent (the kernel holds them
// in flight), so the pipes reach EOF when the child exits.
func (p *callPipes) sent() {
	for i, fd := range p.theirs {
		if fd >= 0 {
			unix.Close(fd)
		}
		p.theirs[i] = -1
	}
}

// close closes every end still open.
func (p *callPipes) close() {
	for _, f := range p.mine {
		f.Close()
	}
	p.sent()
}

// start starts the three readers into o (the response, then stdout and
// stderr, capped by job) and writes payload to the child's stdin:
// respDone is closed when the response reached EOF, pipesDone when all
// three did. The request normally fits the pipe and is written here,
// without a goroutine; what does not fit is written by one (the child
// reads it while the caller waits).
func (p *callPipes) start(job *Job, payload []byte, o *outcome) (respDone, pipesDone chan struct{}) {
	stdinW, stdoutR, stderrR, respR := p.mine[0], p.mine[1], p.mine[2], p.mine[3]
	respDone = make(chan struct{})
	pipesDone = make(chan struct{})
	go func() {
		defer close(pipesDone)
		stdoutC := make(chan captured, 1)
		stderrC := make(chan captured, 1)
		go capture(stdoutR, job.Limits.MaxOutputBytes, stdoutC, job.stream(shared.StreamStdout))
		go capture(stderrR, job.Limits.MaxOutputBytes, stderrC, job.stream(shared.StreamStderr))
		respC := make(chan captured, 1)
		capture(respR, job.Limits.MaxOutputBytes+MaxResponseSlack, respC, nil)
		o.resp = <-respC
		close(respDone)
		o.out, o.errOut = <-stdoutC, <-stderrC
	}()
	if n, err := writeNonblock(stdinW, payload); err != nil || n == len(payload) {
		stdinW.Close() // EPIPE if the child died: the caller classifies it
	} else {
		go func() {
			_, _ = stdinW.Write(payload[n:])
			stdinW.Close()
		}()
	}
	return respDone, pipesDone
}

// Run runs job in a child of the zygote and classifies the outcome like
// Spawn. When Run returns, the child has been sent SIGKILL through its
// pidfd after its usable response (it runs nothing any more; the zygote
// reaps it asynchronously) — without pidfds, the zygote has been asked to
// send it, which it does on its next turn — or, without a usable
// response, has been reaped by the zygote; a child that made itself a
// process group leader has its group killed until empty.
func (fs *ForkServer) Run(ctx context.Context, job Job) (shared.ExecutionResult, error) {
	if !fs.acquire() {
		return shared.ExecutionResult{}, fmt.Errorf("execute: fork-server (pid %d) is closing: %w: %w", fs.pid, shared.ErrUnavailable, shared.ErrNotRun)
	}
	defer fs.release()
	return fs.run(ctx, job)
}

// run is Run once acquire counted it.
func (fs *ForkServer) run(ctx context.Context, job Job) (shared.ExecutionResult, error) {
	var res shared.ExecutionResult
	req := job.request()
	req.Rules = runner.RulesFromServer
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("execute: %w", err)
	}

	pipes, err := newCallPipes()
	if err != nil {
		return res, err
	}
	defer pipes.close()
	wk := fs.warmKeyOf(req.Code, req.AllowedImports, req.Classes)

	// A ready child gets its limits and the descriptors straight from
	// here: "r <memory MB> <CPU seconds>" with SCM_RIGHTS.
	var c *fsChild
	var payload []byte
	oom := watchOOM()
	for {
		if c, err = fs.takeWithin(ctx, &job); err != nil {
			return res, err
		}
		if c == nil {
			return job.TimedOut(), nil
		}
		// A child of the C loop sets RLIMIT_AS and RLIMIT_CPU from this
		// message before it returns to Python (Python's resource module
		// would copy ~24 pages); a child of the Python loop sets them from
		// the request.
		req.LimitsApplied = fs.core
		if payload, err = req.Encode(); err != nil {
			c.closeFDs()
			return res, err
		}
		msg := fmt.Appendf(nil, runner.ExecFormat, req.MemoryMB, req.CPUSeconds)
		err = unix.Sendmsg(c.sock, msg, pipes.rights(), nil, unix.MSG_NOSIGNAL)
		unix.Close(c.sock)
		c.sock = -1
		if err == nil {
			break
		}
		c.closeFDs() // it died idle; the zygote reaps and reports it
	}
	pipes.sent()
	defer c.closeFDs()
	kill := func() { fs.kill(c) }
	timer := time.NewTimer(job.wallClock())
	defer timer.Stop()

	var o outcome
	respDone, pipesDone := pipes.start(&job, payload, &o)
	o.pid, o.oom = c.pid, oom
	if job.OnStart != nil {
		job.OnStart(c.pid, "")
	}
	_ = fs.took(c, !fs.isWarm(wk)) // a failure marks the zygote gone: handled below

	// The runner flushes the user's stdout and stderr, writes the response
	// and closes fds 0-3 before it exits, so every pipe reaches EOF before
	// the kernel tears the child's address space down (~1.3 ms for its
	// copied 17 MB). A call that ends with a usable response therefore
	// SIGKILLs the child through its pidfd (it can never run user code
	// again: it is exiting or has a fatal signal pending) and returns
	// without waiting for the teardown; the zygote reaps it and reports
	// asynchronously. A call whose child died without a usable response, or
	// was killed (wall clock, cancellation), waits for the zygote's report:
	// that child is reaped before Run returns, and the wait status
	// classifies the death.
	// Until the call leaves the fast path, the zygote's report (c.exited)
	// says the child is gone; the pidfd's own report (gone, below) is
	// watched only after.
	var ex fsExit
	var reported, exited bool
	respC := respDone
wait:
	for {
		select {
		case <-respC:
			respC = nil
			if !usable(o.resp) {
				continue wait // wait for the exit below
			}
			kill()
			if !fs.noFork {
				KillGroup(c.pid)
			}
			// Normally already at EOF (the runner closed them); if user code
			// kept a duplicate, they reach it when the killed child dies.
			drain(pipesDone, pipes.mine)
			res, err := conclude(ctx, fs.logger, &job, o)
			if err == nil && warmable(res) {
				fs.warm(wk, req.Code, req.Classes)
			}
			return res, err
		case ex = <-c.exited:
			reported = true
		case <-timer.C:
			o.timedOut = true
			kill()
		case <-ctx.Done():
			o.cancelled = true
			kill()
		case <-fs.done:
		}
		break
	}
	// From here on the child is reaped before Run returns, and so is the
	// waiter's duplicate pidfd closed. Without a pidfd only the zygote's
	// report says the child is gone (gone stays nil).
	var gone chan struct{}
	switch {
	case reported:
		gone = make(chan struct{})
		close(gone)
	case c.pidfd >= 0:
		gone = make(chan struct{})
		go waitPidfd(dupFD(c.pidfd), gone) // a duplicate: c.pidfd is closed on return
	}
	defer func() {
		if gone == nil {
			return
		}
		select {
		case <-gone:
		case <-time.After(time.Second):
		}
	}()
	if !reported && (o.timedOut || o.cancelled) {
		// Killed: wait until it is reaped (nothing hurries here).
		select {
		case ex = <-c.exited:
			reported = true
		case <-fs.done:
		}
	}
	if !reported && !exited {
		select {
		case ex = <-c.exited:
			reported = true
		case <-gone:
			exited = true
		case <-fs.done:
		}
	}
	if !reported && !exited {
		// The zygote is gone; so is the child (PDEATHSIG), but nobody
		// reported its exit: make sure, and fail the call.
		kill()
		stopReaders(pipes.mine)
		<-pipesDone
		return res, fs.Err()
	}
	// A child whose seccomp filter lets it fork (a layer not in force) may
	// have left descendants in its own process group: kill until empty.
	// (With seccomp in force it cannot fork: there is nothing to kill.)
	if !fs.noFork {
		KillGroup(c.pid)
	}

	// Collect the pipes; bounded in case something still holds them.
	drain(pipesDone, pipes.mine)
	if !reported && !o.timedOut && !o.cancelled && !usable(o.resp) {
		select {
		case ex = <-c.exited:
		case <-fs.done:
			return res, fs.Err()
		}
	}
	o.status, o.cpu = ex.status, ex.cpu
	return conclude(ctx, fs.logger, &job, o)
}

// writeNonblock writes what of p the pipe takes without blocking (f is
// non-blocking: EAGAIN ends it) and returns how much that was.
func writeNonblock(f *os.File, p []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var werr error
	cerr := rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			k, err := unix.Write(int(fd), p[n:])
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				if err != unix.EAGAIN {
					werr = err
				}
				return true
			}
			n += k
		}
		return true
	})
	if werr == nil {
		werr = cerr
	}
	return n, werr
}

// usable reports whether resp is a complete response conclude will use.
func usable(resp captured) bool {
	if resp.truncated || len(bytes.TrimSpace(resp.data)) == 0 {
		return false
	}
	r, err := runner.ParseResponse(resp.data)
	if errors.Is(err, runner.ErrProtocol) {
		return true // conclude reports it as the infrastructure error it is
	}
	return err == nil && r.ErrorKind != runner.KindInternal
}

// dupFD duplicates fd (close-on-exec); -1 if it cannot.
func dupFD(fd int) int {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return d
}

// waitPidfd closes gone once the process behind pidfd (a descriptor it
// owns and closes; -1: none) has exited.
func waitPidfd(fd int, gone chan<- struct{}) {
	defer close(gone)
	if fd < 0 {
		return // the exit report still comes
	}
	defer unix.Close(fd)
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(pfd, -1); err != unix.EINTR {
			return
		}
	}
}

// drain waits until the readers of the child's output pipes are done
// (pipesDone), at most DrainGrace, then stops them.
func drain(pipesDone <-chan struct{}, mine []*os.File) {
	select {
	case <-pipesDone:
		return
	default:
	}
	t := time.NewTimer(DrainGrace)
	defer t.Stop()
	select {
	case <-pipesDone:
	case <-t.C:
		stopReaders(mine)
		<-pipesDone
	}
}

// stopReaders closes our ends of the child's output pipes, which ends the
// capture goroutines reading them.
func stopReaders(mine []*os.File) {
	for _, f := range mine[1:] {
		f.Close()
	}
}
