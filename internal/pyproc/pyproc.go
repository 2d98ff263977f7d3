// Package pyproc runs the shared Python runner (package runner) in fresh,
// limited processes: the one Go implementation of process execution that
// tier 1 (plugins/subprocess) and the agent runtime (package agent, which
// docker containers, gVisor sandboxes and kubernetes pods run) share.
//
//   - Spawn: one interpreter per execution (pipes, prlimit before the
//     request reaches stdin, own process group, waitid(WNOWAIT) so the group
//     id stays reserved while we kill, capped capture, death classification).
//   - ForkServer: a warm zygote (`python3 -c <Program()> forkserver`) keeps
//     pre-forked, sealed children; the child's pipes travel over a unix
//     socket (SCM_RIGHTS), the wall clock kills through a pidfd, and the
//     zygote reaps every child and reports its wait status before Run
//     returns.
//   - Probe / SealInfo / LibraryPaths: which sealing layers the runner can
//     establish with an interpreter on this kernel, and what Landlock must
//     let it read besides the stdlib.
//
// The package is pure Go (no cgo): the tier-2 runtime is a static binary.
package pyproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/internal/procfs"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

const (
	// MaxResponseSlack is what the fd-3 reader accepts beyond
	// max_output_bytes (the envelope, an error text, findings).
	MaxResponseSlack = 1 << 20
	// DrainGrace bounds how long we wait for pipes to reach EOF after the
	// child was reaped (a descendant that escaped the process group could
	// hold them open).
	DrainGrace = 250 * time.Millisecond
	// groupKillFor bounds how long KillGroup repeats its kill.
	groupKillFor = 2 * time.Second
)

// Logger is what the package logs through; hclog.Logger and *slog.Logger
// both satisfy it.
type Logger interface {
	Debug(msg string, args ...any)
	Warn(msg string, args ...any)
}

type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Warn(string, ...any)  {}

func orNop(l Logger) Logger {
	if l == nil {
		return nopLogger{}
	}
	return l
}

// Job is one execution.
type Job struct {
	// Request is the runner request. Its limits are set from Limits
	// (runner.Request.WithLimits); a fork-server run uses its zygote's
	// rules table (Request.Rules is replaced by runner.RulesFromServer).
	Request runner.Request
	// Limits are the execution's resolved limits (shared.Prepare): the
	// wall clock (Timeout, > 0), RLIMIT_AS (MemoryMB), RLIMIT_CPU
	// (CPUSeconds) and the cap of stdout and stderr each (MaxOutputBytes,
	// > 0).
	Limits shared.Resolved
	// Dir is the working directory of a spawned interpreter; "" means a
	// fresh temporary directory, removed afterwards. (Fork-server children
	// run in their zygote's directory.)
	Dir string
	// OnStart, when set, is told the pid (and the spawn working directory)
	// of the child right after it started.
	OnStart func(pid int, dir string)
	// OnOutput, when set, is given each piece of stdout and stderr
	// (shared.StreamStdout, shared.StreamStderr) as it is read, up to
	// Limits.MaxOutputBytes per stream: the same bytes the result holds.
	// It is called from the readers' goroutines (one per stream), each
	// stream in order; it must not block for long, or the child blocks on
	// a full pipe.
	OnOutput func(stream string, data []byte)
	// Started, when set, is when the call's wall clock started: a caller
	// that first waited (for a fork-server's start, a probe) sets it so
	// that Limits.Timeout counts from the call's start, not from its
	// child's. Zero: the clock starts with the child.
	Started time.Time
}

// wallClock is how long the child may run: Limits.Timeout, less what
// passed since Started (never below zero).
func (j *Job) wallClock() time.Duration {
	if j.Started.IsZero() {
		return j.Limits.Timeout
	}
	return max(j.Limits.Timeout-time.Since(j.Started), 0)
}

// TimedOut is the result of a call whose wall clock ran out: its child
// was killed at it, or (Started) the call was still waiting to reach one.
func (j *Job) TimedOut() shared.ExecutionResult {
	return shared.ExecutionResult{
		ErrorKind: shared.KindTimeout,
		Error:     fmt.Sprintf("sandbox execution timed out after %.2fs", j.Limits.Timeout.Seconds()),
	}
}

// envOf is the environment of a Python process given env (nil: empty).
func envOf(env []string) []string {
	if env == nil {
		return []string{}
	}
	return env
}

// stream returns the OnOutput callback of one stream (nil: none).
func (j *Job) stream(name string) func([]byte) {
	if j.OnOutput == nil {
		return nil
	}
	on := j.OnOutput
	return func(p []byte) { on(name, p) }
}

// request is the runner request of j with its limits.
func (j *Job) request() runner.Request { return j.Request.WithLimits(j.Limits) }

// captured is what a capped pipe reader collected.
type captured struct {
	data      []byte
	truncated bool
}

// capture reads r to EOF (or until r is closed), keeping at most limit bytes
// and draining the rest so the writer never blocks on a full pipe.
//
// It keeps up to utf8.UTFMax bytes beyond limit so that the caller can cut
// at limit on a rune boundary (runner.TruncateUTF8).
//
// on, when not nil, is given a copy of each piece read within limit, as
// it is read.
func capture(r *os.File, limit int, out chan<- captured, on func([]byte)) {
	var c captured
	keep := limit + utf8.UTFMax
	// Most outputs are small: start with a little room and grow, rather
	// than a large buffer per pipe per call.
	buf := make([]byte, 0, 512)
	var drain []byte
	total := 0
	for {
		var n int
		var err error
		if len(buf) < keep {
			if len(buf) == cap(buf) {
				buf = slices.Grow(buf, min(max(cap(buf), 512), keep-len(buf)))
			}
			n, err = r.Read(buf[len(buf):min(cap(buf), keep)])
			if on != nil && n > 0 && len(buf) < limit {
				on(bytes.Clone(buf[len(buf):min(len(buf)+n, limit)]))
			}
			buf = buf[:len(buf)+n]
		} else {
			if drain == nil {
				drain = make([]byte, 32<<10)
			}
			n, err = r.Read(drain)
		}
		total += n
		if err != nil {
			break
		}
	}
	c.data, c.truncated = buf, total > limit
	out <- c
}

// outcome is how one child ended.
type outcome struct {
	out, errOut, resp   captured
	status              syscall.WaitStatus
	cpu                 time.Duration
	timedOut, cancelled bool
	pid                 int
	// oom is the cgroup's OOM-kill count from before the child ran code.
	oom oomWatch
}

// conclude turns an outcome into the execution result: the child's
// response when it wrote a usable one, else the classified death.
func conclude(ctx context.Context, log Logger, job *Job, o outcome) (shared.ExecutionResult, error) {
	var res shared.ExecutionResult
	if o.timedOut {
		res = job.TimedOut()
	}
	res.Stdout = runner.TruncateUTF8(string(o.out.data), job.Limits.MaxOutputBytes)
	res.Stderr = runner.TruncateUTF8(string(o.errOut.data), job.Limits.MaxOutputBytes)
	res.StdoutTruncated = o.out.truncated
	res.StderrTruncated = o.errOut.truncated
	if o.cancelled {
		return res, fmt.Errorf("execute: %w", ctx.Err())
	}
	if o.timedOut {
		return res, nil
	}
	if !o.resp.truncated && len(bytes.TrimSpace(o.resp.data)) > 0 { // a truncated response is unusable
		r, err := runner.ParseResponse(o.resp.data)
		if err != nil {
			// The child ran user code that may have escaped the Python
			// layers: a response the runner does not write is not trusted.
			log.Warn("child response breaks the protocol", "pid", o.pid, "error", err)
			return res, fmt.Errorf("execute: sandbox child %d wrote a response the runner does not write (its code may have escaped the Python layers): %w: %w",
				o.pid, err, shared.ErrInternal)
		}
		if err := r.Apply(&res); err != nil {
			return res, fmt.Errorf("execute: %w", err)
		}
		return res, nil
	}
	// No (usable) response: the child was killed or crashed.
	res.ErrorKind, res.Error = ClassifyDeath(o.status, o.cpu, job.Limits.MemoryMB, job.Limits.CPUSeconds(), o.oom.fired(), res.Stderr)
	return res, nil
}

// ClassifyDeath explains a child that exited without a response, from the
// evidence there is: its wait status, the CPU time it used (cpu, against
// its RLIMIT_CPU of cpuSeconds), its memory limit (memMB, RLIMIT_AS),
// whether its cgroup counted an OOM kill while it ran (oomKilled), and its
// stderr. Each limit leaves its own trace:
//
//   - RLIMIT_CPU sends SIGXCPU (and SIGKILL at the hard limit, once the CPU
//     time is used up): a timeout;
//   - RLIMIT_AS makes allocations fail (ENOMEM): the runner answers
//     MemoryError itself, exits with runner.ExitMemory when it has no
//     memory left to answer, or the interpreter dies of SIGSEGV, SIGABRT or
//     SIGBUS where no MemoryError can be raised: memory;
//   - a cgroup's memory limit (a container's) or the kernel's OOM killer
//     sends SIGKILL and counts it in the cgroup (oomKilled): memory.
//
// Any other signal, a SIGKILL without that evidence included, came from
// outside the sandbox (an operator, another process): shared.KindKilled.
func ClassifyDeath(ws syscall.WaitStatus, cpu time.Duration, memMB, cpuSeconds int, oomKilled bool, stderr string) (shared.ErrorKind, string) {
	if ws.Signaled() {
		sig := ws.Signal()
		name := unix.SignalName(sig)
		if name == "" {
			name = sig.String()
		}
		switch {
		case sig == syscall.SIGXCPU || (sig == syscall.SIGKILL && cpuSeconds > 0 && cpu >= time.Duration(cpuSeconds)*time.Second):
			return shared.KindTimeout, fmt.Sprintf("sandbox execution exceeded its CPU time limit of %ds", cpuSeconds)
		case sig == syscall.SIGKILL && oomKilled && memMB == 0:
			return shared.KindMemory, "sandbox process killed by SIGKILL when its cgroup ran out of memory (an OOM kill: the session's resident memory limit)"
		case sig == syscall.SIGKILL && oomKilled:
			return shared.KindMemory, fmt.Sprintf("sandbox process killed by SIGKILL when its cgroup ran out of memory (an OOM kill; its own limit was %d MB)", memMB)
		case memMB > 0 && (sig == syscall.SIGSEGV || sig == syscall.SIGABRT || sig == syscall.SIGBUS):
			return shared.KindMemory, fmt.Sprintf("sandbox process killed by %s under a memory limit of %d MB", name, memMB)
		}
		return shared.KindKilled, fmt.Sprintf("sandbox process killed by %s from outside the sandbox (no memory, CPU or time limit of the sandbox explains it)", name)
	}
	if runner.ExitCode(ws.ExitStatus()) == runner.ExitMemory {
		return shared.KindMemory, fmt.Sprintf("sandbox process ran out of memory (limit %d MB)", memMB)
	}
	msg := fmt.Sprintf("sandbox process exited with status %d without a result", ws.ExitStatus())
	if c := runner.ExitCode(ws.ExitStatus()); c.Known() {
		msg = fmt.Sprintf("sandbox process exited with status %d (%s) without a result", int(c), c)
	}
	if tail := lastLines(stderr, 5); tail != "" {
		msg += ": " + tail
	}
	return shared.KindRuntime, msg
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// KillGroup sends SIGKILL to process group pgid and repeats it until no
// living process is left in the group or 2 s have passed: a fork bomb keeps
// creating members while the first signal is delivered. Call it after the
// group leader was reaped; while the group has members its id cannot be
// reused. Zombies (killed members their new parent has not reaped yet) end
// the loop too: they run nothing.
func KillGroup(pgid int) {
	if pgid <= 1 {
		return
	}
	deadline := time.Now().Add(groupKillFor)
	for {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err == syscall.ESRCH || err == syscall.EPERM {
			return
		}
		time.Sleep(time.Millisecond)
		if !groupAlive(pgid) || time.Now().After(deadline) {
			return
		}
	}
}

// groupAlive reports whether a process of group pgid is still running (not
// a zombie), from /proc. Unknown (no /proc) counts as alive.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procfs.ReadStat(pid); err == nil && st.PGRP == pgid && !st.Gone() {
			return true
		}
	}
	return false
}
