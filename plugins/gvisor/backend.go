// Package gvisor is tier 3: user code's system calls are served by
// gVisor's Sentry, a kernel in user space, not by the host kernel. An
// execution without a session runs the shared Python runner in a fresh
// gVisor sandbox (`runsc run` of a one-call OCI bundle); a session
// (session.go) is one gVisor sandbox running tier 2's agent runtime,
// spoken to over MCP on the sandbox's stdio as tier 2 speaks to its
// containers.
package gvisor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/internal/forkcore"
	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/internal/warmpool"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
	"github.com/orqest/sandbox/validator"
)

// Version is the backend's version, reported by Info.
const Version = "0.1.0"

// Defaults of the `config {}` block and of requests that leave a limit at
// zero.
const (
	DefaultPython   = "/usr/bin/python3"
	DefaultPlatform = "ptrace"
)

// Config is the backend's `config {}` block.
type Config struct {
	// Runsc is the runsc binary ("" finds it in $PATH or /usr/bin).
	Runsc string `json:"runsc"`
	// Platform is gVisor's platform: "ptrace" (default; works anywhere,
	// slowest), "systrap" (seccomp traps instead of ptrace stops; runsc
	// 2023 and later) or "kvm" (needs /dev/kvm; a platform that hangs
	// fails the self-test at its wall clock).
	Platform string `json:"platform"`
	// Python is the interpreter inside the sandbox (the host's, seen
	// read-only under /usr).
	Python string `json:"python"`
	// Require lists capabilities that must be in force; a missing one fails
	// Configure with ErrFailedPrecondition.
	Require []string `json:"require"`

	// Sessions, when false, offers no sessions even with a runtime: every
	// execution then runs in a fresh sandbox (nil: true).
	Sessions *bool `json:"sessions"`
	// Runtime is the agent runtime binary of sessions (orqest-agent-runtime,
	// built by `make runtime`); "" finds it next to the plugin's executable
	// or in $PATH. Without one, sessions are not offered.
	Runtime string `json:"runtime"`
	// DataDir holds one directory per user (0700), bound on /data of that
	// user's sessions (the tool library); "" is the user cache directory's
	// orqest-sandbox/gvisor-users.
	DataDir string `json:"data_dir"`
	// PausedDir holds one directory per paused session (0700: its
	// checkpoint image and record), kept across restarts of the plugin;
	// "" is the user cache directory's orqest-sandbox/gvisor-paused.
	PausedDir string `json:"paused_dir"`
	// SessionMB caps a session sandbox's memory, MB (each call is capped
	// again by its own memory limit, RLIMIT_AS).
	SessionMB int `json:"session_memory_mb"`
	// WorkspaceMB is the size of a session's /workspace tmpfs, MB.
	WorkspaceMB int `json:"workspace_mb"`
	// OpenTimeout bounds a session's start to MCP initialize, e.g. "30s".
	OpenTimeout string `json:"open_timeout"`
	// Promotion is the tool library's policy, as in tier 2.
	Promotion *toollib.Promotion `json:"promotion"`
	// Pool keeps warm session sandboxes, one per recent user (nil or size
	// 0: none), as tier 2 keeps warm containers.
	Pool *warmpool.Config `json:"pool"`
	// ForkCore is the fork server's C loop, whose runner's audit hook and
	// class guard in C every sandbox's interpreters load: "" (default)
	// uses forkcore.Name beside the plugin, checked against the sha256
	// built in; "none" keeps the runner's Python hook; or a path.
	ForkCore string `json:"forkcore"`

	openTimeout time.Duration
	classes     bool
	// core is the host path of the plugin's checked copy of the C loop
	// in its state directory ("": none), bound on ForkCorePath.
	core string
	// prepare and stateful are ConfigureRequest.AllowedImports and
	// Stateful, for the runtime's flags (rtproto.RuntimeFlags).
	prepare  []string
	stateful bool
	// egress is ConfigureRequest.Egress parsed (egress.go); nil: no
	// network at all.
	egress *egress.Policy
}

// runtimeFlags are the runtime's command-line flags of cfg. A call's
// memory_mb stays an address-space limit (no MemoryCgroup): the sandbox's
// memory is charged to its Sentry as a whole, so a call past a cgroup
// limit would kill the whole sandbox, agent included, instead of the call.
func (cfg Config) runtimeFlags() rtproto.RuntimeFlags {
	f := rtproto.RuntimeFlags{Classes: cfg.classes, Prepare: cfg.prepare, Stateful: cfg.stateful}
	if cfg.core != "" {
		f.ForkCore = ForkCorePath
	}
	return f
}

// coreFDOf is the descriptor a one-call sandbox of cfg opens the C loop
// on (0: cfg has none).
func coreFDOf(cfg Config) int {
	if cfg.core == "" {
		return 0
	}
	return coreFD
}

// testHooks are seams for this package's tests only (unexported: no
// `config {}` block reaches them).
type testHooks struct {
	// skipValidation skips the Go validator and rules replaces the rules
	// table; program replaces runner.Program(): the kernel-boundary test
	// runs code with every Python-level layer out of the way.
	skipValidation bool
	rules          json.RawMessage
	program        string
	// disable lists runner layers not to establish inside the sandbox
	// (tests of what gVisor alone stops).
	disable []string
}

// Backend is the tier-3 gVisor sandbox. It is safe for concurrent use.
type Backend struct {
	// Sessions (Open, Close, Execute with a SessionID, files, the tool
	// library) are the kit's; session.go is its Driver.
	*session.Manager

	logger       hclog.Logger
	validator    *validator.Validator
	rules        json.RawMessage
	maxCodeBytes int

	mu      sync.RWMutex
	cfg     Config
	runsc   string // resolved binary; "" until configured
	runtime string // the agent runtime of sessions; "": no sessions
	reaped  bool   // SweepStale ran with the configured runsc
	state   string // per-plugin directory: runsc's --root, the rootfs, the calls
	layers  *pyproc.SealInfo
	classes bool
	// pending counts background `runsc delete` runs of killed sandboxes.
	pending sync.WaitGroup

	test testHooks

	// egressEvents are the egress proxies' events waiting for the next
	// response; egressLookup resolves names for the proxies (nil: the
	// system's resolver; a test sets it to stand for DNS). egress.go.
	egressEvents egress.Queue
	egressLookup egress.LookupFunc
}

var _ shared.Sandbox = (*Backend)(nil)

// NewBackend returns an unconfigured Backend; Configure finds runsc.
func NewBackend(logger hclog.Logger) *Backend {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	b := &Backend{
		logger:       logger,
		validator:    validator.New(validator.WithCache(validator.DefaultCacheSize)),
		rules:        json.RawMessage(validator.RulesJSON()),
		maxCodeBytes: validator.MaxCodeBytes(),
		cfg:          defaultConfig(),
	}
	b.Manager = session.New(session.Config{
		Impl:   &mcp.Implementation{Name: "orqest-sandbox-plugin-gvisor", Version: Version},
		Driver: driver{b},
		Logger: logger,
		Validate: func(ctx context.Context, code string, allowed []string, verdict *shared.Verdict) []shared.Finding {
			b.mu.RLock()
			f := validator.Features{Classes: b.classes}
			b.mu.RUnlock()
			found, _ := b.validator.CheckTrusting(ctx, code, allowed, f, verdict)
			return found
		},
		Check: func(req shared.ExecuteRequest) error {
			if len(req.Dependencies) > 0 {
				return fmt.Errorf("dependencies are not installed by the gvisor backend: %w", shared.ErrNotSupported)
			}
			return nil
		},
		MaxCodeBytes: b.maxCodeBytes,
		Available:    b.sessionsOffered,
	})
	return b
}

func defaultConfig() Config {
	return Config{Platform: DefaultPlatform, Python: DefaultPython, SessionMB: DefaultSessionMB, WorkspaceMB: DefaultWorkspaceMB, openTimeout: DefaultOpenTimeout}
}

// baseCaps hold on every run: the wall clock and output caps are Go's,
// RLIMIT_AS/CPU are set in the spec and again by the runner, the sandbox
// has no network device but loopback (--network=none), its root is
// read-only (/usr and the loader's files bound read-only, a private tmpfs
// on /tmp), and its kernel is the Sentry.
var baseCaps = []shared.Capability{
	shared.CapMemoryLimit,
	shared.CapCPULimit,
	shared.CapWallClockTimeout,
	shared.CapProcessIsolation,
	shared.CapFreshProcess,
	shared.CapOutputLimit,
	shared.CapNetworkIsolation,
	shared.CapFilesystemIsolation,
	shared.CapKernelBoundary,
	shared.CapStreaming,
	shared.CapEmptyEnvironment,
}

// caps returns every capability in force: the base ones and the runner's
// layers the probe found inside the sandbox.
func caps(layers *pyproc.SealInfo) []shared.Capability {
	out := append([]shared.Capability(nil), baseCaps...)
	if layers == nil {
		return out
	}
	for _, l := range runner.Layers {
		if c := runner.LayerCapability(l); slices.Contains(layers.Layers, l) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// knownCaps lists every capability `require` may name.
func knownCaps() []string { return runner.KnownCapabilities(baseCaps) }

// Info describes the backend.
func (b *Backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	b.mu.RLock()
	c := caps(b.layers)
	if b.classes {
		c = append(c, shared.CapClasses)
	}
	if b.runtime != "" {
		c = append(c, shared.CapSessions, shared.CapToolLibrary, shared.CapStatefulSessions, shared.CapFiles, shared.CapPause, shared.CapPauseMemory)
	}
	c = egressCaps(c, b.cfg) // egress.go
	b.mu.RUnlock()
	return shared.InfoResponse{
		Name:         "gvisor",
		Tier:         3,
		Version:      Version,
		APIVersions:  []int{shared.APIVersion},
		Capabilities: c,
		ConfigSchema: []shared.ConfigAttribute{
			{Name: "platform", Type: "string", Description: `gVisor platform: "ptrace" (default; works anywhere, slowest), "systrap" (runsc 2023 and later) or "kvm" (needs /dev/kvm)`},
			{Name: "runsc", Type: "string", Description: "the runsc binary (default: found in $PATH or /usr/bin; `apt-get install runsc`)"},
			{Name: "python", Type: "string", Description: "the interpreter inside the sandbox (default " + DefaultPython + "; the host's /usr, read-only)"},
			{Name: "require", Type: "list(string)", Description: `capabilities that must be in force, e.g. ["kernel_boundary"]; a missing one (or runsc itself) fails startup`},
			{Name: "sessions", Type: "bool", Description: "false: no sessions even with a runtime; every execution in a fresh sandbox (default true)"},
			{Name: "runtime", Type: "string", Description: "the agent runtime of sessions (" + RuntimeName + ", `make runtime`); default: next to the plugin, else $PATH; without one, no sessions"},
			{Name: "paused_dir", Type: "string", Description: "host directory of paused sessions (one 0700 directory per session id: the sandbox's checkpoint and its record), kept across plugin and host restarts; default: the user cache directory's orqest-sandbox/gvisor-paused"},
			{Name: "data_dir", Type: "string", Description: "host directory of the per-user data directories (0700 each, bound on /data of the user's sessions: the tool library); default: the user cache directory's orqest-sandbox/gvisor-users"},
			{Name: "session_memory_mb", Type: "number", Description: fmt.Sprintf("memory of a session's sandbox in MB (default %d); each call has its own limit too", DefaultSessionMB)},
			{Name: "workspace_mb", Type: "number", Description: fmt.Sprintf("size of a session's /workspace tmpfs in MB (default %d)", DefaultWorkspaceMB)},
			{Name: "open_timeout", Type: "string", Description: `sandbox start to MCP initialize bound (default "30s")`},
			{Name: "forkcore", Type: "string", Description: `the runner's audit hook and class guard in C (` + forkcore.Name + `): "" (default) uses the one beside the plugin, checked against the sha256 built in; "none" keeps the runner's Python hook, which guards neither type() nor class attributes; or a path`},
			toollib.Schema(),
			warmpool.Schema("gVisor sandbox"),
		},
		Description: "Tier 3: user code's system calls are served by gVisor's Sentry (runsc), not the host kernel. Without a session, each execution in a fresh sandbox: no network device, a read-only root (/usr only), RLIMIT_AS/CPU, a wall clock, an empty environment, uid 65534, the runner's own seal where the Sentry supports it. A session is one sandbox (no network device, no host path but /usr read-only and the user's data directory) running the tier-2 agent runtime over MCP on its stdio, every call with a per-session HS256 JWT.",
	}, nil
}

// Configure applies the `config {}` block, finds runsc, probes which of
// the runner's layers hold inside the sandbox and runs a self-test. It
// fails closed (ErrUnavailable naming runsc) when runsc is missing.
func (b *Backend) Configure(ctx context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	cfg := defaultConfig()
	if t := bytes.TrimSpace(req.Config); len(t) > 0 && string(t) != "null" {
		if err := shared.DecodeConfig("gvisor", t, &cfg); err != nil {
			return shared.ConfigureResponse{}, err
		}
		if cfg.Platform == "" {
			cfg.Platform = DefaultPlatform
		}
		if cfg.Python == "" {
			cfg.Python = DefaultPython
		}
	}
	if err := cfg.normalizeSessions(); err != nil {
		return shared.ConfigureResponse{}, err
	}
	cfg.classes = req.Classes
	cfg.prepare, cfg.stateful = append([]string(nil), req.AllowedImports...), req.Stateful
	if err := configureEgress(&cfg, req.Egress); err != nil { // egress.go
		return shared.ConfigureResponse{}, err
	}
	if err := cfg.runtimeFlags().Check(); err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: %w: %w", err, shared.ErrInvalidArgument)
	}
	switch cfg.Platform {
	case "ptrace", "kvm", "systrap":
	default:
		return shared.ConfigureResponse{}, configError("platform", nil, `unknown platform %q (want "ptrace", "systrap" or "kvm")`, cfg.Platform)
	}
	if !filepath.IsAbs(cfg.Python) || !strings.HasPrefix(cfg.Python, "/usr/") {
		return shared.ConfigureResponse{}, configError("python", nil, "python %q: want an absolute path under /usr (the sandbox sees only the host's /usr)", cfg.Python)
	}
	known := knownCaps()
	for _, r := range cfg.Require {
		if !slices.Contains(known, r) {
			return shared.ConfigureResponse{}, configError("require", nil, "unknown capability %q (known: %s)", r, strings.Join(known, ", "))
		}
	}
	runsc, err := lookRunsc(cfg.Runsc)
	if err != nil {
		return shared.ConfigureResponse{}, err
	}
	if _, err := os.Stat(cfg.Python); err != nil {
		return shared.ConfigureResponse{}, configError("python", shared.ErrUnavailable, "python %q: %v", cfg.Python, err)
	}
	var runtime string
	if cfg.Sessions == nil || *cfg.Sessions {
		if runtime, err = findRuntime(cfg.Runtime); err != nil {
			return shared.ConfigureResponse{}, err
		}
	}
	if runtime == "" && (cfg.Sessions == nil || *cfg.Sessions) {
		b.logger.Warn("no agent runtime (" + RuntimeName + "; set config runtime or `make runtime`): sessions are not offered")
	}
	b.reapOnce(runsc)

	state, err := b.ensureState()
	if err != nil {
		return shared.ConfigureResponse{}, err
	}
	if cfg.core, err = b.placeCore(cfg.ForkCore, state); err != nil {
		return shared.ConfigureResponse{}, err
	}
	layers, err := b.probe(ctx, runsc, cfg, state)
	if err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: runsc %s (platform %s) failed its self-test: %w", runsc, cfg.Platform, err)
	}
	have := caps(layers)
	var lacking []string
	for _, r := range cfg.Require {
		if !slices.Contains(have, shared.Capability(r)) {
			lacking = append(lacking, r)
		}
	}
	if len(lacking) > 0 {
		return shared.ConfigureResponse{}, configError("require", shared.ErrFailedPrecondition, "required capabilities not in force inside the sandbox: %s (not enforced: %s)",
			strings.Join(lacking, ", "), layers.MissingText(nil))
	}
	// The self-test runs under a default call's limits with a longer wall
	// clock (a sandbox's first start is slow).
	st, err := shared.Prepare(shared.ExecuteRequest{Code: "return 1+1", Timeout: 20 * time.Second}, shared.Defaults{})
	if err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: self-test: %w", err)
	}
	res, err := b.run(ctx, runsc, cfg, state, layers, runner.Request{Code: "return 1+1", Rules: b.rules}, st.Resolved, nil)
	if err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: runsc %s failed its self-test: %w", runsc, err)
	}
	if !res.Success || string(res.Output) != "2" {
		return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: runsc %s failed its self-test (%s: %s; stderr: %s): %w",
			runsc, res.ErrorKind, res.Error, strings.TrimSpace(res.Stderr), shared.ErrUnavailable)
	}
	if len(layers.Missing) > 0 {
		b.logger.Warn("runner layers not in force inside gVisor (the Sentry does not support them); NOT enforced: "+layers.MissingText(nil), "in_force", layers.Layers)
	}
	b.mu.Lock()
	b.cfg, b.runsc, b.runtime, b.layers, b.classes = cfg, runsc, runtime, layers, req.Classes
	b.mu.Unlock()
	b.Manager.Configure(session.Settings{
		OpenTimeout: cfg.openTimeout,
		Pool:        cfg.Pool,
		Hello:       func(h *rtproto.Hello) { h.Promotion = cfg.Promotion },
	})
	b.logger.Debug("configured", "runsc", runsc, "platform", cfg.Platform, "layers", layers.Layers)
	return shared.ConfigureResponse{}, nil
}

// forkCoreSHA256 is the sha256 of the bin/orqest-forkcore.so that `make
// build` compiled beside this plugin (set with -ldflags -X). When set, the
// plugin binds no other bytes into its sandboxes.
var forkCoreSHA256 string

// placeCore loads the C loop that setting (Config.ForkCore) names and
// writes the checked bytes, read-only, into the state directory, whence
// every sandbox binds them (a later change of the file beside the plugin
// reaches no sandbox). "" and a nil error: none (the reason is logged).
func (b *Backend) placeCore(setting, state string) (string, error) {
	data, why, err := forkcore.Load("gvisor", setting, forkCoreSHA256)
	if err != nil {
		return "", err
	}
	if data == nil {
		b.logger.Warn("no C audit hook in the sandboxes: the runner's Python hook stands in (it guards neither type() nor class attributes)", "reason", why)
		return "", nil
	}
	path := filepath.Join(state, "core-"+forkcore.ID(data)+".so")
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, data) {
		return path, nil
	}
	tmp, err := os.CreateTemp(state, "core-*.tmp")
	if err == nil {
		_, err = tmp.Write(data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), 0o444)
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		return "", fmt.Errorf("gvisor: placing the C audit hook: %w: %w", err, shared.ErrInternal)
	}
	return path, nil
}

// ensureState creates the per-plugin directory once: runsc's state root
// and the sandbox's root filesystem skeleton.
func (b *Backend) ensureState() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != "" {
		return b.state, nil
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", statePrefix, os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("gvisor: state directory: %w: %w", err, shared.ErrInternal)
	}
	for _, d := range []string{"runsc", "calls"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("gvisor: state directory: %w: %w", err, shared.ErrInternal)
		}
	}
	if err := rootfs(filepath.Join(dir, "rootfs")); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("gvisor: sandbox root: %w: %w", err, shared.ErrInternal)
	}
	// The calls' directories are bind-mounted into sandboxes that run as
	// 65534: it must be able to pass through the state directory.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("gvisor: state directory: %w: %w", err, shared.ErrInternal)
	}
	b.state = dir
	return dir, nil
}

// statePrefix starts the name of every plugin's state directory (then the
// plugin's pid and a dash).
const statePrefix = "orqest-gvisor-"

// SweepStale is the reaper: under tmp ("" meaning os.TempDir()) it finds
// the state directories of plugin processes no longer alive (a plugin
// killed mid-call or with sessions open cannot run Shutdown), kills every
// sandbox still listed in their runsc roots and the runsc processes
// serving it, deletes it (`runsc delete --force`) and removes the
// directory. runsc "" finds runsc; without one only files are removed. It
// returns how many directories it removed.
func SweepStale(tmp, runsc string) (int, error) {
	if tmp == "" {
		tmp = os.TempDir()
	}
	if runsc == "" {
		runsc, _ = lookRunsc("")
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return 0, fmt.Errorf("gvisor: sweeping %s: %w", tmp, err)
	}
	n := 0
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), statePrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if err := unix.Kill(pid, 0); err == nil || err == unix.EPERM {
			continue // alive (or another user's): not ours to remove
		}
		dir := filepath.Join(tmp, e.Name())
		if runsc != "" {
			reapRoot(runsc, filepath.Join(dir, "runsc"))
		}
		if err := os.RemoveAll(dir); err == nil {
			n++
		}
	}
	return n, nil
}

// reapRoot kills and deletes every container runsc lists under root.
func reapRoot(runsc, root string) {
	if _, err := os.Stat(root); err != nil {
		return
	}
	globals := []string{"--root=" + root}
	if os.Geteuid() != 0 {
		globals = append(globals, "--rootless")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, runsc, append(globals, "list", "--quiet")...).Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		killSandbox(id)
		_ = deleteContainer(runsc, globals, id)
	}
}

// reapOnce runs the reaper with the configured runsc once per backend.
func (b *Backend) reapOnce(runsc string) {
	b.mu.Lock()
	done := b.reaped
	b.reaped = true
	b.mu.Unlock()
	if done {
		return
	}
	if n, err := SweepStale("", runsc); err != nil {
		b.logger.Warn("reaper", "error", err)
	} else if n > 0 {
		b.logger.Info("reaper removed the sandboxes and state of dead plugin processes", "count", n)
	}
	if n := egress.ReapDirs(""); n > 0 {
		b.logger.Info("reaper removed egress socket directories of dead plugin processes", "count", n)
	}
}

// Shutdown ends every open session's sandbox and removes the plugin's
// state directory (runsc's root, the rootfs skeleton, any call directory).
// Calls still running are killed with their runsc when the plugin exits
// (their sandboxes are attached).
func (b *Backend) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b.Manager.Shutdown(ctx)
	b.pending.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != "" {
		os.RemoveAll(b.state)
		b.state = ""
	}
}

// Validate runs the static checks.
func (b *Backend) Validate(ctx context.Context, req shared.ValidateRequest) (shared.ValidateResponse, error) {
	if err := shared.CheckCodeSize(req.Code, b.maxCodeBytes); err != nil {
		return shared.ValidateResponse{}, err
	}
	b.mu.RLock()
	f := validator.Features{Classes: b.classes}
	b.mu.RUnlock()
	return shared.ValidateResponse{Findings: b.validator.CheckWith(ctx, req.Code, req.AllowedImports, f)}, nil
}

// Execute validates req.Code and runs it in the session's sandbox
// (req.SessionID) or, without one, in a fresh gVisor sandbox.
func (b *Backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	if req.SessionID != "" {
		return b.egressEvents.Respond(b.Manager.Execute(ctx, req)) // egress.go
	}
	return b.execute(ctx, req, nil)
}

// ExecuteStream implements shared.Streamer: Execute, with the code's
// stdout and stderr sent as they are read (in a session, as its runtime
// streams them). A send that fails cancels the call.
func (b *Backend) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk) error) (shared.ExecuteResponse, error) {
	if req.SessionID != "" {
		return b.egressEvents.Respond(b.Manager.ExecuteStream(ctx, req, send)) // egress.go
	}
	return shared.StreamExecute(ctx, send, func(ctx context.Context, onChunk func(shared.OutputChunk)) (shared.ExecuteResponse, error) {
		return b.execute(ctx, req, onChunk)
	})
}

// execute runs req; send, when set, gets the output as it is read.
func (b *Backend) execute(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk)) (shared.ExecuteResponse, error) {
	if req.Stateful {
		return shared.ExecuteResponse{}, &shared.FieldError{Field: "stateful", Reason: "a stateful call runs in a session's long-lived interpreter: open a session (Open) and pass its id"}
	}
	start := time.Now()
	p, err := shared.Prepare(req, shared.Defaults{MaxCodeBytes: b.maxCodeBytes})
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	b.mu.RLock()
	cfg, runsc, state, layers, classes := b.cfg, b.runsc, b.state, b.layers, b.classes
	b.mu.RUnlock()
	if runsc == "" || state == "" {
		return shared.ExecuteResponse{}, fmt.Errorf("gvisor: not configured (Configure finds runsc): %w", shared.ErrFailedPrecondition)
	}
	rules := b.rules
	if b.test.skipValidation {
		rules = b.test.rules
	} else if findings, _ := b.validator.CheckTrusting(ctx, req.Code, req.AllowedImports, validator.Features{Classes: classes}, req.Verdict); len(findings) > 0 {
		res := shared.Rejected(findings, p.Limits())
		res.DurationMS = msSince(start)
		return shared.ExecuteResponse{Result: res}, nil
	}
	res, err := b.run(ctx, runsc, cfg, state, layers, runner.Request{
		Code: req.Code, Args: p.Args, AllowedImports: req.AllowedImports,
		Classes: classes, Rules: rules,
	}, p.Resolved, send)
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	res.Limits = p.Limits()
	res.DurationMS = msSince(start)
	return shared.ExecuteResponse{Result: res}, nil
}

// configError is Configure's refusal of the config attribute field
// (shared.ConfigError).
func configError(field string, class error, format string, a ...any) error {
	return shared.ConfigError("gvisor", field, class, format, a...)
}

// normalizeSessions fills the session attributes' defaults and checks them.
func (c *Config) normalizeSessions() error {
	def := defaultConfig()
	if c.SessionMB < 0 {
		return configError("session_memory_mb", nil, "session_memory_mb must not be negative (got %d)", c.SessionMB)
	}
	if c.WorkspaceMB < 0 {
		return configError("workspace_mb", nil, "workspace_mb must not be negative (got %d)", c.WorkspaceMB)
	}
	if c.SessionMB == 0 {
		c.SessionMB = def.SessionMB
	}
	if c.WorkspaceMB == 0 {
		c.WorkspaceMB = def.WorkspaceMB
	}
	c.openTimeout = def.openTimeout
	if c.OpenTimeout != "" {
		d, err := time.ParseDuration(c.OpenTimeout)
		if err != nil || d <= 0 {
			return configError("open_timeout", nil, "%q: want a positive duration like \"30s\"", c.OpenTimeout)
		}
		c.openTimeout = d
	}
	if c.DataDir == "" {
		d, err := defaultDataDir()
		if err != nil {
			return err
		}
		c.DataDir = d
	} else if !filepath.IsAbs(c.DataDir) {
		return configError("data_dir", nil, "%q: want an absolute path", c.DataDir)
	}
	if c.PausedDir == "" {
		d, err := defaultDataDir()
		if err != nil {
			return err
		}
		c.PausedDir = filepath.Join(filepath.Dir(d), "gvisor-paused")
	} else if !filepath.IsAbs(c.PausedDir) {
		return configError("paused_dir", nil, "%q: want an absolute path", c.PausedDir)
	}
	p, err := toollib.NormalizeBlock(c.Promotion)
	if err != nil {
		return fmt.Errorf("gvisor config: %w", err)
	}
	c.Promotion = p
	if err := c.Pool.Normalize(); err != nil {
		return fmt.Errorf("gvisor config: %w", err)
	}
	return nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// probe runs the runner's probe inside a sandbox: it seals itself as far
// as the Sentry allows and reports the layers in force there.
func (b *Backend) probe(ctx context.Context, runsc string, cfg Config, state string) (*pyproc.SealInfo, error) {
	res, err := b.run(ctx, runsc, cfg, state, nil, runner.Request{Op: runner.OpProbe, Seal: &runner.Seal{}, Rules: b.rules},
		shared.Resolved{Timeout: 20 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 20}, nil)
	if err != nil {
		return nil, err
	}
	if !res.Success {
		return nil, fmt.Errorf("probe: %s: %s (stderr: %s): %w", res.ErrorKind, res.Error, strings.TrimSpace(res.Stderr), shared.ErrUnavailable)
	}
	var pr runner.ProbeResult
	if err := json.Unmarshal(res.Output, &pr); err != nil {
		return nil, fmt.Errorf("probe: %v: %w", err, shared.ErrInternal)
	}
	s := &pyproc.SealInfo{Layers: pr.Layers, Missing: pr.Missing, ReadPaths: pr.Stdlib}
	if s.Missing == nil {
		s.Missing = map[string]string{}
	}
	return s, nil
}

// run executes one runner request in a fresh sandbox: a call directory
// with the bundle and the response pipe, `runsc run` under
// pyproc.SpawnWith (wall clock on runsc's process group, capped capture),
// `runsc delete --force` when runsc was killed, and the directory removed.
// layers (nil for the probe) are required of the runner's seal, so a child
// that cannot establish one fails closed. l are the call's limits: the
// bundle's rlimits and the wall clock.
func (b *Backend) run(ctx context.Context, runsc string, cfg Config, state string, layers *pyproc.SealInfo, req runner.Request, l shared.Resolved, send func(shared.OutputChunk)) (shared.ExecutionResult, error) {
	var res shared.ExecutionResult
	if layers != nil {
		var require []string
		for _, l := range layers.Layers {
			if !slices.Contains(b.test.disable, l) {
				require = append(require, l)
			}
		}
		req.Seal = &runner.Seal{ReadPaths: layers.ReadPaths, Require: require, Disable: b.test.disable}
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return res, fmt.Errorf("gvisor: container id: %w: %w", err, shared.ErrInternal)
	}
	id := "orqest-" + hex.EncodeToString(idb[:])
	call := filepath.Join(state, "calls", id)
	if err := os.Mkdir(call, 0o711); err != nil {
		return res, fmt.Errorf("gvisor: call directory: %w: %w", err, shared.ErrInternal)
	}
	defer os.RemoveAll(call)
	io := filepath.Join(call, "io")
	bundle := filepath.Join(call, "bundle")
	fifo := filepath.Join(io, "resp")
	prog := runner.Program()
	if b.test.program != "" {
		prog = b.test.program
	}
	args := append([]string{cfg.Python}, runner.PythonFlags...)
	args = append(args, "-c", respBootstrap(cfg.core != "")+runner.Bootstrap, runner.ProgramArg(prog))
	sp, err := spec(filepath.Join(state, "rootfs"), io, cfg.core, args, l.MemoryMB, l.CPUSeconds())
	if err == nil {
		err = os.Mkdir(io, 0o755)
	}
	if err == nil {
		err = unix.Mkfifo(fifo, 0o600)
	}
	if err == nil {
		// The sandbox's uid 65534 writes the pipe; the directory stays
		// root's (0755), so nothing inside can create files in it.
		err = os.Chown(fifo, 65534, 65534)
	}
	if err == nil {
		err = os.Mkdir(bundle, 0o700)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(bundle, "config.json"), sp, 0o600)
	}
	if err != nil {
		return res, fmt.Errorf("gvisor: call directory: %w: %w", err, shared.ErrInternal)
	}
	argv := b.globals(runsc, cfg, state)
	globals := argv[1:]
	argv = append(argv, "run", "--bundle", bundle, id)
	job := pyproc.Job{Request: req, Limits: l, Dir: call}
	if send != nil {
		job.OnOutput = func(stream string, data []byte) { send(shared.OutputChunk{Stream: stream, Data: data}) }
	}
	return pyproc.SpawnWith(ctx, argv, job, pyproc.SpawnOptions{
		ResponseFIFO: fifo,
		CoreFDInside: coreFDOf(cfg),
		LimitsInside: true,
		SignalExits:  true,
		Kill: func() {
			killSandbox(id)
			// runsc delete takes about a second; the sandbox is dead
			// already, only its state files are left: remove them in the
			// background (Shutdown waits).
			b.pending.Add(1)
			go func() {
				defer b.pending.Done()
				if err := deleteContainer(runsc, globals, id); err != nil {
					b.logger.Debug("removing a killed sandbox's state", "id", id, "error", err)
				}
			}()
		},
	}, b.logger)
}
