package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/pyrunner"
	"github.com/orqest/sandbox/validator"
)

// Version is the backend's version, reported by Info.
const Version = "0.1.0"

// Defaults applied when a request leaves a limit at zero (ORIGINAL.md:
// timeout_s=5.0, memory_mb=128).
const (
	DefaultPython         = "/usr/bin/python3"
	DefaultTimeout        = 5 * time.Second
	DefaultMemoryMB       = 128
	DefaultMaxOutputBytes = 1 << 20
	// MaxArgsBytes caps the JSON args of one execution.
	MaxArgsBytes = 1 << 20
	// fallbackMaxCodeBytes applies when the rules table names no limit.
	fallbackMaxCodeBytes = 64 << 10
	// maxResponseSlack is what the fd-3 reader accepts beyond
	// max_output_bytes (the envelope, an error text, findings).
	maxResponseSlack = 1 << 20
	// drainGrace bounds how long we wait for pipes to reach EOF after the
	// child was reaped (a descendant that escaped the process group could
	// hold them open).
	drainGrace = 250 * time.Millisecond
)

// ModeSpawn runs one fresh interpreter per execution.
const ModeSpawn = "spawn"

// DefaultMode is the mode used when the config names none.
const DefaultMode = ModeForkServer

// Config is the backend's `config {}` block.
type Config struct {
	// Python is the interpreter binary. Never a pyenv shim: a shim is a
	// shell script that costs 50-130 ms per start.
	Python string `json:"python"`
	// Mode is "forkserver" (default: a warm sealed zygote forks a fresh
	// child per execution) or "spawn" (a fresh interpreter per execution).
	Mode string `json:"mode"`
	// Preload lists modules the fork-server imports once, so children
	// start with them (the user still needs them in allowed_imports).
	Preload []string `json:"preload"`
	// Require lists capabilities that must be in force; a missing one fails
	// Configure with ErrFailedPrecondition (e.g. "network_isolation",
	// "filesystem_isolation", "seccomp").
	Require []string `json:"require"`
}

// testHooks are seams for this package's tests only. They are unexported
// fields of Backend: nothing in a `config {}` block (decoded with
// DisallowUnknownFields into Config) can reach them.
type testHooks struct {
	// skipValidation skips the plugin's Go validator, and rules replaces
	// the rules table the in-child checker and builtins come from: the
	// containment tests run hostile code with the validator out of the way
	// to show that the kernel layers hold on their own.
	skipValidation bool
	rules          json.RawMessage
	// disable lists sealing layers not to attempt (degradation tests).
	disable []string
	// program replaces pyrunner.Program() (e.g. without the in-child
	// checker, for the containment tests).
	program string
}

// argv returns the interpreter's argument vector for the runner program.
func (b *Backend) argv(python string, extra ...string) []string {
	prog := pyrunner.Program()
	if b.test.program != "" {
		prog = b.test.program
	}
	a := append([]string{python}, pyrunner.PythonFlags...)
	return append(append(a, "-c", prog), extra...)
}

// Backend is the tier-1 subprocess sandbox. It is safe for concurrent use.
type Backend struct {
	shared.NoSessions

	logger       hclog.Logger
	validator    *validator.Validator
	rules        json.RawMessage
	maxCodeBytes int

	mu   sync.RWMutex
	cfg  Config
	seal *sealInfo // layers in force for cfg; nil until probed

	fsMu  sync.Mutex
	fs    *forkServer
	fsKey string

	// onSpawn, when set (tests), is told the pid and working directory of
	// every child right after it starts ("" in fork-server mode).
	onSpawn func(pid int, dir string)

	warned sync.Once

	test testHooks
}

// warnMissing logs, once per backend, the one WARNING that names every
// sealing layer not in force here.
func (b *Backend) warnMissing(s *sealInfo) {
	if len(s.Missing) == 0 {
		return
	}
	b.warned.Do(func() {
		b.logger.Warn("tier-1 sealing is incomplete on this host; NOT enforced: "+s.missingText(),
			"in_force", s.Layers)
	})
}

var _ shared.Sandbox = (*Backend)(nil)

// NewBackend returns a Backend with the default configuration.
func NewBackend(logger hclog.Logger) *Backend {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	rules := validator.RulesJSON()
	b := &Backend{
		logger:       logger,
		validator:    validator.New(validator.WithCache(validator.DefaultCacheSize)),
		rules:        json.RawMessage(rules),
		maxCodeBytes: fallbackMaxCodeBytes,
		cfg:          Config{Python: DefaultPython, Mode: DefaultMode},
	}
	var table struct {
		Limits struct {
			MaxCodeBytes int `json:"max_code_bytes"`
		} `json:"limits"`
	}
	if err := json.Unmarshal(rules, &table); err == nil && table.Limits.MaxCodeBytes > 0 {
		b.maxCodeBytes = table.Limits.MaxCodeBytes
	}
	return b
}

func (b *Backend) config() Config {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.cfg
}

// sealFor returns the sealing layers in force for cfg, probing once.
func (b *Backend) sealFor(ctx context.Context, cfg Config) (*sealInfo, error) {
	b.mu.RLock()
	s := b.seal
	same := b.cfg.Python == cfg.Python
	b.mu.RUnlock()
	if s != nil && same {
		return s, nil
	}
	s, err := b.probeSeal(ctx, cfg.Python, b.test.disable)
	if err != nil {
		return nil, err
	}
	b.warnMissing(s)
	b.mu.Lock()
	if b.cfg.Python == cfg.Python {
		b.seal = s
	}
	b.mu.Unlock()
	return s, nil
}

// Info describes the backend. Capabilities lists only what is really in
// force: the sealing layers are probed on this kernel (once per process).
func (b *Backend) Info(ctx context.Context, _ shared.InfoRequest) (shared.InfoResponse, error) {
	var caps []shared.Capability
	if s, err := b.sealFor(ctx, b.config()); err == nil {
		caps = s.caps()
	} else {
		b.logger.Warn("cannot probe the sealing layers; declaring none", "error", err)
		caps = (*sealInfo)(nil).caps()
	}
	return shared.InfoResponse{
		Name:         "subprocess",
		Tier:         1,
		Version:      Version,
		APIVersions:  []int{shared.APIVersion},
		Capabilities: caps,
		ConfigSchema: []shared.ConfigAttribute{
			{Name: "python", Type: "string", Description: "Python interpreter binary (default " + DefaultPython + "; never a pyenv shim)"},
			{Name: "mode", Type: "string", Description: `"forkserver" (default): a warm, sealed zygote forks a fresh child per execution; "spawn": a fresh interpreter per execution`},
			{Name: "preload", Type: "list(string)", Description: "modules the fork-server imports once so children start with them (allowed_imports still governs what user code may import)"},
			{Name: "require", Type: "list(string)", Description: `capabilities that must be in force, e.g. ["network_isolation", "filesystem_isolation", "seccomp"]; a missing one fails startup`},
		},
		Description: "Tier 1: a fresh Python process per execution (forked from a warm zygote, or spawned) with RLIMIT_AS, RLIMIT_CPU, RLIMIT_NOFILE, RLIMIT_FSIZE, an outer wall clock, an empty environment; where the kernel allows: an unprivileged uid, no_new_privs, a user + network namespace (no network), Landlock (read the stdlib only, write nothing) and a seccomp filter (no sockets, exec, new processes, ptrace, mount, ...).",
	}, nil
}

// Shutdown stops the fork-server, if one runs, and every child it has.
func (b *Backend) Shutdown() {
	b.fsMu.Lock()
	fs := b.fs
	b.fs, b.fsKey = nil, ""
	b.fsMu.Unlock()
	if fs != nil {
		fs.close()
	}
}

// forkServer returns the running zygote for cfg, (re)starting it when it
// died or the configuration changed.
func (b *Backend) forkServer(cfg Config, s *sealInfo, rules json.RawMessage) (*forkServer, error) {
	fcfg := pyrunner.ForkServerConfig{Preload: cfg.Preload, Seal: s.seal(b.test.disable), Rules: rules}
	keyJSON, _ := json.Marshal(fcfg)
	key := cfg.Python + "\x00" + string(keyJSON) + "\x00" + b.test.program
	b.fsMu.Lock()
	defer b.fsMu.Unlock()
	if b.fs != nil && b.fsKey == key && b.fs.alive() {
		return b.fs, nil
	}
	if old := b.fs; old != nil {
		if old.alive() {
			b.logger.Debug("fork-server configuration changed; restarting", "pid", old.pid)
		} else {
			b.logger.Warn("fork-server died; restarting", "pid", old.pid, "error", old.deadErr())
		}
		b.fs = nil
		go old.close()
	}
	fs, err := startForkServer(b.argv(cfg.Python, pyrunner.ForkServerArg), fcfg, b.logger)
	if err != nil {
		return nil, err
	}
	b.fs, b.fsKey = fs, key
	return fs, nil
}

// Configure applies the `config {}` block and checks the interpreter works.
func (b *Backend) Configure(ctx context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	cfg := Config{Python: DefaultPython, Mode: DefaultMode}
	if len(bytes.TrimSpace(req.Config)) > 0 && string(bytes.TrimSpace(req.Config)) != "null" {
		dec := json.NewDecoder(bytes.NewReader(req.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return shared.ConfigureResponse{}, fmt.Errorf("subprocess config: %v: %w", err, shared.ErrInvalidArgument)
		}
		if cfg.Python == "" {
			cfg.Python = DefaultPython
		}
		if cfg.Mode == "" {
			cfg.Mode = DefaultMode
		}
	}
	switch cfg.Mode {
	case ModeSpawn, ModeForkServer:
	default:
		return shared.ConfigureResponse{}, fmt.Errorf(`subprocess config: unknown mode %q (want "forkserver" or "spawn"): %w`, cfg.Mode, shared.ErrInvalidArgument)
	}
	known := knownCaps()
	for _, r := range cfg.Require {
		if !slices.Contains(known, r) {
			return shared.ConfigureResponse{}, fmt.Errorf("subprocess config: require: unknown capability %q (known: %s): %w",
				r, strings.Join(known, ", "), shared.ErrInvalidArgument)
		}
	}
	for _, m := range cfg.Preload {
		if !validModuleName(m) {
			return shared.ConfigureResponse{}, fmt.Errorf("subprocess config: preload: %q is not a module name: %w", m, shared.ErrInvalidArgument)
		}
	}
	python, err := checkPython(cfg.Python)
	if err != nil {
		return shared.ConfigureResponse{}, err
	}
	cfg.Python = python

	// Which sealing layers does this kernel give us? Required ones must be
	// there; the others are reported once, loudly.
	seal, err := b.probeSeal(ctx, python, b.test.disable)
	if err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("subprocess config: python %q failed its self-test: %v: %w", python, err, shared.ErrUnavailable)
	}
	caps := seal.caps()
	var lacking []string
	for _, r := range cfg.Require {
		if !slices.Contains(caps, shared.Capability(r)) {
			lacking = append(lacking, r)
		}
	}
	if len(lacking) > 0 {
		return shared.ConfigureResponse{}, fmt.Errorf("subprocess config: required capabilities not available on this host: %s (not enforced: %s): %w",
			strings.Join(lacking, ", "), seal.missingText(), shared.ErrFailedPrecondition)
	}
	b.warnMissing(seal)

	// Self-test: the interpreter must run the runner end to end, sealed, in
	// the configured mode (this starts the fork-server).
	var res shared.ExecutionResult
	if cfg.Mode == ModeForkServer {
		res, err = b.runFork(ctx, cfg, seal, pyrunner.Request{Code: "return 1+1", MemoryMB: DefaultMemoryMB}, 10*time.Second, DefaultMaxOutputBytes, b.rules)
	} else {
		res, err = b.runSpawn(ctx, cfg, pyrunner.Request{Code: "return 1+1", MemoryMB: DefaultMemoryMB, Seal: seal.seal(b.test.disable)}, 10*time.Second, DefaultMaxOutputBytes)
	}
	if err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("subprocess config: python %q failed its self-test: %v: %w", python, err, shared.ErrUnavailable)
	}
	if !res.Success || string(res.Output) != "2" {
		return shared.ConfigureResponse{}, fmt.Errorf("subprocess config: python %q failed its self-test (%s: %s; stderr: %s): %w",
			python, res.ErrorKind, res.Error, strings.TrimSpace(res.Stderr), shared.ErrUnavailable)
	}

	b.mu.Lock()
	b.cfg = cfg
	b.seal = seal
	b.mu.Unlock()
	if cfg.Mode != ModeForkServer {
		b.Shutdown() // a zygote of an earlier configuration is not needed
	}
	b.logger.Debug("configured", "python", cfg.Python, "mode", cfg.Mode, "layers", seal.Layers)
	return shared.ConfigureResponse{}, nil
}

// validModuleName accepts dotted Python identifiers (ASCII).
func validModuleName(m string) bool {
	if m == "" {
		return false
	}
	for _, part := range strings.Split(m, ".") {
		if part == "" || (part[0] >= '0' && part[0] <= '9') {
			return false
		}
		for _, r := range part {
			if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// checkPython resolves and checks the interpreter path.
func checkPython(p string) (string, error) {
	if !filepath.IsAbs(p) {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("subprocess config: python %q not found: %v: %w", p, err, shared.ErrUnavailable)
		}
		p = lp
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("subprocess config: python %q not found: %v: %w", p, err, shared.ErrUnavailable)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("subprocess config: python %q is not a regular file: %w", p, shared.ErrInvalidArgument)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("subprocess config: python %q is not executable: %w", p, shared.ErrInvalidArgument)
	}
	if f, err := os.Open(p); err == nil {
		head := make([]byte, 2)
		n, _ := io.ReadFull(f, head)
		f.Close()
		if n == 2 && string(head) == "#!" {
			return "", fmt.Errorf("subprocess config: python %q is a script (a pyenv shim?), not an interpreter binary; point it at the real interpreter, e.g. %s: %w",
				p, DefaultPython, shared.ErrInvalidArgument)
		}
	}
	return p, nil
}

func (b *Backend) checkCode(code string) error {
	if len(code) > b.maxCodeBytes {
		return fmt.Errorf("code is %d bytes, over the limit of %d bytes: %w", len(code), b.maxCodeBytes, shared.ErrInvalidArgument)
	}
	return nil
}

// Validate runs the static checks.
func (b *Backend) Validate(ctx context.Context, req shared.ValidateRequest) (shared.ValidateResponse, error) {
	if err := b.checkCode(req.Code); err != nil {
		return shared.ValidateResponse{}, err
	}
	return shared.ValidateResponse{Findings: b.validator.Check(ctx, req.Code, req.AllowedImports)}, nil
}

// Execute validates req.Code and runs it in a fresh interpreter.
func (b *Backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	start := time.Now()
	timeout, memMB, maxOut := req.Timeout, req.MemoryMB, req.MaxOutputBytes
	if timeout < 0 || memMB < 0 || maxOut < 0 {
		return shared.ExecuteResponse{}, fmt.Errorf("negative limit (timeout %v, memory_mb %d, max_output_bytes %d): %w", timeout, memMB, maxOut, shared.ErrInvalidArgument)
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if memMB == 0 {
		memMB = DefaultMemoryMB
	}
	if maxOut == 0 {
		maxOut = DefaultMaxOutputBytes
	}
	if err := b.checkCode(req.Code); err != nil {
		return shared.ExecuteResponse{}, err
	}
	if len(req.Args) > MaxArgsBytes {
		return shared.ExecuteResponse{}, fmt.Errorf("args are %d bytes, over the limit of %d bytes: %w", len(req.Args), MaxArgsBytes, shared.ErrInvalidArgument)
	}
	args, err := pyrunner.NormalizeArgs(req.Args)
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	limits := shared.Limits{TimeoutMS: timeout.Milliseconds(), MemoryMB: memMB, MaxOutputBytes: maxOut}

	rules := b.rules
	if b.test.skipValidation {
		rules = b.test.rules
	} else if findings := b.validator.Check(ctx, req.Code, req.AllowedImports); len(findings) > 0 {
		return shared.ExecuteResponse{Result: shared.ExecutionResult{
			Success:    false,
			Error:      (&shared.ValidationError{Findings: findings}).Error(),
			ErrorKind:  shared.KindValidation,
			Findings:   findings,
			DurationMS: msSince(start),
			Limits:     limits,
		}}, nil
	}

	cfg := b.config()
	seal, err := b.sealFor(ctx, cfg)
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	preq := pyrunner.Request{
		Code:           req.Code,
		Args:           args,
		AllowedImports: req.AllowedImports,
		MemoryMB:       memMB,
	}
	var res shared.ExecutionResult
	if cfg.Mode == ModeForkServer {
		res, err = b.runFork(ctx, cfg, seal, preq, timeout, maxOut, rules)
	} else {
		preq.Rules = rules
		preq.Seal = seal.seal(b.test.disable)
		res, err = b.runSpawn(ctx, cfg, preq, timeout, maxOut)
	}
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	res.Limits = limits
	res.DurationMS = msSince(start)
	return shared.ExecuteResponse{Result: res}, nil
}

func msSince(t time.Time) float64 {
	return float64(time.Since(t).Microseconds()) / 1000
}

// captured is what a capped pipe reader collected.
type captured struct {
	data      []byte
	truncated bool
}

// capture reads r to EOF (or until r is closed), keeping at most limit bytes
// and draining the rest so the writer never blocks on a full pipe.
//
// It keeps up to utf8.UTFMax bytes beyond limit so that the caller can cut
// at limit on a rune boundary (pyrunner.TruncateUTF8).
func capture(r *os.File, limit int, out chan<- captured) {
	var c captured
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			if len(c.data)+n > limit {
				c.truncated = true
			}
			if room := limit + utf8.UTFMax - len(c.data); room > 0 {
				c.data = append(c.data, chunk[:min(n, room)]...)
			}
		}
		if err != nil {
			break
		}
	}
	out <- c
}

// runSpawn spawns one interpreter for req and classifies its outcome. A Go
// error means infrastructure failure (or ctx cancellation); everything the
// user's code did is in the result. req.Rules defaults to the rules table.
func (b *Backend) runSpawn(ctx context.Context, cfg Config, req pyrunner.Request, timeout time.Duration, maxOut int) (shared.ExecutionResult, error) {
	var res shared.ExecutionResult
	cpuSeconds := int(math.Ceil(timeout.Seconds())) + 1
	if req.Rules == nil {
		req.Rules = b.rules
	}
	req.MaxOutputBytes = maxOut
	req.CPUSeconds = cpuSeconds
	payload, err := req.Encode()
	if err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("execute: %w", err)
	}

	dir, err := os.MkdirTemp("", "orqest-sandbox-")
	if err != nil {
		return res, fmt.Errorf("execute: temporary directory: %v: %w", err, shared.ErrInternal)
	}
	defer os.RemoveAll(dir)

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
	respR, respW, err4 := pipe()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return res, fmt.Errorf("execute: pipes: %v: %w", err, shared.ErrInternal)
	}

	argv := b.argv(cfg.Python)
	cmd := &exec.Cmd{
		Path:       cfg.Python,
		Args:       argv,
		Env:        []string{}, // empty environment (and -I ignores PYTHON* anyway)
		Dir:        dir,
		Stdin:      stdinR,
		Stdout:     stdoutW,
		Stderr:     stderrW,
		ExtraFiles: []*os.File{respW}, // fd 3
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // own process group: one kill reaches every descendant
			Pdeathsig: syscall.SIGKILL, // the child dies with the plugin
		},
	}
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("execute: start %s: %v: %w", cfg.Python, err, shared.ErrUnavailable)
	}
	pid := cmd.Process.Pid
	killGroup := func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }
	// The child's ends are now the child's.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	respW.Close()

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
	reap := func() *os.ProcessState {
		<-exited
		killGroup() // anything the child left in its group
		_ = cmd.Wait()
		return cmd.ProcessState
	}

	// Limits before the request is written: the user's code runs only after
	// the runner has read stdin.
	memBytes := uint64(req.MemoryMB) << 20
	if err := errors.Join(
		unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: memBytes, Max: memBytes}, nil),
		unix.Prlimit(pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: uint64(cpuSeconds), Max: uint64(cpuSeconds) + 1}, nil),
		// No core dumps: a child killed by SIGXCPU/SIGSEGV/SIGABRT must not
		// write (or hand systemd-coredump) a copy of its memory.
		unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}, nil),
	); err != nil {
		killGroup()
		reap()
		return res, fmt.Errorf("execute: applying resource limits to the child: %v: %w", err, shared.ErrInternal)
	}
	if b.onSpawn != nil {
		b.onSpawn(pid, dir)
	}

	stdoutC := make(chan captured, 1)
	stderrC := make(chan captured, 1)
	respC := make(chan captured, 1)
	go capture(stdoutR, maxOut, stdoutC)
	go capture(stderrR, maxOut, stderrC)
	go capture(respR, maxOut+maxResponseSlack, respC)
	go func() {
		_, _ = stdinW.Write(payload) // EPIPE if the child died: classified below
		stdinW.Close()
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var timedOut, cancelled bool
	select {
	case <-exited:
	case <-timer.C:
		timedOut = true
		killGroup()
	case <-ctx.Done():
		cancelled = true
		killGroup()
	}
	state := reap()

	// Collect the pipes; bounded in case an escaped descendant holds them.
	graceOver := make(chan struct{})
	grace := time.AfterFunc(drainGrace, func() { close(graceOver) })
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
	resp := collect(respC, respR)
	out := collect(stdoutC, stdoutR)
	errOut := collect(stderrC, stderrR)

	res.Stdout = pyrunner.TruncateUTF8(string(out.data), maxOut)
	res.Stderr = pyrunner.TruncateUTF8(string(errOut.data), maxOut)
	res.StdoutTruncated = out.truncated
	res.StderrTruncated = errOut.truncated

	if state == nil {
		return res, fmt.Errorf("execute: waiting for the child failed: %w", shared.ErrInternal)
	}
	b.logger.Debug("child finished", "pid", pid, "state", state.String(), "timed_out", timedOut, "cancelled", cancelled)

	if cancelled {
		return res, fmt.Errorf("execute: %w", ctx.Err())
	}
	if timedOut {
		res.ErrorKind = shared.KindTimeout
		res.Error = fmt.Sprintf("sandbox execution timed out after %.2fs", timeout.Seconds())
		return res, nil
	}
	if !resp.truncated && len(bytes.TrimSpace(resp.data)) > 0 { // a truncated response is unusable
		r, err := pyrunner.DecodeResponse(resp.data)
		if err == nil {
			if err := r.Apply(&res); err != nil {
				return res, fmt.Errorf("execute: %w", err)
			}
			return res, nil
		}
		b.logger.Warn("undecodable response from child", "pid", pid, "error", err)
	}

	// No (usable) response: the child was killed or crashed.
	ws, _ := state.Sys().(syscall.WaitStatus)
	res.ErrorKind, res.Error = classifyDeath(ws, state.UserTime()+state.SystemTime(), req.MemoryMB, cpuSeconds, res.Stderr)
	return res, nil
}

// classifyDeath explains a child that exited without a response.
func classifyDeath(ws syscall.WaitStatus, cpu time.Duration, memMB, cpuSeconds int, stderr string) (shared.ErrorKind, string) {
	if ws.Signaled() {
		sig := ws.Signal()
		switch {
		case sig == syscall.SIGXCPU || (sig == syscall.SIGKILL && cpu >= time.Duration(cpuSeconds)*time.Second):
			return shared.KindTimeout, fmt.Sprintf("sandbox execution exceeded its CPU time limit of %ds", cpuSeconds)
		case memMB > 0 && (sig == syscall.SIGKILL || sig == syscall.SIGSEGV || sig == syscall.SIGABRT || sig == syscall.SIGBUS):
			return shared.KindMemory, fmt.Sprintf("sandbox process killed by %v under a memory limit of %d MB", sig, memMB)
		}
		return shared.KindKilled, fmt.Sprintf("sandbox process killed by %v", sig)
	}
	if strings.Contains(stderr, "MemoryError") {
		return shared.KindMemory, fmt.Sprintf("sandbox process ran out of memory (limit %d MB)", memMB)
	}
	msg := fmt.Sprintf("sandbox process exited with status %d without a result", ws.ExitStatus())
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
