package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// passEnv lists the host environment variables a plugin receives. Plugins
// run with SkipHostEnv: nothing else of the host's environment (tokens,
// credentials) reaches them unless WithPluginEnv adds it.
var passEnv = []string{"ORQEST_PLUGIN_LOG_LEVEL", "TMPDIR"}

// launched is one running plugin process.
type launched struct {
	client *goplugin.Client
	run    *pluginRunner
	impl   shared.Sandbox
	pid    int
	// gen is the launch generation of the process: 1 for a sandbox's
	// first, one more for every relaunch. A session opened under one
	// generation is unknown to the processes of the next (sessions.go).
	gen int
}

// shutdownTimeout bounds stop: how long a plugin may take to exit after the
// host asked it to (go-plugin's Shutdown call, then its own wait of 2 s)
// before the host kills its process group.
const shutdownTimeout = 5 * time.Second

// kill ends the plugin at once: SIGKILL to its whole process group (the
// plugin and any child that did not leave it), then go-plugin's cleanup,
// which no longer waits on anything the plugin's children hold.
func (l *launched) kill() {
	if l == nil || l.client == nil {
		return
	}
	l.run.kill()
	l.client.Kill()
}

// stop ends the plugin in order: go-plugin asks it to exit and waits a
// little; if that has not happened within shutdownTimeout (a wedged plugin
// does not even answer the request), the process group is killed. Whatever
// is left in the group is killed either way.
func (l *launched) stop() {
	if l == nil || l.client == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.client.Kill()
	}()
	t := time.NewTimer(shutdownTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		l.run.kill()
		<-done
	}
	l.run.kill()
}

// pluginEnv is the environment every plugin process starts with (go-plugin
// adds its handshake's variables).
func (h *Host) pluginEnv() []string {
	var env []string
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, h.opts.pluginEnv...)
}

// launch starts the plugin binary of e as a managed go-plugin client and
// dispenses its Sandbox. It verifies the declared sha256 before starting the
// process (and again right before exec, pluginRunner.Start).
//
// The launch is bounded: the handshake by the start timeout
// (WithStartTimeout), the whole by ctx, which kills the process when it
// ends first. Every way it fails kills the plugin's process group.
func (h *Host) launch(ctx context.Context, e PluginEntry) (*launched, error) {
	if e.ExpectedSHA256 != "" {
		got, err := FileSHA256(e.Path)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: verify checksum: %w: %w", e.Name, err, shared.ErrUnavailable)
		}
		if got != e.ExpectedSHA256 {
			return nil, fmt.Errorf("plugin %q at %s has sha256 %s, policy requires %s: %w", e.Name, e.Path, got, e.ExpectedSHA256, ErrChecksumMismatch)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	logger := h.opts.logger.Named(e.Name)
	run := newPluginRunner(e, h.pluginEnv(), logger)
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		VersionedPlugins: plugin.VersionedPlugins(nil),
		RunnerFunc:       run.runnerFunc,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Managed:          true,
		AutoMTLS:         true,
		SkipHostEnv:      true,
		StartTimeout:     h.opts.startTimeout,
		Logger:           logger,
		GRPCDialOptions:  plugin.DialOptions(plugin.WithDialTracerProvider(h.opts.tracerProvider)),
	})
	// ctx ending during the handshake kills the process: go-plugin then
	// sees it exit and gives up at once.
	launching := make(chan struct{})
	defer close(launching)
	go func() {
		select {
		case <-ctx.Done():
			run.kill()
		case <-launching:
		}
	}()
	fail := func(err error) (*launched, error) {
		run.kill()
		client.Kill()
		switch {
		case errors.Is(err, ErrChecksumMismatch):
			return nil, fmt.Errorf("launch plugin %q (%s): %w", e.Name, e.Path, err)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("launch plugin %q (%s): %w (%w)", e.Name, e.Path, ctx.Err(), err)
		}
		return nil, fmt.Errorf("launch plugin %q (%s): %w: %w", e.Name, e.Path, err, shared.ErrUnavailable)
	}
	rpc, err := client.Client()
	if err != nil {
		return fail(err)
	}
	raw, err := rpc.Dispense(plugin.PluginName)
	if err != nil {
		return fail(err)
	}
	impl, ok := raw.(shared.Sandbox)
	if !ok {
		return fail(fmt.Errorf("dispensed %T, not a shared.Sandbox", raw))
	}
	if v := client.NegotiatedVersion(); v != shared.APIVersion {
		return fail(fmt.Errorf("negotiated protocol version %d, host speaks %d", v, shared.APIVersion))
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	return &launched{client: client, run: run, impl: impl, pid: run.pid}, nil
}

// ProbePlugin launches a fresh process of the plugin called name, calls Info
// and stops it. It does not Configure the goplugin. `orqest-sandbox plugins
// list|check` use it.
func (h *Host) ProbePlugin(ctx context.Context, name string) (shared.InfoResponse, error) {
	e, ok := h.catalog.Lookup(name)
	if !ok {
		return shared.InfoResponse{}, fmt.Errorf("plugin %q: %w", name, shared.ErrNotFound)
	}
	l, err := h.launch(ctx, e)
	if err != nil {
		return shared.InfoResponse{}, err
	}
	defer l.stop()
	info, err := h.boundedInfo(ctx, l)
	if err != nil {
		return info, fmt.Errorf("plugin %q: info: %w", name, err)
	}
	if !slices.Contains(info.APIVersions, shared.APIVersion) {
		return info, fmt.Errorf("plugin %q speaks API versions %v, the host needs %d: %w", name, info.APIVersions, shared.APIVersion, shared.ErrFailedPrecondition)
	}
	return info, nil
}

// boundedInfo calls Info on l, waiting at most the start timeout: a plugin
// that answered the handshake but not Info is as unusable as one that
// never started.
func (h *Host) boundedInfo(ctx context.Context, l *launched) (shared.InfoResponse, error) {
	ictx, cancel := context.WithTimeout(ctx, h.opts.startTimeout)
	defer cancel()
	info, err := l.impl.Info(ictx, shared.InfoRequest{})
	return info, overdue(ctx, err, "Info", h.opts.startTimeout)
}

// overdue is the error of a plugin call the host bounded by d under the
// caller's ctx: when the bound, not the caller, ended it, it says so and
// also wraps shared.ErrUnavailable.
func overdue(ctx context.Context, err error, op string, d time.Duration) error {
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the plugin did not answer %s within %s: %w: %w", op, d, err, shared.ErrUnavailable)
	}
	return err
}

// instance owns the plugin process of one sandbox. It launches lazily, and
// relaunches (with a NEW client: go-plugin clients are never restarted) when
// the previous process has exited.
type instance struct {
	host  *Host
	sb    *SandboxConfig
	entry PluginEntry

	mu       sync.Mutex
	cur      *launched
	info     shared.InfoResponse
	launches int
	closed   bool
}

var errHostClosed = fmt.Errorf("host is closed: %w", shared.ErrFailedPrecondition)

// get returns a configured, running plugin, launching one if needed.
func (in *instance) get(ctx context.Context) (*launched, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil, errHostClosed
	}
	if in.cur != nil && !in.cur.client.Exited() && !processGone(in.cur.pid) {
		return in.cur, nil
	}
	if in.cur != nil {
		in.host.opts.logger.Warn("plugin exited; relaunching", "sandbox", in.sb.Name, "plugin", in.entry.Name, "pid", in.cur.pid)
		in.cur.kill()
		in.cur = nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l, err := in.host.launch(ctx, in.entry)
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: %w", in.sb.Name, err)
	}
	info, err := in.host.boundedInfo(ctx, l)
	if err != nil {
		l.kill()
		return nil, fmt.Errorf("sandbox %q: plugin %q: info: %w", in.sb.Name, in.entry.Name, err)
	}
	if !slices.Contains(info.APIVersions, shared.APIVersion) {
		l.kill()
		return nil, fmt.Errorf("sandbox %q: plugin %q speaks API versions %v, the host needs %d: %w",
			in.sb.Name, in.entry.Name, info.APIVersions, shared.APIVersion, shared.ErrFailedPrecondition)
	}
	cfgJSON, diags := decodeBackendConfig(in.sb, in.entry.Name, info.ConfigSchema)
	if diags.HasErrors() {
		l.kill()
		return nil, &DiagnosticsError{Diagnostics: diags, Files: in.host.cfg.Files}
	}
	// The policy's allowed_packages go to the plugin once, at Configure (not
	// per call): a backend installs only those, whatever a request says.
	pol := in.host.cfg.SandboxPolicy(in.sb)
	cctx, cancel := context.WithTimeout(ctx, in.host.opts.callTimeout)
	_, err = l.impl.Configure(cctx, shared.ConfigureRequest{Config: cfgJSON, Unsafe: in.sb.Unsafe, AllowedPackages: pol.AllowedPackages, Classes: pol.Classes, AllowedImports: pol.AllowedImports, Stateful: in.sb.Stateful, Egress: in.host.cfg.SandboxEgress(in.sb)})
	cancel()
	if err != nil {
		l.kill()
		return nil, in.configRefused(overdue(ctx, err, "Configure", in.host.opts.callTimeout))
	}
	// Capabilities may depend on the configuration (e.g. a memory cap that
	// only a config attribute turns on): ask again now that it is applied.
	if after, err := in.host.boundedInfo(ctx, l); err == nil {
		info = after
	}
	if in.sb.Stateful && !info.Has(shared.CapStatefulSessions) {
		l.kill()
		return nil, &DiagnosticsError{Files: in.host.cfg.Files, Diagnostics: hcl.Diagnostics{errDiag(in.sb.DefRange, "Stateful sessions not supported",
			fmt.Sprintf("Sandbox %q sets stateful = true, but plugin %q keeps no session interpreters (no %q capability): remove the attribute or use a session tier such as docker.", in.sb.Name, in.entry.Name, shared.CapStatefulSessions))}}
	}
	if err := in.checkEgress(info); err != nil { // config_network.go
		l.kill()
		return nil, err
	}
	if in.sb.OnIdle != nil && *in.sb.OnIdle == OnIdlePause && !info.Has(shared.CapPause) {
		l.kill()
		return nil, &DiagnosticsError{Files: in.host.cfg.Files, Diagnostics: hcl.Diagnostics{errDiag(in.sb.OnIdleRange, "Pause not supported",
			fmt.Sprintf("Sandbox %q sets on_idle = %q, but plugin %q cannot pause sessions (no %q capability): use on_idle = %q or a tier that pauses, such as gvisor.", in.sb.Name, OnIdlePause, in.entry.Name, shared.CapPause, OnIdleClose))}}
	}
	in.cur, in.info = l, info
	m := in.host.metrics
	m.launches.WithLabelValues(in.sb.Name, in.entry.Name).Inc()
	if in.launches > 0 {
		m.relaunches.WithLabelValues(in.sb.Name, in.entry.Name).Inc()
	}
	in.launches++
	l.gen = in.launches
	return l, nil
}

// configRefused is the error of a Configure the plugin refused. A refusal
// that names a config attribute the block writes (a *shared.FieldError,
// "promotion.threshold" for one in a nested block) is a diagnostic at
// that attribute's value; any other is an error that points at the config
// block, or at the sandbox block when there is none, and wraps the
// plugin's error.
func (in *instance) configRefused(err error) error {
	var fe *shared.FieldError
	if errors.As(err, &fe) {
		if r, ok := configRange(in.sb, fe.Field); ok {
			return &DiagnosticsError{Files: in.host.cfg.Files, Diagnostics: hcl.Diagnostics{errDiag(r, "Invalid plugin configuration",
				fmt.Sprintf("Sandbox %q: plugin %q refused %s: %s.", in.sb.Name, in.entry.Name, fe.Field, fe.Reason))}}
		}
	}
	r := in.sb.DefRange
	if in.sb.Config != nil {
		r = in.sb.Config.DefRange
	}
	return fmt.Errorf("%s:%d:%d: sandbox %q: plugin %q refused its configuration: %w",
		r.Filename, r.Start.Line, r.Start.Column, in.sb.Name, in.entry.Name, err)
}

// discard forgets l if it is still the current process and kills it, so the
// next call launches a new one.
func (in *instance) discard(l *launched) {
	in.mu.Lock()
	if in.cur == l {
		in.cur = nil
	} else {
		l = nil
	}
	in.mu.Unlock()
	if l != nil {
		l.kill()
	}
}

// discardServing is discard for the plugin process whose Sandbox is p, if
// it is still the current one.
func (in *instance) discardServing(p shared.Sandbox) {
	in.mu.Lock()
	l := in.cur
	in.mu.Unlock()
	if l != nil && p != nil && l.impl == p {
		in.discard(l)
	}
}

// do runs fn against a running goplugin. When the plugin dies during the call,
// the error wraps shared.ErrPluginShutdown and the next call relaunches.
func (in *instance) do(ctx context.Context, op string, fn func(shared.Sandbox) error) error {
	return in.doOn(ctx, op, func(l *launched) error { return fn(l.impl) })
}

// doOn is do for a call that needs to know which process it went to (its
// launch generation): fn may be called twice, the second time on a new
// process, when the first never reached the plugin.
//
// The call is bounded by the host's call timeout (WithCallTimeout) unless
// ctx carries its own wall clock (withOwnClock: an execution's).
func (in *instance) doOn(ctx context.Context, op string, fn func(*launched) error) error {
	if ownClock(ctx) {
		return in.doOnce(ctx, op, fn)
	}
	bctx, cancel := context.WithTimeout(ctx, in.host.opts.callTimeout)
	defer cancel()
	return overdue(ctx, in.doOnce(bctx, op, fn), op, in.host.opts.callTimeout)
}

// ownClockKey marks the context of a call that carries its own deadline.
type ownClockKey struct{}

// withOwnClock marks ctx as the context of a call whose deadline its
// caller set (an execution: its timeout and the host's grace, sandbox.go),
// which the call timeout must not cut short.
func withOwnClock(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownClockKey{}, true)
}

func ownClock(ctx context.Context) bool {
	own, _ := ctx.Value(ownClockKey{}).(bool)
	return own
}

// doOnce is doOn without the call timeout.
func (in *instance) doOnce(ctx context.Context, op string, fn func(*launched) error) error {
	l, err := in.get(ctx)
	if err != nil {
		return err
	}
	err = fn(l)
	if err != nil && neverDelivered(err) {
		// The plugin was gone before the request reached it (it died
		// between calls): relaunch and send it once more.
		in.discard(l)
		if l, err = in.get(ctx); err != nil {
			return err
		}
		err = fn(l)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, shared.ErrPluginShutdown) || l.client.Exited() {
		in.discard(l)
		if errors.Is(err, shared.ErrPluginShutdown) {
			return fmt.Errorf("sandbox %q: plugin %q died during %s: %w", in.sb.Name, in.entry.Name, op, err)
		}
		return fmt.Errorf("sandbox %q: plugin %q died during %s: %w (%w)", in.sb.Name, in.entry.Name, op, shared.ErrPluginShutdown, err)
	}
	return err
}

// neverDelivered reports whether err says the request never reached the
// plugin's code (it was not sent, or the plugin refused it while going
// away), so that sending it again to a new process cannot run it twice.
func neverDelivered(err error) bool {
	return errors.Is(err, shared.ErrNotRun)
}

// liveGen returns the launch generation of the running plugin process,
// false when none runs (not launched yet, exited, or closed). It launches
// nothing.
func (in *instance) liveGen() (int, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cur == nil || in.cur.client.Exited() || processGone(in.cur.pid) {
		return 0, false
	}
	return in.cur.gen, true
}

// pid returns the plugin's process id, 0 when none is running.
func (in *instance) pid() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cur == nil || in.cur.client.Exited() {
		return 0
	}
	return in.cur.pid
}

func (in *instance) close() {
	in.mu.Lock()
	l := in.cur
	in.cur = nil
	in.closed = true
	in.mu.Unlock()
	l.stop()
}

// cachedInfo returns the Info of the current process (launching if needed).
func (in *instance) infoOf(ctx context.Context) (shared.InfoResponse, error) {
	if _, err := in.get(ctx); err != nil {
		return shared.InfoResponse{}, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.info, nil
}
