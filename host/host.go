// Package host is the library side of orqest-sandbox: it loads an operator's
// HCL policy, discovers backend plugins (orqest-sandbox-plugin-<name>
// binaries), launches them with hashicorp/go-plugin over gRPC, and exposes
// each configured sandbox as a *Sandbox with Validate and Execute, plus the
// RunInSandbox / RunInSandboxSafe helpers.
//
// A minimal embedding:
//
//	h, err := host.LoadFile(ctx, "")          // ./config.hcl or the embedded default
//	if err != nil { ... }                     // *host.DiagnosticsError for a bad policy
//	defer h.Close()
//	sb, err := h.Sandbox(ctx, "")             // the default sandbox
//	out, err := host.RunInSandbox(ctx, sb, "def add(a, b):\n    return a + b",
//		host.RunOptions{ReturnExpression: "add(2, 3)"})
//	// out == json.RawMessage("5")
//
// Plugins are launched lazily, on a sandbox's first call (or by Start /
// StartAll), each sandbox in its own plugin process. A plugin that crashed
// is relaunched on the next call; the call during which it died fails with
// an error wrapping shared.ErrPluginShutdown (an execution already past its
// timeout gets the timeout instead). Every step of a plugin's life runs
// under a deadline: its launch (WithStartTimeout), each call
// (WithCallTimeout, or an execution's own timeout, which the host
// enforces whatever the backend) and its shutdown.
package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
	"github.com/orqest/sandbox/validator"
)

// StaticChecker is the host-side validator; validator.New() by default.
// The host checks with the features of the sandbox's policy (classes).
type StaticChecker interface {
	CheckWith(ctx context.Context, code string, allowedImports []string, f validator.Features) []shared.Finding
}

// Accepter is a StaticChecker that also vouches for what it accepts:
// Accept is CheckWith that returns, for accepted code, the verdict the
// host sends with the request (shared.ExecuteRequest.Verdict), so that a
// backend with the same validator, rules and options skips its own check
// of the body. *validator.Validator is one; a StaticChecker that is not
// sends no verdict, and every backend validates as before.
type Accepter interface {
	Accept(ctx context.Context, code string, allowedImports []string, f validator.Features) ([]shared.Finding, *shared.Verdict)
}

// check runs the host's static checks on a request's code: the findings,
// and the verdict on accepted code when the checker gives one.
func (h *Host) check(ctx context.Context, code string, allowedImports []string, f validator.Features) ([]shared.Finding, *shared.Verdict) {
	if a, ok := h.opts.checker.(Accepter); ok {
		return a.Accept(ctx, code, allowedImports, f)
	}
	return h.opts.checker.CheckWith(ctx, code, allowedImports, f), nil
}

// Option adjusts Load and LoadFile.
type Option func(*options)

type options struct {
	logger       hclog.Logger
	pluginDirs   []string
	pluginEnv    []string
	startTimeout time.Duration
	callTimeout  time.Duration
	checker      StaticChecker
	// tracerProvider makes the host's spans (WithTracerProvider); otel's
	// global provider when nil.
	tracerProvider trace.TracerProvider
}

// WithLogger sets the host's logger; plugin stderr (JSON hclog) is re-emitted
// through it. The default logs at warn level (or $ORQEST_LOG_LEVEL) to
// stderr.
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.logger = l } }

// WithPluginDirs adds plugin search directories, searched after the policy's
// plugin_dir and before the executable's own directory.
func WithPluginDirs(dirs ...string) Option {
	return func(o *options) { o.pluginDirs = append(o.pluginDirs, dirs...) }
}

// WithPluginEnv adds "KEY=value" entries to every plugin's environment.
// Plugins otherwise see none of the host's environment (SkipHostEnv) except
// ORQEST_PLUGIN_LOG_LEVEL and TMPDIR.
func WithPluginEnv(kv ...string) Option {
	return func(o *options) { o.pluginEnv = append(o.pluginEnv, kv...) }
}

// WithStartTimeout bounds a plugin's launch: its handshake, and then each
// Info call (default 10s). A plugin that has not answered by then is
// killed, with its process group, and the call that launched it fails with
// an error wrapping shared.ErrUnavailable.
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = d } }

// WithCallTimeout bounds every plugin call that runs no code: Configure,
// Validate, Open, Close, the file calls and tokens (default 2m; a caller's
// earlier deadline wins). One the bound ended fails with an error wrapping
// context.DeadlineExceeded and shared.ErrUnavailable. Executions and
// session tool calls are bounded by their timeout instead
// (Sandbox.Execute).
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// WithStaticChecker replaces the host-side validator.
func WithStaticChecker(c StaticChecker) Option { return func(o *options) { o.checker = c } }

// Host owns a loaded policy, its plugin catalog and the plugin processes of
// its sandboxes. It is safe for concurrent use. Close it when done.
type Host struct {
	cfg       *Config
	catalog   *Catalog
	opts      options
	sandboxes map[string]*Sandbox
	order     []string
	bus       *Bus      // events of tool factories; the audit log (events.go, audit.go)
	audit     *AuditLog // nil when the policy sets no audit_log
	metrics   *metrics
	tracer    trace.Tracer
	sessions  *sessionTable // the sessions opened through Sandbox.Open, and their reaper (sessions.go)
}

// DefaultLogger returns the host logger used when WithLogger is not given:
// human-readable hclog on stderr at $ORQEST_LOG_LEVEL (default "warn"), so
// that CLI output stays clean.
func DefaultLogger() hclog.Logger {
	lvl := hclog.Warn
	if v := os.Getenv("ORQEST_LOG_LEVEL"); v != "" {
		if l := hclog.LevelFromString(v); l != hclog.NoLevel {
			lvl = l
		}
	}
	return hclog.New(&hclog.LoggerOptions{Name: "orqest-sandbox", Level: lvl, Output: os.Stderr})
}

// Load builds a Host from a parsed policy. It discovers plugins and checks
// every reference and checksum, returning a *DiagnosticsError (with source
// ranges) when the policy is wrong. It launches nothing: each sandbox's
// plugin starts on first use, or with Sandbox.Start / Host.StartAll.
func Load(ctx context.Context, cfg *Config, opts ...Option) (*Host, error) {
	if cfg == nil {
		return nil, fmt.Errorf("host.Load: nil config: %w", shared.ErrInvalidArgument)
	}
	o := options{startTimeout: 10 * time.Second, callTimeout: 2 * time.Minute}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = DefaultLogger()
	}
	if o.checker == nil {
		// The host's own validation (defence in depth before any plugin's),
		// with a verdict cache: tools call the same bodies again and again.
		o.checker = validator.New(validator.WithCache(validator.DefaultCacheSize))
	}
	if cfg.policies == nil {
		// A Config built by hand rather than parsed: run the checks now.
		if diags := cfg.check(); diags.HasErrors() {
			return nil, &DiagnosticsError{Diagnostics: diags, Files: cfg.Files}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	cat, diags := NewCatalog(cfg, o.pluginDirs)
	for _, s := range cfg.Sandboxes {
		if _, ok := cat.Lookup(s.Plugin); ok {
			continue
		}
		if cfg.pluginConfig(s.Plugin) != nil {
			continue // already reported at the plugin block
		}
		diags = append(diags, errDiag(s.PluginRange, "Unknown plugin",
			fmt.Sprintf("Sandbox %q uses plugin %q, which is neither declared in a plugin block nor found as an executable named %s%s in %s.",
				s.Name, s.Plugin, plugin.PluginPrefix, s.Plugin, cat.searchedList())))
	}
	if diags.HasErrors() {
		return nil, &DiagnosticsError{Diagnostics: diags, Files: cfg.Files}
	}

	bus, audit, err := newHostBus(cfg)
	if err != nil {
		return nil, err
	}
	tp := o.tracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	h := &Host{cfg: cfg, catalog: cat, opts: o, sandboxes: map[string]*Sandbox{}, bus: bus, audit: audit,
		metrics: newMetrics(), tracer: tp.Tracer(TracerName)}
	h.opts.tracerProvider = tp
	h.sessions = newSessionTable(h, cfg.SessionLimits())
	for _, s := range cfg.Sandboxes {
		e, _ := cat.Lookup(s.Plugin)
		pol := cfg.SandboxPolicy(s)
		sb := &Sandbox{
			host:   h,
			cfg:    s,
			policy: pol,
			inst:   &instance{host: h, sb: s, entry: e},
			admit:  newAdmission(pol.MaxConcurrency, pol.MaxQueue),

			lifecycle: cfg.SandboxLifecycle(s),
		}
		h.metrics.gauges(s.Name, sb.admit)
		h.metrics.sessionGauge(s.Name, h.sessions)
		h.sandboxes[s.Name] = sb
		h.order = append(h.order, s.Name)
	}
	return h, nil
}

// LoadFile loads the policy at path and calls Load. An empty path means
// ./config.hcl when it exists, else the embedded default (DefaultConfig).
// A malformed policy is a *DiagnosticsError.
func LoadFile(ctx context.Context, path string, opts ...Option) (*Host, error) {
	cfg, err := ReadConfig(path)
	if err != nil {
		return nil, err
	}
	return Load(ctx, cfg, opts...)
}

// ReadConfig resolves path like LoadFile and parses it, returning a
// *DiagnosticsError for a malformed policy.
func ReadConfig(path string) (*Config, error) {
	path = ResolveConfigPath(path)
	if path == "" {
		return DefaultConfig(), nil
	}
	cfg, diags := LoadConfigFile(path)
	if diags.HasErrors() {
		return nil, &DiagnosticsError{Diagnostics: diags, Files: cfg.Files}
	}
	return cfg, nil
}

// Config returns the host's policy.
func (h *Host) Config() *Config { return h.cfg }

// Catalog returns the host's plugin catalog.
func (h *Host) Catalog() *Catalog { return h.catalog }

// SandboxNames lists the configured sandboxes in declaration order.
func (h *Host) SandboxNames() []string { return append([]string(nil), h.order...) }

// Sandbox returns the sandbox called name ("" means the default sandbox).
// It does not launch the goplugin. An unknown name wraps shared.ErrNotFound.
func (h *Host) Sandbox(ctx context.Context, name string) (*Sandbox, error) {
	if name == "" {
		name = h.cfg.DefaultSandboxName()
	}
	s, ok := h.sandboxes[name]
	if !ok {
		return nil, fmt.Errorf("sandbox %q is not configured (have %v): %w", name, h.order, shared.ErrNotFound)
	}
	return s, nil
}

// StartAll launches every sandbox's plugin, decodes its config block
// against the plugin's schema and configures it. Errors of all sandboxes
// are joined; policy errors come as one *DiagnosticsError.
func (h *Host) StartAll(ctx context.Context) error {
	var diags hcl.Diagnostics
	var errs []error
	for _, name := range h.order {
		err := h.sandboxes[name].Start(ctx)
		var de *DiagnosticsError
		switch {
		case err == nil:
		case errors.As(err, &de):
			diags = append(diags, de.Diagnostics...)
		default:
			errs = append(errs, err)
		}
	}
	if len(diags) > 0 {
		errs = append([]error{&DiagnosticsError{Diagnostics: diags, Files: h.cfg.Files}}, errs...)
	}
	return errors.Join(errs...)
}

// Close stops the session reaper and every plugin process the host
// started (a backend's sessions end with its process). Sandboxes return an
// error after Close. Programs should also defer goplugin.CleanupClients() in
// main, which kills any managed client left behind.
func (h *Host) Close() error {
	h.sessions.close()
	var wg sync.WaitGroup
	for _, s := range h.sandboxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.inst.close()
		}()
	}
	wg.Wait()
	return h.bus.Close()
}

// CleanupClients kills every go-plugin managed client of the process; call
// it (deferred) at the end of main.
func CleanupClients() { goplugin.CleanupClients() }
