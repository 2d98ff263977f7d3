package pyproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// ErrNotebookGone is returned by Notebook.Run when the interpreter had
// already ended (killed by an earlier call's limits, or closed) before the
// call was handed to it: nothing ran. Start a new Notebook.
var ErrNotebookGone = errors.New("the session's interpreter has ended")

// notebookReady bounds how long StartNotebook waits for the interpreter to
// seal itself and say it is ready; notebookPrepared when it imports
// modules first (NotebookOptions.Prepare: pandas alone takes seconds, and
// far longer on a loaded machine). The caller's context bounds both.
const (
	notebookReady    = 30 * time.Second
	notebookPrepared = 2 * time.Minute
)

// Notebook is a stateful session's interpreter: one spawned runner (op
// runner.OpSession), sealed once like a spawned one-shot runner, that runs
// call after call in the same globals. Each call gets its own four pipes
// (passed over a SOCK_SEQPACKET socket as a fork-server child gets its
// execution), its own limits (the soft RLIMIT_AS and the CPU time the call
// may add, set by the runner before it reads the request; the wall clock
// here) and its own capped stdout and stderr. A call that ends by its
// limits, or whose interpreter dies, kills the whole process group: its
// result says so (Run's lost) and the Notebook is done; a new one starts
// clean.
//
// Run serialises calls; Close may be called at any time, concurrently.
type Notebook struct {
	mu     sync.Mutex // one call at a time
	cmd    *exec.Cmd
	pid    int
	ctl    int           // our end of the control socket
	exited chan struct{} // closed once the interpreter exited (not yet reaped)
	log    Logger

	stopOnce sync.Once
	state    *os.ProcessState // after stop

	// libThreads are the interpreter's threads once it was ready (its main
	// thread and those the prepared modules' native libraries started
	// while they were imported, before any call): no call's.
	libThreads map[string]bool
}

// NotebookOptions configure StartNotebook.
type NotebookOptions struct {
	// Dir is the interpreter's working directory ("" is refused: a
	// session's interpreter works in its agent's directory).
	Dir string
	// Stderr receives what the interpreter writes before its first call
	// (a sealing warning, a crash at start); nil discards it.
	Stderr io.Writer
	Logger Logger
	// Env is the interpreter's environment (nil: empty). -I makes Python
	// ignore PYTHON* variables whatever it holds.
	Env []string
	// Prepare are modules the interpreter imports (under the session's
	// rules, as a call's allowlist would) before it says it is ready: the
	// first call that uses them finds them loaded. A thread one of them
	// starts while it is imported (a native library's pool) is the
	// library's, not a call's: it does not end the interpreter.
	Prepare []string
	// Core is forkcore.c built as a shared object (nil: none), handed to
	// the interpreter as fd 4 (a sealed memfd): its first call arms the
	// runner's audit hook in C, and it stays armed for the session's life,
	// between calls too. Without it the Python hook is armed per call.
	Core []byte
}

// StartNotebook spawns the interpreter argv (runner.Argv) with req (its
// Seal, Rules, Classes: the session's; Op is set to runner.OpSession) and
// waits until it has sealed itself and is ready for calls.
func StartNotebook(ctx context.Context, argv []string, req runner.Request, opts NotebookOptions) (*Notebook, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("notebook: no working directory: %w", shared.ErrInternal)
	}
	req.Op = runner.OpSession
	req.Code = ""
	req.AllowedImports = opts.Prepare
	var core *os.File
	if len(opts.Core) > 0 {
		f, err := sealedMemfd("orqest-forkcore", opts.Core)
		if err != nil {
			return nil, fmt.Errorf("notebook: core: %w: %w", err, shared.ErrInternal)
		}
		defer f.Close()
		core = f
		req.CoreFD = 4
	}
	payload, err := req.Encode()
	if err != nil {
		return nil, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("notebook: socketpair: %w: %w", err, shared.ErrInternal)
	}
	theirs := os.NewFile(uintptr(pair[1]), "notebook-ctl")
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		unix.Close(pair[0])
		return nil, fmt.Errorf("notebook: pipe: %w: %w", err, shared.ErrInternal)
	}
	defer stdinR.Close()
	stderr := opts.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	cmd := &exec.Cmd{
		Path:       argv[0],
		Args:       argv,
		Env:        envOf(opts.Env),
		Dir:        opts.Dir,
		Stdin:      stdinR,
		Stderr:     stderr,
		ExtraFiles: []*os.File{theirs, core}, // fd 3, fd 4 (or none)
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
		WaitDelay: time.Second, // the stderr copy ends even if a descendant holds it
	}
	err = cmd.Start()
	theirs.Close() // the interpreter's now: its death is end-of-file here
	if err != nil {
		unix.Close(pair[0])
		stdinW.Close()
		return nil, fmt.Errorf("notebook: start %s: %w: %w", argv[0], err, shared.ErrUnavailable)
	}
	n := &Notebook{cmd: cmd, pid: cmd.Process.Pid, ctl: pair[0], exited: make(chan struct{}), log: orNop(opts.Logger)}
	go func() {
		defer close(n.exited)
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, n.pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
	}()
	// No core dumps; the call limits are set per call by the runner.
	if err := unix.Prlimit(n.pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil); err != nil {
		n.stop()
		stdinW.Close()
		return nil, fmt.Errorf("notebook: RLIMIT_CORE: %w: %w", err, shared.ErrInternal)
	}
	go func() {
		_, _ = stdinW.Write(payload)
		stdinW.Close()
	}()

	type packet struct {
		data []byte
		err  error
	}
	ready := make(chan packet, 1)
	go func() {
		buf := make([]byte, 64<<10)
		k, _, _, _, err := unix.Recvmsg(n.ctl, buf, nil, 0)
		for err == unix.EINTR { // the Go runtime's signals (preemption) interrupt a raw recvmsg
			k, _, _, _, err = unix.Recvmsg(n.ctl, buf, nil, 0)
		}
		if k < 0 {
			k = 0
		}
		ready <- packet{buf[:k], err}
	}()
	bound := notebookReady
	if len(opts.Prepare) > 0 {
		bound = notebookPrepared
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	var p packet
	select {
	case p = <-ready:
	case <-timer.C:
		n.stop()
		return nil, fmt.Errorf("notebook: the interpreter was not ready after %v: %w", bound, shared.ErrUnavailable)
	case <-ctx.Done():
		n.stop()
		return nil, fmt.Errorf("notebook: %w", ctx.Err())
	}
	var r struct {
		runner.Response
		// PythonThreads counts the Python threads (thread module) the
		// prepared modules left running: not a native library's own.
		PythonThreads int `json:"python_threads"`
	}
	if p.err != nil || len(p.data) == 0 || json.Unmarshal(p.data, &r) != nil || !r.Success {
		n.stop()
		why := r.Error
		if why == "" {
			why = fmt.Sprintf("no ready message (%v); %s", p.err, n.state)
		}
		return nil, fmt.Errorf("notebook: the interpreter could not start: %s: %w", why, shared.ErrUnavailable)
	}
	if n.libThreads = n.tasks(); n.libThreads == nil || r.PythonThreads > 0 {
		// Only the main thread: a Python thread a prepared module started
		// runs Python between calls, and ends the interpreter after the
		// first call as a call's would.
		n.libThreads = map[string]bool{strconv.Itoa(n.pid): true}
	}
	n.log.Debug("notebook started", "pid", n.pid, "library_threads", len(n.libThreads)-1)
	return n, nil
}

// PID returns the interpreter's pid (its process group id too).
func (n *Notebook) PID() int { return n.pid }

// Done is closed once the interpreter has exited.
func (n *Notebook) Done() <-chan struct{} { return n.exited }

// Alive reports whether the interpreter is still running.
func (n *Notebook) Alive() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// stop kills the interpreter's process group and reaps it (once).
func (n *Notebook) stop() {
	n.stopOnce.Do(func() {
		_ = syscall.Kill(-n.pid, syscall.SIGKILL)
		<-n.exited
		_ = n.cmd.Wait()
		KillGroup(n.pid)
		unix.Close(n.ctl)
		n.state = n.cmd.ProcessState
	})
}

// Close ends the session's interpreter and every process it started. The
// globals it held are gone.
func (n *Notebook) Close() {
	// End-of-file on its socket lets an idle interpreter exit by itself;
	// whatever is left is killed.
	_ = unix.Shutdown(n.ctl, unix.SHUT_RDWR)
	select {
	case <-n.exited:
	case <-time.After(100 * time.Millisecond):
	}
	n.stop()
}

// tasks returns the interpreter's threads (their ids), nil when they
// could not be read.
func (n *Notebook) tasks() map[string]bool {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", n.pid))
	if err != nil {
		return nil
	}
	ids := make(map[string]bool, len(ents))
	for _, e := range ents {
		ids[e.Name()] = true
	}
	return ids
}

// threadsLeft returns how many threads a call left running: the
// interpreter's threads that were not there when it became ready (its
// main thread and the prepared libraries' own, libThreads). A thread the
// call joined may take a moment to leave the kernel's list, so a count
// above 0 is read again for up to 100 ms. 0 too when the list could not be
// read.
func (n *Notebook) threadsLeft() int {
	deadline := time.Now().Add(100 * time.Millisecond)
	for {
		k := 0
		for id := range n.tasks() {
			if !n.libThreads[id] {
				k++
			}
		}
		if k == 0 || time.Now().After(deadline) {
			return k
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Run runs job in the interpreter's globals. lost reports that the
// interpreter ended during the call (its limits killed it, it crashed, or
// ctx was cancelled): the Notebook is done and the globals are gone. A Go
// error is an infrastructure failure (ErrNotebookGone: the interpreter had
// ended before the call, nothing ran).
func (n *Notebook) Run(ctx context.Context, job Job) (res shared.ExecutionResult, lost bool, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.Alive() {
		n.stop()
		return res, false, fmt.Errorf("execute: %w: %w", ErrNotebookGone, shared.ErrNotRun)
	}
	req := job.request()
	req.Rules = runner.RulesFromServer // the session's table, parsed once
	req.Seal = nil
	payload, err := req.Encode()
	if err != nil {
		return res, false, err
	}
	if err := ctx.Err(); err != nil {
		return res, false, fmt.Errorf("execute: %w", err)
	}
	pipes, err := newCallPipes()
	if err != nil {
		return res, false, err
	}
	defer pipes.close()
	msg := fmt.Appendf(nil, runner.ExecFormat, req.MemoryMB, req.CPUSeconds)
	oom := watchOOM()
	if err := unix.Sendmsg(n.ctl, msg, pipes.rights(), nil, unix.MSG_NOSIGNAL); err != nil {
		n.stop()
		return res, false, fmt.Errorf("execute: %w (%v): %w", ErrNotebookGone, err, shared.ErrNotRun)
	}
	pipes.sent()
	if job.OnStart != nil {
		job.OnStart(n.pid, "")
	}

	var o outcome
	o.pid, o.oom = n.pid, oom
	respDone, pipesDone := pipes.start(&job, payload, &o)

	timer := time.NewTimer(job.wallClock())
	defer timer.Stop()
	select {
	case <-respDone:
		if usable(o.resp) {
			// The call is over and the interpreter waits for the next one.
			drain(pipesDone, pipes.mine)
			res, err := conclude(ctx, n.log, &job, o)
			if k := n.threadsLeft(); k > 0 {
				// A thread the call started would run between calls,
				// outside any call's wall clock and with the runner's
				// audit hook disarmed: the interpreter ends with it.
				n.stop()
				res.Stderr += fmt.Sprintf("orqest: this call returned with %d threads still running; a stateful interpreter keeps no threads between calls, so it was ended and its state is lost (join your threads before the code returns)\n", k)
				return res, true, err
			}
			return res, false, err
		}
	case <-n.exited:
	case <-timer.C:
		o.timedOut = true
	case <-ctx.Done():
		o.cancelled = true
	}
	// The interpreter died, or is killed now: the state is gone.
	n.stop()
	drain(pipesDone, pipes.mine)
	if n.state != nil {
		o.status, _ = n.state.Sys().(syscall.WaitStatus)
	}
	n.log.Debug("notebook ended during a call", "pid", n.pid, "state", n.state, "timed_out", o.timedOut, "cancelled", o.cancelled)
	res, err = conclude(ctx, n.log, &job, o)
	return res, true, err
}
