package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// Sandbox is one configured sandbox of a Host: a plugin, its configuration
// and a policy. It is the host-side client of the two-stage contract
// (Validate, then Execute) and is safe for concurrent use.
type Sandbox struct {
	host   *Host
	cfg    *SandboxConfig
	policy Policy
	inst   *instance
	admit  *admission
	// lifecycle bounds the sandbox's sessions (idle_timeout, max_lifetime).
	lifecycle SessionLifecycle
}

// PeakConcurrency returns the most executions of the sandbox that were in
// flight at once since it was loaded (bounded by max_concurrency).
func (s *Sandbox) PeakConcurrency() int { return int(s.admit.peak.Load()) }

// Name returns the sandbox's name in the policy.
func (s *Sandbox) Name() string { return s.cfg.Name }

// PluginName returns the name of the plugin backing the sandbox.
func (s *Sandbox) PluginName() string { return s.cfg.Plugin }

// Plugin returns the catalog entry of the plugin backing the sandbox.
func (s *Sandbox) Plugin() PluginEntry { return s.inst.entry }

// Policy returns the resolved policy of the sandbox.
func (s *Sandbox) Policy() Policy { return s.policy }

// PluginPID returns the process id of the running plugin, or 0 when none
// is running (not launched yet, crashed, or closed).
func (s *Sandbox) PluginPID() int { return s.inst.pid() }

// Launches returns how many times the sandbox's plugin has been launched.
func (s *Sandbox) Launches() int {
	s.inst.mu.Lock()
	defer s.inst.mu.Unlock()
	return s.inst.launches
}

// Start launches and configures the plugin now instead of on first use. A
// config block that does not match the plugin's schema is a
// *DiagnosticsError.
func (s *Sandbox) Start(ctx context.Context) error {
	_, err := s.inst.get(ctx)
	return err
}

// Info describes the backend (launching it if needed).
func (s *Sandbox) Info(ctx context.Context) (shared.InfoResponse, error) {
	return s.inst.infoOf(ctx)
}

// Ping asks the running plugin for its Info over gRPC (launching it when
// none runs) and returns the error when it does not answer: a health check.
// Info, unlike Ping, answers from the copy taken at launch.
func (s *Sandbox) Ping(ctx context.Context) error {
	return s.inst.do(ctx, "Info", func(p shared.Sandbox) error {
		_, err := p.Info(ctx, shared.InfoRequest{})
		return err
	})
}

// CheckSharedServing is what a long-lived server with many callers (such
// as `mcp serve`) calls before it serves the sandbox: a backend that does
// not run each execution in a fresh process (it lacks the fresh_process
// capability: tier 0, one interpreter for every call) lets code that escaped
// the Python layers in one call persist into later callers' calls, so it is
// refused, with an error wrapping shared.ErrFailedPrecondition, unless the
// sandbox block says unsafe_shared = true.
func (s *Sandbox) CheckSharedServing(ctx context.Context) error {
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	if info.Has(shared.CapFreshProcess) || s.cfg.UnsafeShared {
		return nil
	}
	return fmt.Errorf("sandbox %q (plugin %q) runs every call in one shared interpreter, so one caller's code "+
		"could persist into the next caller's; serve it to many callers only with unsafe_shared = true in its "+
		"sandbox block, or use a tier with fresh processes (subprocess, docker): %w",
		s.cfg.Name, s.cfg.Plugin, shared.ErrFailedPrecondition)
}

// AllowedImports returns the import allowlist of a call: the policy's
// allowed_imports together with extra (see Policy.Allowed).
func (s *Sandbox) AllowedImports(extra ...string) []string { return s.policy.Allowed(extra...) }

// StaticCheck runs only the host's validator (no plugin) on code under the
// policy's allowlist plus extra; see CheckCode.
func (s *Sandbox) StaticCheck(ctx context.Context, code string, extra ...string) []shared.Finding {
	return CheckCode(ctx, s.host.opts.checker, s.policy, code, extra...)
}

// Validate runs the static checks on code under the policy's allowlist plus
// extra: first the host's own validator (defence in depth), then the
// plugin's Validate. A rejection is a *shared.ValidationError (errors.Is
// ErrValidation); other errors are infrastructure failures.
func (s *Sandbox) Validate(ctx context.Context, code string, extra ...string) error {
	if fs := s.StaticCheck(ctx, code, extra...); len(fs) > 0 {
		return &shared.ValidationError{Findings: fs}
	}
	var resp shared.ValidateResponse
	err := s.inst.do(ctx, "Validate", func(p shared.Sandbox) error {
		var err error
		resp, err = p.Validate(ctx, shared.ValidateRequest{Code: code, AllowedImports: s.AllowedImports(extra...)})
		return err
	})
	if err != nil {
		return err
	}
	return resp.Err()
}

// Execute runs code (the body of a function receiving `args`) in the
// sandbox. Before calling the plugin it
//
//   - applies the policy: AllowedImports becomes the policy's allowed_imports
//     together with the request's; a zero Timeout, MemoryMB or MaxOutputBytes
//     takes the policy's value (a non-zero one overrides it: the caller is
//     trusted host code, not the LLM);
//   - refuses a call whose allowlist names a dangerous module (rules.json
//     dangerous_imports: os, sys, subprocess, ...) that the policy does not
//     acknowledge in allow_dangerous_imports: an error wrapping
//     shared.ErrFailedPrecondition (see LintPolicy for the lint);
//   - refuses Dependencies that are not in the policy's allowed_packages
//     (PEP 503 names, optionally name==version): an error wrapping
//     shared.ErrPermissionDenied that names the package; a malformed one
//     wraps shared.ErrInvalidArgument;
//   - checks sizes: code over max_code_bytes or args over max_args_bytes, or
//     args that are not a JSON object, are errors wrapping
//     shared.ErrInvalidArgument;
//   - refuses Dependencies on a plugin that does not declare the
//     "dependencies" capability (shared.ErrNotSupported);
//   - refuses a Stateful call without a SessionID (shared.ErrInvalidArgument)
//     or on a plugin without the "stateful_sessions" capability
//     (shared.ErrNotSupported);
//   - validates in the host: a rejection is a result with Success false,
//     ErrorKind "validation" and the Findings, and the plugin is not called.
//
// A call on a session the host opened whose backend session is gone (the
// plugin was relaunched, the plugin lost it, the host reclaimed it after
// idle_timeout, max_lifetime or at a cap) runs in a new backend session of
// the same id and user, and its result says StateLost (sessions.go).
//
// User-code failures (runtime error, timeout, memory, ...) are in the
// result, never in the error. The error is reserved for infrastructure
// failures; a plugin that died during the call wraps shared.ErrPluginShutdown
// (the next call relaunches it).
//
// The host owns the wall clock, whatever the backend: a call still running
// at its timeout plus a grace (10%, at least 1 s; plus a minute of setup on
// a session backend) is told to stop (its context ends in the plugin), and
// one whose plugin has not returned a grace later is abandoned and the
// plugin killed, so the execution surely ends; either way the result is a
// timeout whose error says the host's wall clock ended it.
//
// Every call is observed once: the orqest.execute span (WithTracerProvider),
// the host's metrics (Registry), an info-level log line, and a record in the
// audit log when the policy sets audit_log (docs/observability.md).
func (s *Sandbox) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecutionResult, error) {
	return s.observeExecute(ctx, req, func(ctx context.Context, obs *execObservation) (shared.ExecutionResult, error) {
		return s.execute(ctx, req, obs, nil)
	})
}

// ExecuteStream runs req as Execute does and gives onChunk the call's
// stdout and stderr as the code writes them, before it returns the result.
// On a plugin that declares shared.CapStreaming the chunks arrive while
// the code runs; on any other, the whole of each stream arrives once, when
// the call ends. Either way the result's Stdout and Stderr hold the same
// bytes, and a call that timed out or was killed keeps what it wrote
// before. onChunk is called from one goroutine at a time and should not
// block: the plugin waits for it.
func (s *Sandbox) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, onChunk func(shared.OutputChunk)) (shared.ExecutionResult, error) {
	if onChunk == nil {
		return s.Execute(ctx, req)
	}
	return s.observeExecute(ctx, req, func(ctx context.Context, obs *execObservation) (shared.ExecutionResult, error) {
		return s.execute(ctx, req, obs, onChunk)
	})
}

func (s *Sandbox) execute(ctx context.Context, req shared.ExecuteRequest, obs *execObservation, onChunk func(shared.OutputChunk)) (shared.ExecutionResult, error) {
	// The session is busy from here (also while the call waits for a
	// slot): the reaper never closes it under the call.
	call := s.beginSession(req.SessionID)
	defer call.end()
	req, limits, err := s.applyPolicy(req)
	if err != nil {
		return shared.ExecutionResult{}, err
	}
	fs, verdict := s.host.check(ctx, req.Code, req.AllowedImports, validator.Features{Classes: s.policy.Classes})
	if len(fs) > 0 {
		return shared.Rejected(fs, limits), nil
	}
	// Only the host's own verdict goes to the plugin, never a caller's.
	req.Verdict = verdict
	if len(req.Dependencies) > 0 {
		info, err := s.inst.infoOf(ctx)
		if err != nil {
			return shared.ExecutionResult{}, err
		}
		if !info.Has(shared.CapDependencies) {
			return shared.ExecutionResult{}, fmt.Errorf("sandbox %q: plugin %q does not install dependencies (no %q capability; use a session tier such as docker): %w",
				s.cfg.Name, s.cfg.Plugin, shared.CapDependencies, shared.ErrNotSupported)
		}
	}
	if req, err = s.statefulDefault(req); err != nil {
		return shared.ExecutionResult{}, err
	}
	if req.Stateful {
		if err := s.checkStateful(ctx, req); err != nil {
			return shared.ExecutionResult{}, err
		}
	}
	waitStart := time.Now()
	release, err := s.admit.acquire(ctx, s.cfg.Name, req.Timeout)
	obs.queueWait = time.Since(waitStart)
	s.host.metrics.queueWait.WithLabelValues(s.cfg.Name).Observe(obs.queueWait.Seconds())
	if err != nil {
		return shared.ExecutionResult{}, err
	}
	defer release()
	// The host's wall clock over the call (wallclock.go): the plugin is
	// told to stop at the timeout and a grace, and killed if it does not.
	clock, err := s.clockFor(ctx, req.Timeout)
	if err != nil {
		return shared.ExecutionResult{}, err
	}
	var resp shared.ExecuteResponse
	start := time.Now()
	clockCtx, cancelClock := clock.context(ctx)
	defer cancelClock()
	callCtx, span := s.host.tracer.Start(clockCtx, SpanPluginCall, trace.WithAttributes(
		attribute.String("orqest.sandbox", s.cfg.Name), attribute.String("orqest.plugin", s.cfg.Plugin)))
	streamed := false
	if onChunk != nil {
		info, err := s.inst.infoOf(ctx)
		if err != nil {
			span.End()
			return shared.ExecutionResult{}, err
		}
		streamed = info.Has(shared.CapStreaming)
	}
	var served shared.Sandbox
	err = s.sessionDo(callCtx, call, "Execute", func(p shared.Sandbox) error {
		served = p
		var err error
		if st, ok := p.(shared.Streamer); ok && streamed {
			resp, err = st.ExecuteStream(callCtx, req, func(c shared.OutputChunk) error {
				onChunk(c)
				return nil
			})
			return err
		}
		resp, err = p.Execute(callCtx, req)
		return err
	})
	elapsed := time.Since(start)
	obs.called, obs.plugin = true, elapsed
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, errorClassOf(err))
	}
	span.End()
	if r, ok := s.overrun(ctx, clockCtx, clock, limits, resp, err, elapsed, served); ok {
		return r, nil
	}
	if err != nil {
		return shared.ExecutionResult{}, err
	}
	s.publish(resp.Events) // the backend's events (e.g. the tool library's) on the host bus; library.go
	r := resp.Result
	if call.reopened {
		// It ran in a backend session opened again under the same id
		// (sessions.go): what earlier calls left there is gone.
		r.StateLost = true
	}
	if onChunk != nil && !streamed {
		if r.Stdout != "" {
			onChunk(shared.OutputChunk{Stream: shared.StreamStdout, Data: []byte(r.Stdout)})
		}
		if r.Stderr != "" {
			onChunk(shared.OutputChunk{Stream: shared.StreamStderr, Data: []byte(r.Stderr)})
		}
	}
	if len(r.Output) == 0 {
		r.Output = json.RawMessage("null")
	} else {
		// Canonical, compact JSON whatever the backend's encoder.
		var buf bytes.Buffer
		if json.Compact(&buf, r.Output) == nil {
			r.Output = buf.Bytes()
		}
	}
	return r, nil
}

// statefulDefault applies the sandbox's `stateful` default: a session call
// that asked for neither Stateful nor Stateless becomes stateful when the
// sandbox block sets stateful = true. Stateless is cleared either way (the
// plugin never sees it); both together are a *shared.FieldError.
func (s *Sandbox) statefulDefault(req shared.ExecuteRequest) (shared.ExecuteRequest, error) {
	switch {
	case req.Stateful && req.Stateless:
		return req, &shared.FieldError{Field: "stateful", Reason: "stateful and stateless together: ask for one"}
	case !req.Stateful && !req.Stateless && s.cfg.Stateful && req.SessionID != "":
		req.Stateful = true
	}
	req.Stateless = false
	return req, nil
}

// checkStateful refuses a stateful call the sandbox cannot honour: one
// without a session (the interpreter whose globals persist belongs to a
// session; ErrInvalidArgument) and one on a plugin that does not declare
// shared.CapStatefulSessions (ErrNotSupported). Neither reaches the plugin.
func (s *Sandbox) checkStateful(ctx context.Context, req shared.ExecuteRequest) error {
	if req.SessionID == "" {
		return &shared.FieldError{Field: "stateful", Reason: "a stateful call runs in a session's long-lived interpreter: open a session (Open, or run --session) and pass its id"}
	}
	info, err := s.inst.infoOf(ctx)
	if err != nil {
		return err
	}
	if !info.Has(shared.CapStatefulSessions) {
		return fmt.Errorf("sandbox %q: plugin %q has no stateful sessions (no %q capability; use the docker plugin): %w",
			s.cfg.Name, s.cfg.Plugin, shared.CapStatefulSessions, shared.ErrNotSupported)
	}
	return nil
}

// applyPolicy checks req against the sandbox's policy and returns the
// request the plugin gets, its limits resolved once (shared.Prepare with
// the policy's limits: the plugin and its runtime find nothing left to
// default), and the record of those limits for the result.
func (s *Sandbox) applyPolicy(req shared.ExecuteRequest) (shared.ExecuteRequest, shared.Limits, error) {
	p := s.policy
	if bytes.Equal(bytes.TrimSpace(req.Args), []byte("null")) {
		req.Args = nil // null args are no args: {}
	}
	prep, err := shared.Prepare(req, p.limits())
	if err != nil {
		if errors.Is(err, shared.ErrAboveCeiling) {
			err = p.refused(err)
		}
		return req, shared.Limits{}, err
	}
	req = prep.Apply(req)
	if err := p.checkDangerous(req.AllowedImports...); err != nil {
		return req, shared.Limits{}, p.refused(err)
	}
	if err := p.checkUnreviewed(req.AllowedImports...); err != nil {
		return req, shared.Limits{}, p.refused(err)
	}
	// Dependencies: each must be in allowed_packages, else the call is
	// refused here, before the plugin (fail closed; the plugin and its
	// runtime check again against the list they got at Configure). A
	// malformed name is the request's fault, not the policy's.
	if _, err := shared.CheckDependencies(req.Dependencies, p.AllowedPackages); err != nil {
		err = fmt.Errorf("policy %q: %w", p.Name, err)
		if errors.Is(err, shared.ErrPermissionDenied) {
			err = p.refused(err)
		}
		return req, shared.Limits{}, err
	}
	req.AllowedImports = s.AllowedImports(req.AllowedImports...)
	return req, prep.Limits(), nil
}

// Open starts a session on a session tier (shared.ErrNotSupported
// elsewhere) and the host keeps its record (sessions.go): the session is
// closed by the host after the sandbox's idle_timeout without calls or its
// max_lifetime; at the policy's max_sessions or max_sessions_per_user (for
// req.UserID) the least recently used session of that scope idle for
// reclaim_idle_after is closed to make room, and without one the Open is
// refused with a *SessionLimitError (shared.ErrFailedPrecondition). A call
// on the session after the host closed it, after a plugin relaunch, or
// after the plugin lost it, runs in a new backend session of the same id
// and user (an execution's result says StateLost).
func (s *Sandbox) Open(ctx context.Context, req shared.OpenRequest) (shared.OpenResponse, error) {
	return s.openSession(ctx, req)
}

// CloseSession ends a session opened with Open, and the host forgets it.
// A session the host had reclaimed is only forgotten.
func (s *Sandbox) CloseSession(ctx context.Context, sessionID string) error {
	return s.closeSession(ctx, sessionID)
}
