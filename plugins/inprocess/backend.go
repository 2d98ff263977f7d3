package inprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// Version is the backend's version, reported by Info.
const Version = "0.1.0"

// Timing of the watchdog, and the config's floor. A request that leaves a
// limit at zero gets the contract's default (shared.Prepare; see
// Backend.limits for memory).
const (
	// DefaultGrace is how long after the deadline the watchdog keeps
	// interrupting a call before it declares the interpreter wedged in
	// code that cannot be interrupted (a C-level loop) and ends the
	// plugin process so the host relaunches it.
	DefaultGrace = time.Second
	// refireEvery is how often the watchdog repeats its interrupt after
	// the deadline (user code may catch the first one).
	refireEvery = 20 * time.Millisecond
	// exitDelay lets the gRPC response of the wedged call reach the host
	// before the plugin process exits.
	exitDelay = 50 * time.Millisecond
	// minMemoryMB is the smallest memory_limit_mb accepted.
	minMemoryMB = 32
)

// Config is the backend's `config {}` block.
type Config struct {
	// MemoryLimitMB, when > 0, caps the whole plugin process's address
	// space (RLIMIT_AS) at its size after start plus this many MB: a
	// coarse limit shared by every execution, not a per-call one.
	MemoryLimitMB int `json:"memory_limit_mb"`
	// GraceMS is how long after the deadline a call that ignores the
	// watchdog may run before the plugin process exits (default 1000).
	GraceMS int `json:"grace_ms"`
}

// Backend is the tier-0 backend: the shared Python runner executed by a
// CPython interpreter embedded in this process. It is safe for concurrent
// use; executions run one at a time on the interpreter thread.
type Backend struct {
	shared.NoSessions

	logger       hclog.Logger
	validator    *validator.Validator // with a verdict cache (validator.WithCache)
	maxCodeBytes int

	mu         sync.RWMutex
	cfg        Config
	configured bool // Configure succeeded with unsafe = true
	// classes is ConfigureRequest.Classes: the host sends true for tier 0
	// only when the sandbox block says classes = true.
	classes bool

	// onWedged is called once when a call could not be stopped within the
	// grace period. The plugin binary exits the process (the host sees the
	// plugin gone and relaunches it); tests leave it nil.
	onWedged func()
	memOnce  sync.Once
	baseMB   int // the process size before the first cap, in MB

	// allowRlimit lets Configure set RLIMIT_AS on this process. Only the
	// plugin binary sets it: a test process must not cap itself.
	allowRlimit bool
}

var _ shared.Sandbox = (*Backend)(nil)

// NewBackend returns an unconfigured Backend. It runs nothing until
// Configure is called with Unsafe set.
func NewBackend(logger hclog.Logger) *Backend {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	b := &Backend{
		logger:       logger,
		validator:    validator.New(validator.WithCache(validator.DefaultCacheSize)),
		maxCodeBytes: validator.MaxCodeBytes(),
	}
	return b
}

func (b *Backend) state() (Config, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.cfg, b.configured
}

// processMemoryLimitMB returns the soft RLIMIT_AS of this process in MB, 0
// when unlimited.
func processMemoryLimitMB() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 0
	}
	return int(rl.Cur >> 20)
}

// Info describes the backend. Capabilities are only what this tier really
// enforces: the watchdog's wall clock, the output caps and, when an
// RLIMIT_AS is in force on the process, a (process-wide) memory limit.
func (b *Backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	caps := []shared.Capability{shared.CapWallClockTimeout, shared.CapOutputLimit}
	if processMemoryLimitMB() > 0 {
		caps = append(caps, shared.CapMemoryLimit)
	}
	if b.features().Classes {
		caps = append(caps, shared.CapClasses)
	}
	return shared.InfoResponse{
		Name:         "inprocess",
		Tier:         0,
		Version:      Version,
		APIVersions:  []int{shared.APIVersion},
		Capabilities: caps,
		ConfigSchema: []shared.ConfigAttribute{
			{Name: "memory_limit_mb", Type: "number", Description: "coarse memory cap: RLIMIT_AS on the whole plugin process at its size after start plus this many MB, shared by every execution; 0 (default) means none"},
			{Name: "grace_ms", Type: "number", Description: "how long after its deadline a call that cannot be interrupted (a C-level loop) may run before the plugin exits and the host relaunches it (default 1000)"},
		},
		Description: "Tier 0, UNSAFE: CPython embedded in the plugin process (no isolation); the shared runner's validator, curated builtins and import shim only. Requires unsafe = true in the sandbox block.",
	}, nil
}

// errNotOptedIn is the refusal of a sandbox that did not set unsafe = true.
var errNotOptedIn = fmt.Errorf("the inprocess backend (tier 0) runs code inside the plugin process with no isolation "+
	"and refuses to start unless its sandbox block sets `unsafe = true`: %w", shared.ErrFailedPrecondition)

// features is the language the sandbox's policy allows (classes).
func (b *Backend) features() validator.Features {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return validator.Features{Classes: b.classes}
}

// Configure applies the `config {}` block. Unless req.Unsafe is set it
// refuses with shared.ErrFailedPrecondition, and the backend then runs
// nothing.
func (b *Backend) Configure(ctx context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	var cfg Config
	if err := shared.DecodeConfig("inprocess", req.Config, &cfg); err != nil {
		return shared.ConfigureResponse{}, err
	}
	if cfg.MemoryLimitMB < 0 {
		return shared.ConfigureResponse{}, shared.ConfigError("inprocess", "memory_limit_mb", nil, "memory_limit_mb must not be negative (got %d)", cfg.MemoryLimitMB)
	}
	if cfg.GraceMS < 0 {
		return shared.ConfigureResponse{}, shared.ConfigError("inprocess", "grace_ms", nil, "grace_ms must not be negative (got %d)", cfg.GraceMS)
	}
	if !req.Unsafe {
		b.mu.Lock()
		b.configured = false
		b.mu.Unlock()
		return shared.ConfigureResponse{}, errNotOptedIn
	}
	ip, err := sharedInterp()
	if err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("inprocess: %v: %w", err, shared.ErrUnavailable)
	}
	if reason, dead := ip.isDead(); dead {
		return shared.ConfigureResponse{}, errRestarting(reason)
	}
	if cfg.MemoryLimitMB > 0 {
		if err := b.applyMemoryLimit(cfg.MemoryLimitMB); err != nil {
			return shared.ConfigureResponse{}, err
		}
	}

	// Self-test: the embedded runner must run a body end to end (under a
	// default call's limits with a longer wall clock).
	st, err := b.limits(shared.ExecuteRequest{Code: "return 1+1", Timeout: 10 * time.Second}, cfg)
	if err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("inprocess: self-test: %w", err)
	}
	res, err := b.run(ctx, ip, cfg, runner.Request{Code: "return 1+1"}, st.Resolved)
	if err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("inprocess: self-test failed: %v: %w", err, shared.ErrUnavailable)
	}
	if !res.Success || string(res.Output) != "2" {
		return shared.ConfigureResponse{}, fmt.Errorf("inprocess: self-test failed (%s: %s): %w", res.ErrorKind, res.Error, shared.ErrUnavailable)
	}

	b.mu.Lock()
	b.cfg, b.configured, b.classes = cfg, true, req.Classes
	b.mu.Unlock()
	b.logger.Info("tier 0 (inprocess) enabled: user code runs inside this process without isolation", "memory_limit_mb", cfg.MemoryLimitMB)
	return shared.ConfigureResponse{}, nil
}

// applyMemoryLimit caps the whole process's address space (RLIMIT_AS) at
// what it maps now plus mb: the Go runtime and libpython already reserve a
// large, mostly untouched address space (about 1.8 GB here), so a cap that
// did not start from it would leave the user's code nothing, or everything.
func (b *Backend) applyMemoryLimit(mb int) error {
	if !b.allowRlimit {
		return fmt.Errorf("inprocess config: %w: %w", &shared.FieldError{Field: "memory_limit_mb", Reason: "memory_limit_mb is applied by the plugin binary only (it caps the whole process)"}, shared.ErrFailedPrecondition)
	}
	if mb < minMemoryMB {
		return fmt.Errorf("inprocess config: %w", &shared.FieldError{Field: "memory_limit_mb", Reason: fmt.Sprintf("memory_limit_mb %d is below the minimum of %d", mb, minMemoryMB)})
	}
	b.memOnce.Do(func() { b.baseMB = mappedMB() })
	if b.baseMB == 0 {
		return fmt.Errorf("inprocess config: cannot read the process size from /proc/self/statm: %w", shared.ErrUnavailable)
	}
	n := uint64(b.baseMB+mb) << 20
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &rl); err == nil && rl.Max != unix.RLIM_INFINITY && n > rl.Max {
		n = rl.Max
	}
	// Soft limit only: a later Configure may change it (the hard limit
	// stays where it was).
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: n, Max: rl.Max}); err != nil {
		return fmt.Errorf("inprocess config: setrlimit(RLIMIT_AS, %d MB): %w: %w", n>>20, err, shared.ErrInternal)
	}
	b.logger.Info("address-space cap applied", "base_mb", b.baseMB, "memory_limit_mb", mb, "rlimit_as_mb", n>>20)
	return nil
}

// mappedMB returns the process's current virtual size in MB (0 if unknown).
func mappedMB() int {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var pages int
	if _, err := fmt.Sscan(string(data), &pages); err != nil {
		return 0
	}
	return pages * os.Getpagesize() >> 20
}

func (b *Backend) checkCode(code string) error {
	return shared.CheckCodeSize(code, b.maxCodeBytes)
}

// Validate runs the static checks.
func (b *Backend) Validate(ctx context.Context, req shared.ValidateRequest) (shared.ValidateResponse, error) {
	if _, ok := b.state(); !ok {
		return shared.ValidateResponse{}, errNotOptedIn
	}
	if err := b.checkCode(req.Code); err != nil {
		return shared.ValidateResponse{}, err
	}
	return shared.ValidateResponse{Findings: b.validator.CheckWith(ctx, req.Code, req.AllowedImports, b.features())}, nil
}

// Execute validates req.Code and runs it on the embedded interpreter.
func (b *Backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	start := time.Now()
	cfg, ok := b.state()
	if !ok {
		return shared.ExecuteResponse{}, errNotOptedIn
	}
	p, err := b.limits(req, cfg)
	if err != nil {
		return shared.ExecuteResponse{}, err
	}

	features := b.features()
	if findings, _ := b.validator.CheckTrusting(ctx, req.Code, req.AllowedImports, features, req.Verdict); len(findings) > 0 {
		res := shared.Rejected(findings, p.Limits())
		res.DurationMS = msSince(start)
		return shared.ExecuteResponse{Result: res}, nil
	}

	ip, err := sharedInterp()
	if err != nil {
		return shared.ExecuteResponse{}, fmt.Errorf("inprocess: %v: %w", err, shared.ErrUnavailable)
	}
	res, err := b.run(ctx, ip, cfg, runner.Request{
		Code:           req.Code,
		Args:           p.Args,
		AllowedImports: req.AllowedImports,
		Classes:        features.Classes,
	}, p.Resolved)
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	res.Limits = p.Limits()
	res.DurationMS = msSince(start)
	return shared.ExecuteResponse{Result: res}, nil
}

// limits resolves the limits of req (shared.Prepare, the contract's
// defaults) with one exception: memory. A per-call memory_mb cannot be
// enforced inside one process, so the memory limit that applies, and that
// the result records, is the process-wide memory_limit_mb of cfg (0:
// none); the runner only names it in a MemoryError message.
func (b *Backend) limits(req shared.ExecuteRequest, cfg Config) (shared.Prepared, error) {
	p, err := shared.Prepare(req, shared.Defaults{MaxCodeBytes: b.maxCodeBytes})
	if err != nil {
		return p, err
	}
	p.MemoryMB = cfg.MemoryLimitMB
	return p, nil
}

func msSince(t time.Time) float64 {
	return float64(time.Since(t).Microseconds()) / 1000
}

// run hands one request to the interpreter thread and watches it: at the
// deadline (or when ctx ends) it interrupts the call, repeating every
// refireEvery; if the call is still running after the grace period, the
// interpreter is wedged in code that cannot be interrupted and the process
// must be replaced (onWedged). l are the call's limits: the wall clock and
// the output cap.
func (b *Backend) run(ctx context.Context, ip *interp, cfg Config, req runner.Request, l shared.Resolved) (shared.ExecutionResult, error) {
	var res shared.ExecutionResult
	timeout, maxOut := l.Timeout, l.MaxOutputBytes
	req = req.WithLimits(l)
	req.Rules = json.RawMessage("null") // the driver holds the parsed table
	payload, err := req.Encode()
	if err != nil {
		return res, err
	}
	if reason, dead := ip.isDead(); dead {
		return res, errRestarting(reason)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("execute: %w", err)
	}
	grace := DefaultGrace
	if cfg.GraceMS > 0 {
		grace = time.Duration(cfg.GraceMS) * time.Millisecond
	}

	j := &job{id: callIDs.Add(1), req: payload, maxOut: maxOut, done: make(chan jobResult, 1)}
	select {
	case ip.jobs <- j: // the interpreter thread took it: it runs now
	case <-ip.dead:
		reason, _ := ip.isDead()
		return res, errRestarting(reason)
	case <-ctx.Done():
		return res, fmt.Errorf("execute: %w", ctx.Err())
	}

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var (
		refire   <-chan time.Time
		graceC   <-chan time.Time
		done     = ctx.Done()
		timedOut bool
		canceled bool
		r        jobResult
	)
	var ticker *time.Ticker
	var graceT *time.Timer
	defer func() {
		if ticker != nil {
			ticker.Stop()
			graceT.Stop()
		}
	}()
	fire := func() {
		ip.interrupt(j.id)
		if ticker == nil {
			ticker = time.NewTicker(refireEvery)
			graceT = time.NewTimer(grace)
			refire, graceC = ticker.C, graceT.C
		}
	}
wait:
	for {
		select {
		case r = <-j.done:
			break wait
		case <-deadline.C:
			timedOut = true
			fire()
		case <-done:
			canceled = true
			done = nil
			fire()
		case <-refire:
			ip.interrupt(j.id)
		case <-graceC:
			return b.wedged(ip, j, timeout, grace, canceled && !timedOut, ctx)
		}
	}
	if canceled && !timedOut {
		return res, fmt.Errorf("execute: %w", ctx.Err())
	}
	if timedOut {
		res.Stdout, res.StdoutTruncated = runner.TruncateUTF8(string(r.stdout), maxOut), r.outTrunc
		res.Stderr, res.StderrTruncated = runner.TruncateUTF8(string(r.stderr), maxOut), r.errTrunc
		res.ErrorKind = shared.KindTimeout
		res.Error = fmt.Sprintf("sandbox execution timed out after %.2fs", timeout.Seconds())
		return res, nil
	}
	if r.err != nil {
		return res, fmt.Errorf("execute: %v: %w", r.err, shared.ErrInternal)
	}
	res.Stdout, res.StdoutTruncated = runner.TruncateUTF8(string(r.stdout), maxOut), r.outTrunc
	res.Stderr, res.StderrTruncated = runner.TruncateUTF8(string(r.stderr), maxOut), r.errTrunc
	resp, err := runner.ParseResponse(r.resp)
	if err != nil {
		return res, fmt.Errorf("execute: %v: %w", err, shared.ErrInternal)
	}
	if err := resp.Apply(&res); err != nil {
		return res, fmt.Errorf("execute: %w", err)
	}
	return res, nil
}

// errRestarting refuses a call because the interpreter is wedged and the
// process is about to exit: the request never reached Python, so a host may
// safely send it again to a new process (shared.ErrNotRun).
func errRestarting(reason string) error {
	return fmt.Errorf("inprocess: %s: %w: %w", reason, shared.ErrNotRun, shared.ErrPluginShutdown)
}

// wedged handles a call that did not stop within the grace period.
func (b *Backend) wedged(ip *interp, j *job, timeout, grace time.Duration, canceled bool, ctx context.Context) (shared.ExecutionResult, error) {
	reason := fmt.Sprintf("the interpreter is stuck in code that cannot be interrupted (call %d did not stop %v after its deadline); the plugin process is being restarted", j.id, grace)
	ip.markDead(reason)
	b.logger.Error("tier 0 interpreter wedged; ending the plugin process so the host relaunches it", "call", j.id, "grace", grace.String())
	if b.onWedged != nil {
		b.onWedged()
	}
	if canceled {
		return shared.ExecutionResult{}, fmt.Errorf("execute: %w (and %s)", ctx.Err(), reason)
	}
	return shared.ExecutionResult{
		ErrorKind: shared.KindTimeout,
		Error: fmt.Sprintf("sandbox execution timed out after %.2fs and could not be interrupted (a loop inside C code?) within %v; "+
			"the tier-0 backend was restarted", timeout.Seconds(), grace),
	}, nil
}

// NewPluginProcessBackend returns the Backend a plugin binary serves: one
// that owns its process, so it may set RLIMIT_AS on it and ends it (for the
// host to relaunch) when a call wedged the interpreter.
func NewPluginProcessBackend(logger hclog.Logger) *Backend {
	b := NewBackend(logger)
	b.onWedged = exitSoon(logger)
	b.allowRlimit = true
	return b
}

// exitSoon is the plugin binary's onWedged: let the response of the wedged
// call reach the host, then end the process. The host sees the plugin gone
// and relaunches it on the next call.
func exitSoon(logger hclog.Logger) func() {
	return func() {
		time.AfterFunc(exitDelay, func() {
			logger.Error("exiting: the embedded interpreter is wedged")
			os.Exit(3)
		})
	}
}
