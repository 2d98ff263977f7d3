// Package gvisor is tier 3: each execution runs the shared Python runner
// in a fresh gVisor sandbox (`runsc run` of a one-call OCI bundle), so user
// code's system calls are served by gVisor's Sentry, a kernel in user
// space, not by the host kernel. It is sessionless, like tier 1's spawn
// mode.
package gvisor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/plugins/subprocess"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
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
	// slowest) or "kvm" (needs /dev/kvm; a platform that hangs fails the
	// self-test at its wall clock).
	Platform string `json:"platform"`
	// Python is the interpreter inside the sandbox (the host's, seen
	// read-only under /usr).
	Python string `json:"python"`
	// Require lists capabilities that must be in force; a missing one fails
	// Configure with ErrFailedPrecondition.
	Require []string `json:"require"`
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
	shared.NoSessions

	logger       hclog.Logger
	validator    *validator.Validator
	rules        json.RawMessage
	maxCodeBytes int

	mu      sync.RWMutex
	cfg     Config
	runsc   string // resolved binary; "" until configured
	state   string // per-plugin directory: runsc's --root, the rootfs, the calls
	layers  *pyproc.SealInfo
	classes bool
	// pending counts background `runsc delete` runs of killed sandboxes.
	pending sync.WaitGroup

	test testHooks
}

var _ shared.Sandbox = (*Backend)(nil)

// NewBackend returns an unconfigured Backend; Configure finds runsc.
func NewBackend(logger hclog.Logger) *Backend {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Backend{
		logger:       logger,
		validator:    validator.New(validator.WithCache(validator.DefaultCacheSize)),
		rules:        json.RawMessage(validator.RulesJSON()),
		maxCodeBytes: validator.MaxCodeBytes(),
		cfg:          Config{Platform: DefaultPlatform, Python: DefaultPython},
	}
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
	subprocess.CapEmptyEnvironment,
}

// layerCaps maps a runner sealing layer (established inside the Sentry)
// to the capability tier 1 names it by.
var layerCaps = map[string]shared.Capability{
	runner.LayerNoNewPrivs:      subprocess.CapNoNewPrivs,
	runner.LayerUnprivilegedUID: subprocess.CapUnprivilegedUID,
	runner.LayerUserNamespace:   subprocess.CapUserNamespace,
	runner.LayerSeparateUID:     subprocess.CapSeparateUID,
	runner.LayerNetNamespace:    subprocess.CapNetworkNamespace,
	runner.LayerLandlockFS:      subprocess.CapLandlockFS,
	runner.LayerLandlockNet:     subprocess.CapLandlockNet,
	runner.LayerLandlockScope:   subprocess.CapLandlockScope,
	runner.LayerSeccomp:         subprocess.CapSeccomp,
}

// caps returns every capability in force: the base ones and the runner's
// layers the probe found inside the sandbox.
func caps(layers *pyproc.SealInfo) []shared.Capability {
	out := append([]shared.Capability(nil), baseCaps...)
	if layers == nil {
		return out
	}
	for _, l := range runner.Layers {
		if slices.Contains(layers.Layers, l) && !slices.Contains(out, layerCaps[l]) {
			out = append(out, layerCaps[l])
		}
	}
	return out
}

// knownCaps lists every capability `require` may name.
func knownCaps() []string {
	seen := map[string]bool{}
	for _, c := range baseCaps {
		seen[string(c)] = true
	}
	for _, c := range layerCaps {
		seen[string(c)] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Info describes the backend.
func (b *Backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	b.mu.RLock()
	c := caps(b.layers)
	if b.classes {
		c = append(c, shared.CapClasses)
	}
	b.mu.RUnlock()
	return shared.InfoResponse{
		Name:         "gvisor",
		Tier:         3,
		Version:      Version,
		APIVersions:  []int{shared.APIVersion},
		Capabilities: c,
		ConfigSchema: []shared.ConfigAttribute{
			{Name: "platform", Type: "string", Description: `gVisor platform: "ptrace" (default; works anywhere, slowest) or "kvm" (needs /dev/kvm)`},
			{Name: "runsc", Type: "string", Description: "the runsc binary (default: found in $PATH or /usr/bin; `apt-get install runsc`)"},
			{Name: "python", Type: "string", Description: "the interpreter inside the sandbox (default " + DefaultPython + "; the host's /usr, read-only)"},
			{Name: "require", Type: "list(string)", Description: `capabilities that must be in force, e.g. ["kernel_boundary"]; a missing one (or runsc itself) fails startup`},
		},
		Description: "Tier 3: each execution in a fresh gVisor sandbox (runsc): user code's system calls are served by gVisor's Sentry, not the host kernel; no network device, a read-only root (/usr only), RLIMIT_AS/CPU, a wall clock, an empty environment, uid 65534; the runner's own seal where the Sentry supports it.",
	}, nil
}

// Configure applies the `config {}` block, finds runsc, probes which of
// the runner's layers hold inside the sandbox and runs a self-test. It
// fails closed (ErrUnavailable naming runsc) when runsc is missing.
func (b *Backend) Configure(ctx context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	cfg := Config{Platform: DefaultPlatform, Python: DefaultPython}
	if t := bytes.TrimSpace(req.Config); len(t) > 0 && string(t) != "null" {
		dec := json.NewDecoder(bytes.NewReader(req.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: %v: %w", err, shared.ErrInvalidArgument)
		}
		if cfg.Platform == "" {
			cfg.Platform = DefaultPlatform
		}
		if cfg.Python == "" {
			cfg.Python = DefaultPython
		}
	}
	switch cfg.Platform {
	case "ptrace", "kvm":
	default:
		return shared.ConfigureResponse{}, fmt.Errorf(`gvisor config: unknown platform %q (want "ptrace" or "kvm"): %w`, cfg.Platform, shared.ErrInvalidArgument)
	}
	if !filepath.IsAbs(cfg.Python) || !strings.HasPrefix(cfg.Python, "/usr/") {
		return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: python %q: want an absolute path under /usr (the sandbox sees only the host's /usr): %w", cfg.Python, shared.ErrInvalidArgument)
	}
	known := knownCaps()
	for _, r := range cfg.Require {
		if !slices.Contains(known, r) {
			return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: require: unknown capability %q (known: %s): %w",
				r, strings.Join(known, ", "), shared.ErrInvalidArgument)
		}
	}
	runsc, err := lookRunsc(cfg.Runsc)
	if err != nil {
		return shared.ConfigureResponse{}, err
	}
	if _, err := os.Stat(cfg.Python); err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: python %q: %v: %w", cfg.Python, err, shared.ErrUnavailable)
	}

	state, err := b.ensureState()
	if err != nil {
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
		return shared.ConfigureResponse{}, fmt.Errorf("gvisor config: required capabilities not in force inside the sandbox: %s (not enforced: %s): %w",
			strings.Join(lacking, ", "), layers.MissingText(nil), shared.ErrFailedPrecondition)
	}
	res, err := b.run(ctx, runsc, cfg, state, layers, runner.Request{Code: "return 1+1", MemoryMB: shared.DefaultMemoryMB, Rules: b.rules}, 20*time.Second, shared.DefaultMaxOutputBytes)
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
	b.cfg, b.runsc, b.layers, b.classes = cfg, runsc, layers, req.Classes
	b.mu.Unlock()
	b.logger.Debug("configured", "runsc", runsc, "platform", cfg.Platform, "layers", layers.Layers)
	return shared.ConfigureResponse{}, nil
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
		return "", fmt.Errorf("gvisor: state directory: %v: %w", err, shared.ErrInternal)
	}
	for _, d := range []string{"runsc", "calls"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("gvisor: state directory: %v: %w", err, shared.ErrInternal)
		}
	}
	if err := rootfs(filepath.Join(dir, "rootfs")); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("gvisor: sandbox root: %v: %w", err, shared.ErrInternal)
	}
	// The calls' directories are bind-mounted into sandboxes that run as
	// 65534: it must be able to pass through the state directory.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("gvisor: state directory: %v: %w", err, shared.ErrInternal)
	}
	b.state = dir
	return dir, nil
}

// statePrefix starts the name of every plugin's state directory (then the
// plugin's pid and a dash).
const statePrefix = "orqest-gvisor-"

// SweepStale removes the state directories (under tmp, "" meaning
// os.TempDir()) that plugin processes no longer alive left: a plugin
// killed mid-call cannot run Shutdown. Their sandboxes died with their
// runsc (attached); only files are left. It returns how many it removed.
func SweepStale(tmp string) (int, error) {
	if tmp == "" {
		tmp = os.TempDir()
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
		if err := os.RemoveAll(filepath.Join(tmp, e.Name())); err == nil {
			n++
		}
	}
	return n, nil
}

// Shutdown removes the plugin's state directory (runsc's root, the rootfs
// skeleton, any call directory). Calls still running are killed with
// their runsc when the plugin exits (their sandboxes are attached).
func (b *Backend) Shutdown() {
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
	if err := runner.CheckCodeSize(req.Code, b.maxCodeBytes); err != nil {
		return shared.ValidateResponse{}, err
	}
	b.mu.RLock()
	f := validator.Features{Classes: b.classes}
	b.mu.RUnlock()
	return shared.ValidateResponse{Findings: b.validator.CheckWith(ctx, req.Code, req.AllowedImports, f)}, nil
}

// Execute validates req.Code and runs it in a fresh gVisor sandbox.
func (b *Backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	start := time.Now()
	p, err := runner.Prepare(req, runner.Defaults{
		Timeout: shared.DefaultTimeout, MemoryMB: shared.DefaultMemoryMB, MaxOutputBytes: shared.DefaultMaxOutputBytes,
		MaxCodeBytes: b.maxCodeBytes, MaxArgsBytes: shared.DefaultMaxArgsBytes,
	})
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	limits := shared.Limits{TimeoutMS: p.Timeout.Milliseconds(), MemoryMB: p.MemoryMB, MaxOutputBytes: p.MaxOutputBytes}
	b.mu.RLock()
	cfg, runsc, state, layers, classes := b.cfg, b.runsc, b.state, b.layers, b.classes
	b.mu.RUnlock()
	if runsc == "" || state == "" {
		return shared.ExecuteResponse{}, fmt.Errorf("gvisor: not configured (Configure finds runsc): %w", shared.ErrFailedPrecondition)
	}
	rules := b.rules
	if b.test.skipValidation {
		rules = b.test.rules
	} else if findings := b.validator.CheckWith(ctx, req.Code, req.AllowedImports, validator.Features{Classes: classes}); len(findings) > 0 {
		res := shared.Rejected(findings, limits)
		res.DurationMS = msSince(start)
		return shared.ExecuteResponse{Result: res}, nil
	}
	res, err := b.run(ctx, runsc, cfg, state, layers, runner.Request{
		Code: req.Code, Args: p.Args, AllowedImports: req.AllowedImports,
		MemoryMB: p.MemoryMB, Classes: classes, Rules: rules,
	}, p.Timeout, p.MaxOutputBytes)
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	res.Limits = limits
	res.DurationMS = msSince(start)
	return shared.ExecuteResponse{Result: res}, nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// probe runs the runner's probe inside a sandbox: it seals itself as far
// as the Sentry allows and reports the layers in force there.
func (b *Backend) probe(ctx context.Context, runsc string, cfg Config, state string) (*pyproc.SealInfo, error) {
	res, err := b.run(ctx, runsc, cfg, state, nil, runner.Request{Op: runner.OpProbe, MemoryMB: 256, Seal: &runner.Seal{}, Rules: b.rules}, 20*time.Second, 1<<20)
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
// that cannot establish one fails closed.
func (b *Backend) run(ctx context.Context, runsc string, cfg Config, state string, layers *pyproc.SealInfo, req runner.Request, timeout time.Duration, maxOut int) (shared.ExecutionResult, error) {
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
		return res, fmt.Errorf("gvisor: container id: %v: %w", err, shared.ErrInternal)
	}
	id := "orqest-" + hex.EncodeToString(idb[:])
	call := filepath.Join(state, "calls", id)
	if err := os.Mkdir(call, 0o711); err != nil {
		return res, fmt.Errorf("gvisor: call directory: %v: %w", err, shared.ErrInternal)
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
	args = append(args, "-c", respBootstrap+runner.Bootstrap, prog)
	cpuSeconds := int(math.Ceil(timeout.Seconds())) + 1
	sp, err := spec(filepath.Join(state, "rootfs"), io, args, req.MemoryMB, cpuSeconds)
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
		return res, fmt.Errorf("gvisor: call directory: %v: %w", err, shared.ErrInternal)
	}
	globals := []string{"--root=" + filepath.Join(state, "runsc"), "--network=none", "--platform=" + cfg.Platform, "--host-fifo=open"}
	if os.Geteuid() != 0 {
		globals = append(globals, "--rootless")
	}
	argv := append([]string{runsc}, globals...)
	argv = append(argv, "run", "--bundle", bundle, id)
	return pyproc.SpawnWith(ctx, argv, pyproc.Job{Request: req, Timeout: timeout, MaxOutput: maxOut, Dir: call}, pyproc.SpawnOptions{
		ResponseFIFO: fifo,
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
