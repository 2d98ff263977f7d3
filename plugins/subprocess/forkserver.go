package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/pyrunner"
)

// ModeForkServer keeps one warm, sealed zygote per plugin that forks a
// fresh child for every execution (the default).
const ModeForkServer = "forkserver"

// forkServerStartTimeout bounds how long a zygote may take to import, seal
// itself and say "ready".
const forkServerStartTimeout = 15 * time.Second

// forkServer is one running zygote (python3 -c <Program()> forkserver) and
// the Go end of its control socket.
//
// Per execution the backend creates four pipes and sends the child's ends
// over the SOCK_SEQPACKET control socket (SCM_RIGHTS) with {"t":"run"}. The
// zygote forks; the child takes them as fd 0-3, seals itself and runs the
// request it reads from fd 0, so Go reads the child's stdout, stderr and
// response directly. The zygote answers {"t":"started","pid"} with a pidfd
// (SCM_RIGHTS), with which Go enforces the wall clock race-free: the zygote
// only reaps a child after it exited and then reports {"t":"exit"} with its
// wait status and CPU time.
type forkServer struct {
	logger hclog.Logger
	cmd    *exec.Cmd
	conn   *net.UnixConn
	pid    int
	layers []string

	wmu sync.Mutex // serialises sends

	mu     sync.Mutex
	calls  map[uint64]*fsCall
	nextID uint64
	err    error         // why the zygote is gone; set before done is closed
	done   chan struct{} // closed when the control socket failed (zygote gone)
	waited chan struct{} // closed when the zygote process was reaped
}

// fsCall is one execution in flight.
type fsCall struct {
	started chan fsStarted
	exited  chan fsExit
}

type fsStarted struct {
	pid   int
	pidfd int
	err   error
}

type fsExit struct {
	status syscall.WaitStatus
	cpu    time.Duration
}

// fsMsg is one control message from the zygote.
type fsMsg struct {
	T      string   `json:"t"`
	ID     uint64   `json:"id"`
	PID    int      `json:"pid"`
	Status int      `json:"status"`
	UTime  float64  `json:"utime"`
	STime  float64  `json:"stime"`
	Error  string   `json:"error"`
	Layers []string `json:"layers"`
}

// startForkServer launches a zygote and waits until it is ready.
func startForkServer(argv []string, cfg pyrunner.ForkServerConfig, logger hclog.Logger) (*forkServer, error) {
	python := argv[0]
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("fork-server: socketpair: %v: %w", err, shared.ErrInternal)
	}
	goEnd := os.NewFile(uintptr(sp[0]), "forkserver-ctl")
	zEnd := os.NewFile(uintptr(sp[1]), "forkserver-ctl-child")
	defer zEnd.Close()
	c, err := net.FileConn(goEnd)
	goEnd.Close()
	if err != nil {
		return nil, fmt.Errorf("fork-server: control socket: %v: %w", err, shared.ErrInternal)
	}
	conn := c.(*net.UnixConn)

	cmd := &exec.Cmd{
		Path:       python,
		Args:       argv,
		Env:        []string{}, // empty environment (and -I ignores PYTHON*)
		Dir:        "/",
		Stdin:      bytes.NewReader(cfgJSON),
		Stderr:     logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
		ExtraFiles: []*os.File{zEnd}, // fd 3
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // one kill reaches the zygote and every child
			Pdeathsig: syscall.SIGKILL, // dies with the plugin
		},
	}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("fork-server: start %s: %v: %w", python, err, shared.ErrUnavailable)
	}
	zEnd.Close()
	fs := &forkServer{
		logger: logger, cmd: cmd, conn: conn, pid: cmd.Process.Pid,
		calls: map[uint64]*fsCall{}, done: make(chan struct{}), waited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(fs.waited)
	}()

	// The first message is "ready" (or "fatal").
	_ = conn.SetReadDeadline(time.Now().Add(forkServerStartTimeout))
	buf := make([]byte, 64<<10)
	n, _, _, _, err := conn.ReadMsgUnix(buf, nil)
	_ = conn.SetReadDeadline(time.Time{})
	var m fsMsg
	switch {
	case err != nil || n == 0:
		fs.kill()
		return nil, fmt.Errorf("fork-server: no ready message from %s (%v): %w", python, err, shared.ErrUnavailable)
	case json.Unmarshal(buf[:n], &m) != nil:
		fs.kill()
		return nil, fmt.Errorf("fork-server: malformed ready message %q: %w", buf[:n], shared.ErrInternal)
	case m.T == "fatal":
		fs.kill()
		return nil, fmt.Errorf("fork-server: %s failed to start: %s: %w", python, m.Error, shared.ErrUnavailable)
	case m.T != "ready":
		fs.kill()
		return nil, fmt.Errorf("fork-server: unexpected first message %q: %w", buf[:n], shared.ErrInternal)
	}
	fs.layers = m.Layers
	go fs.read()
	logger.Debug("fork-server ready", "pid", fs.pid, "layers", m.Layers)
	return fs, nil
}

// alive reports whether the zygote is still serving.
func (fs *forkServer) alive() bool {
	select {
	case <-fs.done:
		return false
	default:
		return true
	}
}

// fail records why the zygote is gone and wakes every caller.
func (fs *forkServer) fail(err error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.err == nil {
		fs.err = err
		close(fs.done)
	}
}

// read dispatches control messages until the socket fails.
func (fs *forkServer) read() {
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
		var m fsMsg
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			closeFDs(fds)
			fs.logger.Warn("fork-server: malformed control message", "error", err)
			continue
		}
		fs.mu.Lock()
		call := fs.calls[m.ID]
		if m.T == "exit" || m.T == "failed" {
			delete(fs.calls, m.ID)
		}
		fs.mu.Unlock()
		if call == nil {
			closeFDs(fds)
			continue
		}
		switch m.T {
		case "started":
			if len(fds) != 1 {
				closeFDs(fds)
				call.started <- fsStarted{err: fmt.Errorf("fork-server: started without a pidfd: %w", shared.ErrInternal)}
				continue
			}
			call.started <- fsStarted{pid: m.PID, pidfd: fds[0]}
		case "failed":
			closeFDs(fds)
			call.started <- fsStarted{err: fmt.Errorf("fork-server: fork failed: %s: %w", m.Error, shared.ErrUnavailable)}
		case "exit":
			closeFDs(fds)
			cpu := time.Duration((m.UTime + m.STime) * float64(time.Second))
			call.exited <- fsExit{status: syscall.WaitStatus(m.Status), cpu: cpu}
		default:
			closeFDs(fds)
		}
	}
}

// start hands the child's four descriptors (stdin, stdout, stderr,
// response) to the zygote. The caller keeps ownership of fds and closes
// them afterwards.
func (fs *forkServer) start(fds [4]int) (*fsCall, uint64, error) {
	call := &fsCall{started: make(chan fsStarted, 1), exited: make(chan fsExit, 1)}
	fs.mu.Lock()
	if fs.err != nil {
		err := fs.err
		fs.mu.Unlock()
		return nil, 0, fmt.Errorf("%v: %w", err, shared.ErrUnavailable)
	}
	fs.nextID++
	id := fs.nextID
	fs.calls[id] = call
	fs.mu.Unlock()

	msg := fmt.Appendf(nil, `{"t":"run","id":%d}`, id)
	fs.wmu.Lock()
	_, _, err := fs.conn.WriteMsgUnix(msg, unix.UnixRights(fds[:]...), nil)
	fs.wmu.Unlock()
	if err != nil {
		fs.forget(id)
		fs.fail(fmt.Errorf("fork-server (pid %d): send: %v", fs.pid, err))
		return nil, 0, fmt.Errorf("fork-server: send: %v: %w", err, shared.ErrUnavailable)
	}
	return call, id, nil
}

func (fs *forkServer) forget(id uint64) {
	fs.mu.Lock()
	delete(fs.calls, id)
	fs.mu.Unlock()
}

// deadErr is the error a caller returns when the zygote died under it.
func (fs *forkServer) deadErr() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fmt.Errorf("execute: %v: %w", fs.err, shared.ErrUnavailable)
}

// kill ends the zygote and its children now and reaps the zygote.
func (fs *forkServer) kill() {
	fs.conn.Close()
	select {
	case <-fs.waited:
	default:
		_ = syscall.Kill(-fs.pid, syscall.SIGKILL)
		<-fs.waited
	}
	fs.fail(errors.New("fork-server stopped"))
}

// close asks the zygote to stop (EOF on its control socket: it kills its
// children and exits), then makes sure of it.
func (fs *forkServer) close() {
	fs.conn.Close()
	select {
	case <-fs.waited:
	case <-time.After(2 * time.Second):
	}
	fs.kill()
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

// runFork runs req in a child forked by the zygote and classifies the
// outcome, like runSpawn. rules is the rules table for the in-child
// checker and the builtins.
func (b *Backend) runFork(ctx context.Context, cfg Config, seal *sealInfo, req pyrunner.Request, timeout time.Duration, maxOut int, rules json.RawMessage) (shared.ExecutionResult, error) {
	var res shared.ExecutionResult
	cpuSeconds := int(math.Ceil(timeout.Seconds())) + 1
	req.Rules = pyrunner.RulesFromServer
	req.MaxOutputBytes = maxOut
	req.CPUSeconds = cpuSeconds
	payload, err := req.Encode()
	if err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("execute: %w", err)
	}
	fs, err := b.forkServer(cfg, seal, rules)
	if err != nil {
		return res, err
	}

	var mine []*os.File
	var theirs [4]int
	for i := range theirs {
		theirs[i] = -1
	}
	defer func() {
		for _, f := range mine {
			f.Close()
		}
		for _, fd := range theirs {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	for i := range theirs {
		f, fd, err := childPipe(i == 0)
		if err != nil {
			return res, fmt.Errorf("execute: pipes: %v: %w", err, shared.ErrInternal)
		}
		mine = append(mine, f)
		theirs[i] = fd
	}
	stdinW, stdoutR, stderrR, respR := mine[0], mine[1], mine[2], mine[3]

	call, id, err := fs.start(theirs)
	// The kernel holds the child's ends in flight; ours go now, so the
	// pipes reach EOF when the child exits.
	for i, fd := range theirs {
		unix.Close(fd)
		theirs[i] = -1
	}
	if err != nil {
		return res, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	// The three readers; pipesDone is closed when all reached EOF.
	var out, errOut, resp captured
	pipesDone := make(chan struct{})
	go func() {
		defer close(pipesDone)
		stdoutC := make(chan captured, 1)
		stderrC := make(chan captured, 1)
		go capture(stdoutR, maxOut, stdoutC)
		go capture(stderrR, maxOut, stderrC)
		respC := make(chan captured, 1)
		capture(respR, maxOut+maxResponseSlack, respC)
		resp, out, errOut = <-respC, <-stdoutC, <-stderrC
	}()
	go func() {
		_, _ = stdinW.Write(payload) // EPIPE if the child died: classified below
		stdinW.Close()
	}()

	var st fsStarted
	select {
	case st = <-call.started:
	case <-fs.done:
		fs.forget(id)
		stopReaders(mine)
		<-pipesDone
		return res, fs.deadErr()
	}
	if st.err != nil {
		stopReaders(mine)
		<-pipesDone
		return res, st.err
	}
	defer unix.Close(st.pidfd)
	pid := st.pid
	if b.onSpawn != nil {
		b.onSpawn(pid, "")
	}
	kill := func() { _ = unix.PidfdSendSignal(st.pidfd, unix.SIGKILL, nil, 0) }

	// Done when the zygote reports the exit: when Execute returns, the child
	// is gone (reaped), whatever happened.
	var ex fsExit
	var timedOut, cancelled, exited bool
	select {
	case ex = <-call.exited:
		exited = true
	case <-timer.C:
		timedOut = true
		kill()
	case <-ctx.Done():
		cancelled = true
		kill()
	case <-fs.done:
	}
	if !exited {
		select {
		case ex = <-call.exited:
			exited = true
		case <-fs.done:
		}
	}
	if !exited {
		kill()
		fs.forget(id)
		stopReaders(mine)
		<-pipesDone
		return res, fs.deadErr()
	}

	// Collect the pipes; bounded in case something still holds them.
	select {
	case <-pipesDone:
	case <-time.After(drainGrace):
		stopReaders(mine)
		<-pipesDone
	}
	res.Stdout = pyrunner.TruncateUTF8(string(out.data), maxOut)
	res.Stderr = pyrunner.TruncateUTF8(string(errOut.data), maxOut)
	res.StdoutTruncated = out.truncated
	res.StderrTruncated = errOut.truncated

	if cancelled {
		return res, fmt.Errorf("execute: %w", ctx.Err())
	}
	if timedOut {
		res.ErrorKind = shared.KindTimeout
		res.Error = fmt.Sprintf("sandbox execution timed out after %.2fs", timeout.Seconds())
		return res, nil
	}
	if !resp.truncated && len(bytes.TrimSpace(resp.data)) > 0 {
		r, err := pyrunner.DecodeResponse(resp.data)
		if err == nil {
			if err := r.Apply(&res); err != nil {
				return res, fmt.Errorf("execute: %w", err)
			}
			return res, nil
		}
		b.logger.Warn("undecodable response from child", "pid", pid, "error", err)
	}
	res.ErrorKind, res.Error = classifyDeath(ex.status, ex.cpu, req.MemoryMB, cpuSeconds, res.Stderr)
	return res, nil
}

// stopReaders closes our ends of the child's output pipes, which ends the
// capture goroutines reading them.
func stopReaders(mine []*os.File) {
	for _, f := range mine[1:] {
		f.Close()
	}
}
