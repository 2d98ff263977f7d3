package subprocess

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// Version is the backend's version, reported by Info.
const Version = "0.1.0"

// DefaultPython is the interpreter when the config names none. A request
// that leaves a limit at zero gets the contract's default (shared.Prepare).
const DefaultPython = "/usr/bin/python3"

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
	// ForkCore is the fork-server's C loop: "" finds it (beside the
	// plugin, checked against the sha256 this build carries), "none" keeps
	// the zygote's loop in Python, a path names the shared object.
	ForkCore string `json:"forkcore"`
	// Warm (default true) lets the fork-server's zygote check and compile
	// a body children accepted twice, so later children skip that. false
	// keeps every body out of the zygote's memory (see
	// docs/threat-model.md: a child that escaped the Python-level layers
	// can read what its zygote warmed).
	Warm *bool `json:"warm"`
	// HotPages (default true) has the fork-server's zygote learn which of
	// its pages a child writes during an execution (and which more a new
	// body's parse, check and compile write), and every idle child copy
	// those ahead of its execution (C loop only; see
	// runner.ForkServerConfig.NoHotPages). false: children fault them in
	// during the execution, and an idle child holds fewer private pages.
	HotPages *bool `json:"hot_pages"`
	// Tenants bounds how many tenants' zygotes are kept (default
	// DefaultTenants); the least recently used beyond it is closed once its
	// calls end. A tenant is the request's UserID: each one's calls fork from
	// a zygote of its own, so no body one tenant's calls warmed is in
	// another tenant's children's memory. Requests naming no user are one
	// tenant.
	Tenants int `json:"tenants"`
}

// DefaultTenants is how many tenants' zygotes a backend keeps when the
// config does not say.
const DefaultTenants = 8

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
	// readPaths are further paths Landlock lets the child read (tests of
	// what file permissions alone stop).
	readPaths []string
	// program replaces runner.Program() (e.g. without the in-child
	// checker, for the containment tests).
	program string
}

// argv returns the interpreter's argument vector for the runner program.
func (b *Backend) argv(python string, extra ...string) []string {
	prog := runner.Program()
	if b.test.program != "" {
		prog = b.test.program
	}
	return runner.ArgvFor(python, prog, extra...)
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
	// classes is ConfigureRequest.Classes: bodies may define classes.
	classes bool

	fsMu    sync.Mutex // guards core, coreID, coreWhy
	core    []byte     // forkcore bytes for the zygote (nil: loop in Python)
	coreID  string     // coreID(core)
	coreWhy string     // why there are none
	coreMsg sync.Once
	// zygotes holds the one warm fork-server (name ""), for the key of the
	// configuration it serves.
	zygotes pyproc.Pool

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
		maxCodeBytes: validator.MaxCodeBytes(),
		cfg:          Config{Python: DefaultPython, Mode: DefaultMode, Tenants: DefaultTenants},
	}
	b.zygotes.OnRestart = func(_ string, old *pyproc.ForkServer) {
		b.logger.Warn("fork-server died; restarting", "pid", old.PID(), "error", old.Err())
	}
	if core, why, err := loadForkCore(""); err != nil {
		b.coreWhy = err.Error()
	} else {
		b.core, b.coreWhy, b.coreID = core, why, coreID(core)
	}
	return b
}

// features is the language the backend's policy allows (classes).
func (b *Backend) features() validator.Features {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return validator.Features{Classes: b.classes}
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
	if b.features().Classes {
		caps = append(caps, shared.CapClasses)
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
			{Name: "hot_pages", Type: "bool", Description: "true (default): each idle fork-server child copies, ahead of its execution, the zygote pages an execution writes, and those a new body's parse, check and compile write while most recent bodies were new (learned once from two training children), so the execution takes no copy-on-write fault for them; false: children fault them in during the execution"},
			{Name: "warm", Type: "bool", Description: "true (default): the fork-server's zygote checks and compiles a body children accepted twice, so later children skip that; false keeps bodies out of the zygote (see docs/threat-model.md)"},
			{Name: "tenants", Type: "number", Description: fmt.Sprintf("how many tenants' zygotes are kept (default %d): each user (ExecuteRequest.UserID) forks from a zygote of its own, holding only what its own calls warmed; the least recently used beyond this is closed once its calls end", DefaultTenants)},
			{Name: "forkcore", Type: "string", Description: `the fork-server's C loop: "" (default) uses ` + ForkCoreName + ` beside the plugin, checked against the sha256 built in; "none" keeps the zygote's loop in Python (slower); or a path`},
			{Name: "require", Type: "list(string)", Description: `capabilities that must be in force, e.g. ["network_isolation", "filesystem_isolation", "seccomp"]; a missing one fails startup`},
		},
		Description: "Tier 1: a fresh Python process per execution (forked from a warm zygote, or spawned) with RLIMIT_AS, RLIMIT_CPU, RLIMIT_NOFILE, RLIMIT_FSIZE, an outer wall clock, an empty environment; where the kernel allows: an unprivileged uid, no_new_privs, a user + network namespace (no network), Landlock (read the stdlib only, write nothing) and a seccomp filter (no sockets, exec, new processes, ptrace, mount, ...).",
	}, nil
}

// Shutdown stops the fork-server, if one runs, and every child it has.
func (b *Backend) Shutdown() {
	b.zygotes.Close()
}

// Configure applies the `config {}` block and checks the interpreter works.
func (b *Backend) Configure(ctx context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	cfg := Config{Python: DefaultPython, Mode: DefaultMode}
	if len(bytes.TrimSpace(req.Config)) > 0 && string(bytes.TrimSpace(req.Config)) != "null" {
		if err := shared.DecodeConfig("subprocess", req.Config, &cfg); err != nil {
			return shared.ConfigureResponse{}, err
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
		return shared.ConfigureResponse{}, configError("mode", nil, `unknown mode %q (want "forkserver" or "spawn")`, cfg.Mode)
	}
	known := knownCaps()
	for _, r := range cfg.Require {
		if !slices.Contains(known, r) {
			return shared.ConfigureResponse{}, configError("require", nil, "unknown capability %q (known: %s)", r, strings.Join(known, ", "))
		}
	}
	if cfg.Tenants == 0 {
		cfg.Tenants = DefaultTenants
	}
	if cfg.Tenants < 1 || cfg.Tenants > 1024 {
		return shared.ConfigureResponse{}, configError("tenants", nil, "tenants = %d: want 1 to 1024 zygotes", cfg.Tenants)
	}
	for _, m := range cfg.Preload {
		if !validModuleName(m) {
			return shared.ConfigureResponse{}, configError("preload", nil, "%q is not a module name", m)
		}
	}
	python, err := checkPython(cfg.Python)
	if err != nil {
		return shared.ConfigureResponse{}, err
	}
	cfg.Python = python
	core, coreWhy, err := loadForkCore(cfg.ForkCore)
	if err != nil {
		return shared.ConfigureResponse{}, err
	}
	b.fsMu.Lock()
	b.core, b.coreWhy, b.coreID = core, coreWhy, coreID(core)
	b.fsMu.Unlock()

	// Which sealing layers does this kernel give us? Required ones must be
	// there; the others are reported once, loudly.
	seal, err := b.probeSeal(ctx, python, b.test.disable)
	if err != nil {
		return shared.ConfigureResponse{}, configError("python", shared.ErrUnavailable, "python %q failed its self-test: %v", python, err)
	}
	caps := seal.caps()
	var lacking []string
	for _, r := range cfg.Require {
		if !slices.Contains(caps, shared.Capability(r)) {
			lacking = append(lacking, r)
		}
	}
	if len(lacking) > 0 {
		return shared.ConfigureResponse{}, configError("require", shared.ErrFailedPrecondition, "required capabilities not available on this host: %s (not enforced: %s)",
			strings.Join(lacking, ", "), seal.missingText())
	}
	b.warnMissing(seal)

	// Self-test: the interpreter must run the runner end to end, sealed, in
	// the configured mode (this starts the fork-server).
	// It runs under a default call's limits with a longer wall clock (the
	// first call starts the zygote).
	st, err := shared.Prepare(shared.ExecuteRequest{Code: "return 1+1", Timeout: 10 * time.Second}, shared.Defaults{})
	if err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("subprocess config: self-test: %w", err)
	}
	var res shared.ExecutionResult
	if cfg.Mode == ModeForkServer {
		res, err = b.runFork(ctx, cfg, seal, "", runner.Request{Code: "return 1+1"}, st.Resolved, b.rules, nil)
	} else {
		res, err = b.runSpawn(ctx, cfg, runner.Request{Code: "return 1+1", Seal: seal.seal(b.test.disable, b.test.readPaths...)}, st.Resolved, nil)
	}
	if err != nil {
		return shared.ConfigureResponse{}, configError("python", shared.ErrUnavailable, "python %q failed its self-test: %v", python, err)
	}
	if !res.Success || string(res.Output) != "2" {
		return shared.ConfigureResponse{}, fmt.Errorf("subprocess config: python %q failed its self-test (%s: %s; stderr: %s): %w",
			python, res.ErrorKind, res.Error, strings.TrimSpace(res.Stderr), shared.ErrUnavailable)
	}

	b.mu.Lock()
	b.cfg = cfg
	b.zygotes.SetMax(cfg.Tenants)
	b.seal = seal
	b.classes = req.Classes
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

// configError is Configure's refusal of the config attribute field
// (shared.ConfigError; class shared.ErrUnavailable when the attribute
// names something this machine lacks).
func configError(field string, class error, format string, a ...any) error {
	return shared.ConfigError("subprocess", field, class, format, a...)
}

// checkPython resolves and checks the interpreter path.
func checkPython(p string) (string, error) {
	if !filepath.IsAbs(p) {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", configError("python", shared.ErrUnavailable, "python %q not found: %v", p, err)
		}
		p = lp
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", configError("python", shared.ErrUnavailable, "python %q not found: %v", p, err)
	}
	if !st.Mode().IsRegular() {
		return "", configError("python", nil, "python %q is not a regular file", p)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return "", configError("python", nil, "python %q is not executable", p)
	}
	if f, err := os.Open(p); err == nil {
		head := make([]byte, 2)
		n, _ := io.ReadFull(f, head)
		f.Close()
		if n == 2 && string(head) == "#!" {
			return "", configError("python", nil, "python %q is a script (a pyenv shim?), not an interpreter binary; point it at the real interpreter, e.g. %s",
				p, DefaultPython)
		}
	}
	return p, nil
}

func (b *Backend) checkCode(code string) error {
	return shared.CheckCodeSize(code, b.maxCodeBytes)
}

// Validate runs the static checks.
func (b *Backend) Validate(ctx context.Context, req shared.ValidateRequest) (shared.ValidateResponse, error) {
	if err := b.checkCode(req.Code); err != nil {
		return shared.ValidateResponse{}, err
	}
	return shared.ValidateResponse{Findings: b.validator.CheckWith(ctx, req.Code, req.AllowedImports, b.features())}, nil
}

// Execute validates req.Code and runs it in a fresh interpreter.
func (b *Backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	return b.execute(ctx, req, nil)
}

// ExecuteStream implements shared.Streamer: Execute, with the child's
// stdout and stderr sent as they are read. A send that fails cancels the
// call (the child is killed).
func (b *Backend) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk) error) (shared.ExecuteResponse, error) {
	return shared.StreamExecute(ctx, send, func(ctx context.Context, onChunk func(shared.OutputChunk)) (shared.ExecuteResponse, error) {
		return b.execute(ctx, req, func(stream string, data []byte) {
			onChunk(shared.OutputChunk{Stream: stream, Data: data})
		})
	})
}

// execute runs req; onOutput, when set, gets the output as it is read.
func (b *Backend) execute(ctx context.Context, req shared.ExecuteRequest, onOutput func(stream string, data []byte)) (shared.ExecuteResponse, error) {
	start := time.Now()
	p, err := shared.Prepare(req, shared.Defaults{MaxCodeBytes: b.maxCodeBytes})
	if err != nil {
		return shared.ExecuteResponse{}, err
	}

	rules := b.rules
	if b.test.skipValidation {
		rules = b.test.rules
	} else if findings, _ := b.validator.CheckTrusting(ctx, req.Code, req.AllowedImports, b.features(), req.Verdict); len(findings) > 0 {
		res := shared.Rejected(findings, p.Limits())
		res.DurationMS = msSince(start)
		return shared.ExecuteResponse{Result: res}, nil
	}

	cfg := b.config()
	seal, err := b.sealFor(ctx, cfg)
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	preq := runner.Request{
		Code:           req.Code,
		Args:           p.Args,
		AllowedImports: req.AllowedImports,
		Classes:        b.features().Classes,
	}
	var res shared.ExecutionResult
	if cfg.Mode == ModeForkServer {
		res, err = b.runFork(ctx, cfg, seal, req.UserID, preq, p.Resolved, rules, onOutput)
	} else {
		preq.Rules = rules
		preq.Seal = seal.seal(b.test.disable, b.test.readPaths...)
		res, err = b.runSpawn(ctx, cfg, preq, p.Resolved, onOutput)
	}
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	res.Limits = p.Limits()
	res.DurationMS = msSince(start)
	return shared.ExecuteResponse{Result: res}, nil
}

func msSince(t time.Time) float64 {
	return float64(time.Since(t).Microseconds()) / 1000
}

// runSpawn spawns one interpreter for req under the limits l and
// classifies its outcome. A Go error means infrastructure failure (or ctx
// cancellation); everything the user's code did is in the result.
// req.Rules defaults to the rules table.
func (b *Backend) runSpawn(ctx context.Context, cfg Config, req runner.Request, l shared.Resolved, onOutput func(string, []byte)) (shared.ExecutionResult, error) {
	if req.Rules == nil {
		req.Rules = b.rules
	}
	b.fsMu.Lock()
	core := b.core
	b.fsMu.Unlock()
	return pyproc.SpawnWith(ctx, b.argv(cfg.Python), pyproc.Job{Request: req, Limits: l, OnStart: b.onSpawn, OnOutput: onOutput},
		pyproc.SpawnOptions{Core: core}, b.logger)
}
