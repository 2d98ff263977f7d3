package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// callLimits are the runtime's own limits of one execution, for
// shared.Prepare: the most a call may ask for and the caps of its code and
// args. A call arrives with its limits resolved by the host; one that
// leaves a limit at zero (a plugin called directly) gets the contract's
// default from Prepare, as every tier does. The container's own cgroup
// limits (memory, pids, cpus) bound everything the runtime and its
// children do together.
var callLimits = shared.Defaults{
	MaxCodeBytes: 256 << 10,
	MaxArgsBytes: shared.DefaultMaxArgsBytes,
	Ceiling:      shared.Ceiling{Timeout: 10 * time.Minute, MemoryMB: 16 << 10, MaxOutputBytes: 16 << 20},
}

const (
	// maxZygotes bounds the warm fork-servers of one container (one per
	// agent in use; the least recently used one goes first). Each is an
	// interpreter plus its pool of pre-forked children, all counted against
	// the container's memory and pids limits.
	maxZygotes = 8
	// zygotePool is how many sealed children each zygote keeps ready.
	zygotePool = 2
	// maxNotebooks bounds the stateful interpreters of one container (one
	// per agent that made a stateful call). Each holds its globals for the
	// session's life, so none is evicted: an agent over the bound is
	// refused.
	maxNotebooks = 8
)

// layerUID is the sealing layer that drops a Python process from root to
// an unprivileged uid (the runner's seal).
const layerUID = "unprivileged_uid"

// Execution modes of the runtime.
const (
	modeForkServer = "forkserver" // default: a warm, sealed zygote per agent
	modeSpawn      = "spawn"      // one interpreter per call (fallback)
)

// executor runs the shared Python runner through internal/pyproc, the
// package tier 1 uses too: by default in a warm fork-server per agent (a
// zygote per (agent, interpreter, site-packages), started lazily, whose
// working directory is the agent's directory and whose children may read
// only the stdlib and that agent's site-packages), every child sealed with
// the layers the probe found in force in this container.
type executor struct {
	python  string
	rules   json.RawMessage
	workdir string
	envs    *envManager // per-agent venvs and dependencies (venv.go); nil: none
	log     *slog.Logger
	// mode is modeForkServer ("" too) or modeSpawn.
	mode string
	// core is the fork-server's C loop (runner/forkcore as a shared
	// object, -forkcore); nil: the zygotes loop in Python.
	core []byte
	// classes: bodies may define classes (runner.Request.Classes).
	classes bool
	// disable lists sealing layers not to attempt: a seam for tests only
	// (no flag or hello field reaches it).
	disable []string
	// prepare is the policy's allowed_imports (-prepare): every zygote,
	// and the default agent's stateful interpreter, imports them before
	// its first call. stateful (-stateful) starts that interpreter while
	// the session opens.
	prepare  []string
	stateful bool
	// memoryCgroup (-memory-cgroup): a cgroup bounds the runtime's
	// memory, so calls run without RLIMIT_AS (their memory is resident
	// memory, the kernel's to enforce) and an OOM kill is a memory error.
	memoryCgroup bool
	// system holds the image's system site-packages (Debian's
	// dist-packages: numpy, pandas, matplotlib in the data-science image)
	// and what Landlock must let a child read to load them; nil when the
	// image has none. See systemPackages.
	system *systemSite
	// egress is the session's egress proxy (egressProxy); nil: none, and
	// the children have no network at all.
	egress *runner.Egress

	// noFork is set when a fork-server could not start here: the
	// executor then spawns (sealed the same way) and says so once.
	noFork atomic.Bool
	forked atomic.Bool // a fork-server has started here at least once

	mkdirMu sync.Mutex

	sealMu sync.Mutex
	seal   map[string]*pyproc.SealInfo // probed once per interpreter

	// zygotes holds the warm fork-servers, one per agent (at most
	// maxZygotes), for the interpreter and extra sys.path they serve.
	zygotes   pyproc.Pool
	zygoteSet sync.Once // sets the pool's bound and restart log

	// files is the session's workspace (files.go); "" means
	// rtproto.FilesDir's place under workdir.
	files string

	// notebooks are the stateful interpreters, one per agent (notebook.go).
	nbMu      sync.Mutex
	notebooks map[string]*notebook
	// kept are the globals a resumed session brought for agents without
	// an interpreter yet (keep.go).
	kept keptGlobals
}

func (e *executor) logger() *slog.Logger {
	if e.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.log
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
	// 0711: the runtime owns it; the agent's Python processes (another
	// uid, see agent.go) may enter it (their working directory) but not
	// list it, and write nothing anywhere (Landlock).
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", fmt.Errorf("agent directory: %w", err)
	}
	return dir, nil
}

// singleThreaded returns the environment variables that keep the native
// libraries' thread pools (OpenBLAS, OpenMP, MKL, numexpr, Accelerate) to
// the calling thread: a stateful interpreter keeps no threads between
// calls, and a container's CPUs are few.
func singleThreaded() []string {
	return []string{
		"OPENBLAS_NUM_THREADS=1",
		"OMP_NUM_THREADS=1",
		"MKL_NUM_THREADS=1",
		"NUMEXPR_NUM_THREADS=1",
		"VECLIB_MAXIMUM_THREADS=1",
	}
}

// pythonEnv is the environment of every Python process the runtime
// starts: single-threaded native pools, and matplotlib headless with its
// config and cache in cacheDir (outside the user's workspace).
func (e *executor) pythonEnv() []string {
	env := append(singleThreaded(), "MPLBACKEND=agg")
	if dir, err := e.cacheDir(); err == nil {
		env = append(env, "MPLCONFIGDIR="+filepath.Join(dir, mplConfigDir))
	}
	return env
}

// sealing returns the sealing layers in force here, probing once (a
// spawned runner seals itself as far as this container lets it and
// reports). Layers the container refuses (typically the user and network
// namespaces under Docker's seccomp profile) are logged once as not
// enforced; every layer found is then required of every child.
func (e *executor) sealing(ctx context.Context, python string) (*pyproc.SealInfo, error) {
	e.sealMu.Lock()
	defer e.sealMu.Unlock()
	if s := e.seal[python]; s != nil {
		return s, nil
	}
	s, err := pyproc.Probe(ctx, runner.Argv(python), e.disable, e.workdir, e.logger())
	if err != nil {
		return nil, err
	}
	// Root's children must leave root: user code on the runtime's uid
	// could reach the tool library (and as root, own it). Fail closed.
	if os.Geteuid() == 0 && !slices.Contains(s.Layers, layerUID) {
		return nil, fmt.Errorf("the runtime runs as root and its Python processes cannot drop to an unprivileged uid (%s); refusing to run code (the container needs CAP_SETUID and CAP_SETGID): %w",
			s.Missing[layerUID], shared.ErrUnavailable)
	}
	if e.seal == nil {
		e.seal = map[string]*pyproc.SealInfo{}
	}
	if len(e.seal) == 0 { // logged once, for the first interpreter (the system one)
		if len(s.Missing) > 0 {
			e.logger().Warn("sealing of the Python children is incomplete in this container; NOT enforced: "+s.MissingText(nil), "in_force", s.Layers)
		} else {
			e.logger().Info("sealing of the Python children: every layer in force", "in_force", s.Layers)
		}
	}
	e.seal[python] = s
	return s, nil
}

// sealLayers reports the layers in force for the system interpreter and
// the missing ones (nil before the first probe).
func (e *executor) sealLayers() ([]string, map[string]string) {
	e.sealMu.Lock()
	defer e.sealMu.Unlock()
	if s := e.seal[e.python]; s != nil {
		return s.Layers, s.Missing
	}
	return nil, nil
}

// forkServer returns agent's warm zygote for the interpreter python with
// extraPath on sys.path, starting it (or replacing an older one of that
// agent) when needed.
func (e *executor) forkServer(agent, dir, python string, extraPath, readPath []string, seal *pyproc.SealInfo) (*pyproc.ForkServer, error) {
	key := python + "\x00" + strings.Join(extraPath, "\x00") + "\x00\x00" + strings.Join(readPath, "\x00")
	e.zygoteSet.Do(func() {
		e.zygotes.Max = maxZygotes
		e.zygotes.OnRestart = func(agent string, old *pyproc.ForkServer) {
			e.logger().Warn("fork-server died; restarting", "agent", agent, "pid", old.PID(), "error", old.Err())
		}
	})
	return e.zygotes.Get(agent, key, func() (*pyproc.ForkServer, error) {
		fs, err := pyproc.StartForkServer(runner.ForkServerArgv(python), runner.ForkServerConfig{
			Seal:           e.childSeal(seal, readPath),
			Rules:          e.rules,
			Pool:           zygotePool,
			Prepare:        e.prepare,
			Classes:        e.classes,
			ExtraSysPath:   extraPath,
			ExtraReadPaths: e.system.dataDirs(),
		}, pyproc.ForkServerOptions{Logger: e.logger(), Stderr: logWriter{e.logger()}, Dir: dir, Core: e.core, Env: e.pythonEnv()})
		if err != nil {
			return nil, err
		}
		e.forked.Store(true)
		inC, why := fs.Core()
		if len(e.core) > 0 && !inC {
			e.logger().Warn("fork-server: the C loop did not load; the zygote loops in Python (slower)", "agent", agent, "reason", why)
		}
		e.logger().Debug("fork-server started", "agent", agent, "pid", fs.PID(), "layers", fs.Layers(), "c_loop", inC, "hot_pages", fs.HotPages())
		return fs, nil
	})
}

// warm probes the sealing layers and starts the default agent's zygote
// (and, in a session stateful by default, its stateful interpreter), the
// policy's modules imported in each, so that a session's first call finds
// them ready. It runs before the hello line (e.envs is not set yet): the
// default agent has no venv then, it runs the system interpreter. Errors
// are left for that call to report.
func (e *executor) warm(ctx context.Context) {
	start := time.Now()
	seal, err := e.sealing(ctx, e.python)
	if err != nil {
		return
	}
	dir, err := e.agentDir("default")
	if err != nil {
		return
	}
	extra, read := e.system.paths(nil)
	if e.mode != modeSpawn {
		_, _ = e.forkServer("default", dir, e.python, extra, read, seal)
	}
	if e.stateful {
		_, _, _ = e.notebook(ctx, "default", dir, e.python, notebookKey(e.python, extra, read), extra, read, seal)
	}
	e.logger().Info("session prepared", "modules", e.prepare, "stateful", e.stateful, "ms", time.Since(start).Milliseconds())
}

// shutdown stops every zygote and its children, and every stateful
// interpreter.
func (e *executor) shutdown() {
	e.zygotes.Close()
	e.closeNotebooks()
}

// run executes one call. A Go error is an infrastructure failure; everything
// the user's code did is in the result. onOutput, when set, gets the
// child's stdout and stderr as they are read (pyproc.Job.OnOutput).
func (e *executor) run(ctx context.Context, a rtproto.ExecuteArgs, onOutput func(stream string, data []byte)) (res shared.ExecutionResult, err error) {
	start := time.Now()
	p, err := shared.Prepare(shared.ExecuteRequest{
		Code: a.Code, Args: a.Args,
		Timeout: time.Duration(a.TimeoutS * float64(time.Second)), MemoryMB: a.MemoryMB, MaxOutputBytes: a.MaxOutputBytes,
	}, callLimits)
	if err != nil {
		return res, fmt.Errorf("execute: %w", err)
	}
	res.Limits = p.Limits()
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
	extraPath, readPath := e.system.paths(extraPath)
	if python == "" {
		python = e.python
	}
	// The call's wall clock starts here (its dependencies are in place):
	// waiting for the sealing probe or the zygote's start (a session's
	// first call, while the warm-up still runs) counts against it, so a
	// runaway first call ends at its timeout like any other.
	clock := time.Now()
	deadline := clock.Add(p.Resolved.Timeout)
	timedOut := func() shared.ExecutionResult {
		r := (&pyproc.Job{Limits: p.Resolved}).TimedOut()
		r.Limits = p.Limits()
		r.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		return r
	}
	seal, ok, err := within(ctx, deadline, func() (*pyproc.SealInfo, error) { return e.sealing(ctx, python) })
	if !ok {
		return timedOut(), nil
	}
	if err != nil {
		return res, err
	}
	files, err := e.filesDir() // files.go
	if err != nil {
		return res, err
	}
	before := snapshot(files)
	defer func() {
		if err == nil {
			res.Artifacts = artifacts(files, before)
		}
	}()
	job := pyproc.Job{
		Request: runner.Request{
			Code:           a.Code,
			Args:           p.Args,
			AllowedImports: a.AllowedImports,
			Rules:          e.rules,
			ExtraSysPath:   extraPath,
			ExtraReadPaths: e.system.dataDirs(),
			Classes:        e.classes,
			Workspace:      files,
		},
		Limits:   p.Resolved,
		Dir:      dir,
		OnOutput: onOutput,
		Started:  clock,
	}
	if e.memoryCgroup {
		// The cgroup bounds resident memory; an address-space cap would
		// refuse what numpy and pandas map but never touch.
		job.Limits.MemoryMB = 0
	}
	if a.Stateful {
		res, err = e.runStateful(ctx, agent, dir, python, extraPath, readPath, seal, job)
		if err != nil {
			return res, err
		}
		res.Limits = p.Limits()
		res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		return res, nil
	}
	var fs *pyproc.ForkServer
	if e.mode != modeSpawn && !e.noFork.Load() {
		var ok bool
		fs, ok, err = within(ctx, deadline, func() (*pyproc.ForkServer, error) {
			return e.forkServer(agent, dir, python, extraPath, readPath, seal)
		})
		if !ok {
			return timedOut(), nil
		}
		if err != nil {
			if e.forked.Load() {
				return res, err // it worked before: a failure of this call
			}
			if !e.noFork.Swap(true) {
				e.logger().Warn("no fork-server in this container; spawning one interpreter per call instead (slower, sealed the same way)", "error", err)
			}
		}
	}
	if fs != nil {
		res, err = fs.Run(ctx, job)
	} else {
		job.Request.Seal = e.childSeal(seal, readPath)
		res, err = pyproc.SpawnWith(ctx, runner.Argv(python), job, pyproc.SpawnOptions{Env: e.pythonEnv(), Core: e.core}, e.logger())
	}
	if err != nil {
		return res, err
	}
	res.Limits = p.Limits()
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	return res, nil
}

// within runs get, a call's wait for what it runs on, until deadline:
// ok is false when the deadline (the call's wall clock) came first; a
// ctx that ended first is an error. Either way get goes on in the
// background, and what it starts (a zygote, a probe) is kept for the next
// call.
func within[T any](ctx context.Context, deadline time.Time, get func() (T, error)) (v T, ok bool, err error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := get()
		done <- result{v, err}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, true, r.err
	case <-timer.C:
		return v, false, nil
	case <-ctx.Done():
		return v, true, fmt.Errorf("execute: %w", ctx.Err())
	}
}

// writePaths are the directories the children may write: the workspace
// and the libraries' cache.
func (e *executor) writePaths() []string {
	var paths []string
	if dir, err := e.filesDir(); err == nil {
		paths = append(paths, dir)
	}
	if dir, err := e.cacheDir(); err == nil {
		paths = append(paths, filepath.Join(dir, mplConfigDir))
	}
	return paths
}

// logWriter turns a zygote's stderr into log records.
type logWriter struct{ l *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	if msg := strings.TrimSpace(string(p)); msg != "" {
		w.l.Warn("fork-server stderr", "text", msg)
	}
	return len(p), nil
}
