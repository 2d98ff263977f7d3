package pyproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// Spawn runs job in one fresh interpreter started with argv (argv[0] is the
// interpreter's path) and classifies its outcome. A Go error means
// infrastructure failure (or ctx cancellation); everything the user's code
// did is in the result. job.Request.Rules must be set by the caller.
//
// The child runs with an empty environment, in its own process group, with
// PDEATHSIG=SIGKILL; RLIMIT_AS, RLIMIT_CPU and RLIMIT_CORE=0 are set with
// prlimit before the request (and so any user code) reaches its stdin. At
// the wall clock the whole group is killed, and after the child exited the
// kill is repeated until the group is empty.
func Spawn(ctx context.Context, argv []string, job Job, log Logger) (shared.ExecutionResult, error) {
	return SpawnWith(ctx, argv, job, SpawnOptions{}, log)
}

// SpawnOptions adapt Spawn to a child that is not the interpreter itself
// but a launcher that runs it somewhere else (a gVisor sandbox): the
// launcher cannot hand the interpreter an inherited fd 3, and resource
// limits set on the launcher's pid would limit the launcher, not the code.
type SpawnOptions struct {
	// ResponseFIFO, when set, is a named pipe the interpreter opens as its
	// fd 3 (the launcher arranges that); no fd 3 is passed. This process
	// opens it for reading before the start, and holds a write end until
	// the child was reaped so the reader sees end-of-file only then.
	ResponseFIFO string
	// LimitsInside skips the prlimit of RLIMIT_AS and RLIMIT_CPU on the
	// child's pid: the runner (and the launcher) apply them to the
	// interpreter from the request. RLIMIT_CORE=0 is still set.
	LimitsInside bool
	// Kill, when set, is called after the child's process group was killed
	// at the wall clock or on cancellation, and after every run whose child
	// was killed or died by a signal: it reaches what the launcher started
	// outside its process group (e.g. `runsc delete --force`).
	Kill func()
	// SignalExits reads an exit status 128+n of the child as death by
	// signal n: a launcher that reports how the interpreter died that way
	// (runsc does) gets the same classification as a direct child.
	SignalExits bool
	// Env is the interpreter's environment (nil: empty). -I makes Python
	// ignore PYTHON* variables whatever it holds.
	Env []string
	// Core is forkcore.c built as a shared object (nil: none), handed to
	// an execution's interpreter as fd 4 (a sealed memfd; not with
	// ResponseFIFO): its runner's audit hook then runs in C.
	Core []byte
	// CoreFDInside, with ResponseFIFO, is the descriptor on which the
	// launcher's own bootstrap opens the C loop inside its sandbox (0:
	// none): the request names it, so the runner loads its audit hook in
	// C from there before it seals.
	CoreFDInside int
}

// SpawnWith is Spawn with the launcher adaptations of opts.
func SpawnWith(ctx context.Context, argv []string, job Job, opts SpawnOptions, log Logger) (shared.ExecutionResult, error) {
	log = orNop(log)
	var res shared.ExecutionResult
	req := job.request()
	withCore := len(opts.Core) > 0 && opts.ResponseFIFO == "" && (req.Op == "" || req.Op == runner.OpExecute)
	if withCore {
		req.CoreFD = 4
	} else if opts.CoreFDInside > 2 && opts.ResponseFIFO != "" && (req.Op == "" || req.Op == runner.OpExecute) {
		req.CoreFD = opts.CoreFDInside
	}
	payload, err := req.Encode()
	if err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("execute: %w", err)
	}

	dir := job.Dir
	if dir == "" {
		dir, err = os.MkdirTemp("", tempPrefix())
		if err != nil {
			return res, fmt.Errorf("execute: temporary directory: %w: %w", err, shared.ErrInternal)
		}
		defer os.RemoveAll(dir)
	}

	// Pipes: parent ends are read/written here, child ends are handed over
	// and closed in the parent after Start. All are close-on-exec, so
	// concurrently spawned children never inherit each other's.
	var toClose []*os.File
	defer func() {
		for _, f := range toClose {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			toClose = append(toClose, r, w)
		}
		return
	}
	stdinR, stdinW, err1 := pipe()
	stdoutR, stdoutW, err2 := pipe()
	stderrR, stderrW, err3 := pipe()
	var respR, respW *os.File
	var err4 error
	if opts.ResponseFIFO == "" {
		respR, respW, err4 = pipe()
	} else {
		respR, respW, err4 = openFIFO(opts.ResponseFIFO)
		if err4 == nil {
			toClose = append(toClose, respR, respW)
		}
	}
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return res, fmt.Errorf("execute: pipes: %w: %w", err, shared.ErrInternal)
	}
	var extra []*os.File
	if opts.ResponseFIFO == "" {
		extra = []*os.File{respW} // fd 3
	}
	if withCore {
		core, err := sealedMemfd("orqest-forkcore", opts.Core)
		if err != nil {
			return res, fmt.Errorf("execute: core: %w: %w", err, shared.ErrInternal)
		}
		toClose = append(toClose, core)
		extra = append(extra, core) // fd 4
	}

	cmd := &exec.Cmd{
		Path:       argv[0],
		Args:       argv,
		Env:        envOf(opts.Env), // -I ignores PYTHON* anyway
		Dir:        dir,
		Stdin:      stdinR,
		Stdout:     stdoutW,
		Stderr:     stderrW,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // own process group: one kill reaches every descendant
			Pdeathsig: syscall.SIGKILL, // the child dies with its parent
		},
	}
	oom := watchOOM()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("execute: start %s: %w: %w", argv[0], err, shared.ErrUnavailable)
	}
	pid := cmd.Process.Pid
	killGroup := func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }
	// The child's ends are now the child's.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	if opts.ResponseFIFO == "" {
		respW.Close()
	}

	// exited is closed once the child has exited; it is not reaped yet, so
	// its pid (and process group id) cannot be reused while we kill.
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()
	killed := false
	reap := func() *os.ProcessState {
		<-exited
		killGroup() // anything the child left in its group
		_ = cmd.Wait()
		KillGroup(pid) // a fork bomb refills the group: repeat until it is empty
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			killed = true
		}
		if opts.Kill != nil && killed {
			opts.Kill()
		}
		if opts.ResponseFIFO != "" {
			respW.Close() // the reader reaches end-of-file once the child's end is gone
		}
		return cmd.ProcessState
	}

	// Limits before the request is written: the user's code runs only after
	// the runner has read stdin.
	memBytes := uint64(req.MemoryMB) << 20
	var limErr error
	if !opts.LimitsInside {
		limErr = unix.Prlimit(pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: uint64(req.CPUSeconds), Max: uint64(req.CPUSeconds) + 1}, nil)
		if memBytes > 0 { // 0: no address-space limit (a cgroup bounds the memory)
			limErr = errors.Join(limErr, unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: memBytes, Max: memBytes}, nil))
		}
	}
	if err := errors.Join(
		limErr,
		// No core dumps: a child killed by SIGXCPU/SIGSEGV/SIGABRT must not
		// write (or hand systemd-coredump) a copy of its memory.
		unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}, nil),
	); err != nil {
		killGroup()
		reap()
		return res, fmt.Errorf("execute: applying resource limits to the child: %w: %w", err, shared.ErrInternal)
	}
	if job.OnStart != nil {
		job.OnStart(pid, dir)
	}

	stdoutC := make(chan captured, 1)
	stderrC := make(chan captured, 1)
	respC := make(chan captured, 1)
	go capture(stdoutR, job.Limits.MaxOutputBytes, stdoutC, job.stream(shared.StreamStdout))
	go capture(stderrR, job.Limits.MaxOutputBytes, stderrC, job.stream(shared.StreamStderr))
	go capture(respR, job.Limits.MaxOutputBytes+MaxResponseSlack, respC, nil)
	go func() {
		_, _ = stdinW.Write(payload) // EPIPE if the child died: classified below
		stdinW.Close()
	}()

	timer := time.NewTimer(job.wallClock())
	defer timer.Stop()
	var o outcome
	o.pid, o.oom = pid, oom
	select {
	case <-exited:
	case <-timer.C:
		o.timedOut = true
		killed = true
		killGroup()
	case <-ctx.Done():
		o.cancelled = true
		killed = true
		killGroup()
	}
	state := reap()

	// Collect the pipes; bounded in case an escaped descendant holds them.
	graceOver := make(chan struct{})
	grace := time.AfterFunc(DrainGrace, func() { close(graceOver) })
	defer grace.Stop()
	collect := func(c chan captured, f *os.File) captured {
		select {
		case v := <-c:
			return v
		case <-graceOver:
			f.Close() // unblocks the reader
			return <-c
		}
	}
	o.resp = collect(respC, respR)
	o.out = collect(stdoutC, stdoutR)
	o.errOut = collect(stderrC, stderrR)

	if state == nil {
		r, _ := conclude(ctx, log, &job, outcome{out: o.out, errOut: o.errOut})
		return r, fmt.Errorf("execute: waiting for the child failed: %w", shared.ErrInternal)
	}
	log.Debug("child finished", "pid", pid, "state", state.String(), "timed_out", o.timedOut, "cancelled", o.cancelled)
	o.status, _ = state.Sys().(syscall.WaitStatus)
	if opts.SignalExits && o.status.Exited() && o.status.ExitStatus() > 128 && o.status.ExitStatus() < 128+65 {
		o.status = syscall.WaitStatus(o.status.ExitStatus() - 128) // the wait status of death by that signal
	}
	o.cpu = state.UserTime() + state.SystemTime()
	return conclude(ctx, log, &job, o)
}

// openFIFO opens the named pipe path for reading without waiting for a
// writer, then holds a write end of it: the reader sees end-of-file only
// after the holder closed its end and every other writer is gone.
func openFIFO(path string) (r, w *os.File, err error) {
	rfd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the response pipe %s: %w", path, err)
	}
	wfd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(rfd)
		return nil, nil, fmt.Errorf("opening the response pipe %s for writing: %w", path, err)
	}
	// The reader stays non-blocking: os.NewFile then polls it, so closing
	// it unblocks a pending read (the drain grace relies on that).
	return os.NewFile(uintptr(rfd), path), os.NewFile(uintptr(wfd), path), nil
}
