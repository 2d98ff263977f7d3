package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/plugins/docker/internal/rtproto"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/pyrunner"
)

// Limits and defaults of one execution inside the container (ORIGINAL.md:
// timeout_s=5.0, memory_mb=128). The container's own cgroup limits (memory,
// pids, cpus) bound everything the runtime and its children do together.
const (
	defaultTimeout  = 5 * time.Second
	maxTimeout      = 10 * time.Minute
	defaultMemoryMB = 128
	maxMemoryMB     = 16 << 10
	defaultMaxOut   = 1 << 20
	maxMaxOut       = 16 << 20
	maxArgsBytes    = 1 << 20
	maxCodeBytes    = 256 << 10
	responseSlack   = 1 << 20
	drainGrace      = 250 * time.Millisecond
)

// executor runs the shared Python runner (pyrunner.Program) once per call.
//
// NOTE for the lead: this is a deliberately thin local spawner. The full
// spawning logic (pipes, prlimit before the request is written, process
// group kill, waitid(WNOWAIT) reaping, capped capture, death classification)
// lives in plugins/subprocess/backend.go (Backend.run). It should move to a
// shared package (e.g. shared/pyrunner/spawn) that both tier 1 and this
// runtime call; this file then shrinks to that call.
type executor struct {
	python  string
	rules   json.RawMessage
	workdir string
	envs    *envManager // per-agent venvs and dependencies (venv.go); nil: none

	mkdirMu sync.Mutex
}

// agentDir returns (creating it) the working directory of agentID. agentID
// must already have passed rtproto.CheckID: this is the first filesystem
// operation of a call.
func (e *executor) agentDir(agentID string) (string, error) {
	if err := rtproto.CheckID("agent_id", agentID); err != nil {
		return "", err // belt and braces: the MCP boundary checked it already
	}
	dir := filepath.Join(e.workdir, "agents", agentID)
	e.mkdirMu.Lock()
	defer e.mkdirMu.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("agent directory: %v", err)
	}
	return dir, nil
}

// cappedBuffer keeps at most limit bytes (plus a few for a clean UTF-8 cut)
// and discards the rest, so the writer never blocks.
type cappedBuffer struct {
	limit     int
	buf       bytes.Buffer
	truncated bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.limit {
		c.truncated = true
	}
	if room := c.limit + 4 - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// run executes one call. A Go error is an infrastructure failure; everything
// the user's code did is in the result.
func (e *executor) run(ctx context.Context, a rtproto.ExecuteArgs) (shared.ExecutionResult, error) {
	start := time.Now()
	var res shared.ExecutionResult
	timeout := time.Duration(a.TimeoutS * float64(time.Second))
	memMB, maxOut := a.MemoryMB, a.MaxOutputBytes
	if timeout < 0 || memMB < 0 || maxOut < 0 {
		return res, fmt.Errorf("negative limit: %w", shared.ErrInvalidArgument)
	}
	if timeout == 0 {
		timeout = defaultTimeout
	}
	if memMB == 0 {
		memMB = defaultMemoryMB
	}
	if maxOut == 0 {
		maxOut = defaultMaxOut
	}
	if timeout > maxTimeout || memMB > maxMemoryMB || maxOut > maxMaxOut {
		return res, fmt.Errorf("limit over the runtime's maximum (timeout %v, memory %d MB, output %d bytes): %w", maxTimeout, maxMemoryMB, maxMaxOut, shared.ErrInvalidArgument)
	}
	if len(a.Code) > maxCodeBytes || len(a.Args) > maxArgsBytes {
		return res, fmt.Errorf("code or args too large: %w", shared.ErrInvalidArgument)
	}
	res.Limits = shared.Limits{TimeoutMS: timeout.Milliseconds(), MemoryMB: memMB, MaxOutputBytes: maxOut}
	agent := a.AgentID
	if agent == "" {
		agent = "default"
	}
	dir, err := e.agentDir(agent)
	if err != nil {
		return res, err
	}
	python, extraPath, err := e.envs.prepare(ctx, agent, a.Dependencies) // venv.go
	if err != nil {
		return res, err
	}
	if python == "" {
		python = e.python
	}
	cpuSeconds := int(math.Ceil(timeout.Seconds())) + 1
	payload, err := pyrunner.Request{
		Code:           a.Code,
		Args:           a.Args,
		AllowedImports: a.AllowedImports,
		Rules:          e.rules,
		MaxOutputBytes: maxOut,
		MemoryMB:       memMB,
		CPUSeconds:     cpuSeconds,
		ExtraSysPath:   extraPath,
	}.Encode()
	if err != nil {
		return res, err
	}

	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("pipe: %v: %w", err, shared.ErrInternal)
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return res, fmt.Errorf("pipe: %v: %w", err, shared.ErrInternal)
	}
	defer respR.Close()
	stdout := &cappedBuffer{limit: maxOut}
	stderr := &cappedBuffer{limit: maxOut}
	cmd := &exec.Cmd{
		Path:        python,
		Args:        pyrunner.Argv(python),
		Env:         []string{},
		Dir:         dir,
		Stdin:       stdinR,
		Stdout:      stdout,
		Stderr:      stderr,
		ExtraFiles:  []*os.File{respW}, // fd 3
		WaitDelay:   drainGrace,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if err := cmd.Start(); err != nil {
		stdinR.Close()
		stdinW.Close()
		respW.Close()
		return res, fmt.Errorf("start %s: %v: %w", python, err, shared.ErrUnavailable)
	}
	stdinR.Close()
	respW.Close()
	pid := cmd.Process.Pid
	killGroup := func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }
	// killAll repeats the kill until the group is empty (ESRCH): a fork bomb
	// keeps creating members while the first signal is delivered.
	killAll := func() {
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if err := syscall.Kill(-pid, syscall.SIGKILL); err == syscall.ESRCH {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}

	// Limits before the request (and so the user's code) reaches the child.
	mem := uint64(memMB) << 20
	if err := errors.Join(
		unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: mem, Max: mem}, nil),
		unix.Prlimit(pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: uint64(cpuSeconds), Max: uint64(cpuSeconds) + 1}, nil),
		unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil),
	); err != nil {
		killGroup()
		stdinW.Close()
		_ = cmd.Wait()
		return res, fmt.Errorf("resource limits: %v: %w", err, shared.ErrInternal)
	}

	respC := make(chan cappedBuffer, 1)
	go func() {
		rb := cappedBuffer{limit: maxOut + responseSlack}
		buf := make([]byte, 32<<10)
		for {
			n, err := respR.Read(buf)
			rb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		respC <- rb
	}()
	go func() {
		_, _ = stdinW.Write(payload)
		stdinW.Close()
	}()

	waitC := make(chan error, 1)
	go func() { waitC <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var timedOut, cancelled bool
	select {
	case <-waitC:
	case <-timer.C:
		timedOut = true
		killGroup()
		<-waitC
		killAll()
	case <-ctx.Done():
		cancelled = true
		killGroup()
		<-waitC
		killAll()
	}
	killGroup() // anything the child left behind in its group
	var resp cappedBuffer
	select {
	case resp = <-respC:
	case <-time.After(drainGrace):
		respR.Close()
		resp = <-respC
	}

	res.Stdout = pyrunner.TruncateUTF8(stdout.buf.String(), maxOut)
	res.Stderr = pyrunner.TruncateUTF8(stderr.buf.String(), maxOut)
	res.StdoutTruncated, res.StderrTruncated = stdout.truncated, stderr.truncated

	switch {
	case cancelled:
		return res, fmt.Errorf("execute: %w", ctx.Err())
	case timedOut:
		res.ErrorKind = shared.KindTimeout
		res.Error = fmt.Sprintf("sandbox execution timed out after %.2fs", timeout.Seconds())
		res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		return res, nil
	}
	if !resp.truncated && len(bytes.TrimSpace(resp.buf.Bytes())) > 0 {
		if r, err := pyrunner.DecodeResponse(resp.buf.Bytes()); err == nil {
			if err := r.Apply(&res); err != nil {
				return res, err
			}
			res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
			return res, nil
		}
	}
	res.ErrorKind, res.Error = classifyDeath(cmd.ProcessState, memMB, cpuSeconds, res.Stderr)
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	return res, nil
}

// classifyDeath explains a child that exited without a response (a thin
// version of the tier-1 classifier; see the note on executor).
func classifyDeath(state *os.ProcessState, memMB, cpuSeconds int, stderr string) (shared.ErrorKind, string) {
	if state == nil {
		return shared.KindKilled, "sandbox process vanished"
	}
	ws, _ := state.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		sig := ws.Signal()
		cpu := state.UserTime() + state.SystemTime()
		switch {
		case sig == syscall.SIGXCPU || (sig == syscall.SIGKILL && cpu >= time.Duration(cpuSeconds)*time.Second):
			return shared.KindTimeout, fmt.Sprintf("sandbox execution exceeded its CPU time limit of %ds", cpuSeconds)
		case sig == syscall.SIGKILL || sig == syscall.SIGSEGV || sig == syscall.SIGABRT || sig == syscall.SIGBUS:
			return shared.KindMemory, fmt.Sprintf("sandbox process killed by %v under a memory limit of %d MB (or the container's memory cgroup)", sig, memMB)
		}
		return shared.KindKilled, fmt.Sprintf("sandbox process killed by %v", sig)
	}
	if strings.Contains(stderr, "MemoryError") {
		return shared.KindMemory, fmt.Sprintf("sandbox process ran out of memory (limit %d MB)", memMB)
	}
	msg := fmt.Sprintf("sandbox process exited with status %d without a result", ws.ExitStatus())
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	if tail := strings.TrimSpace(strings.Join(lines, "\n")); tail != "" {
		msg += ": " + tail
	}
	return shared.KindRuntime, msg
}
