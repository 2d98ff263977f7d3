package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// Factory returns the backend under test. Run calls it once per case and per
// mode (in-process and gRPC), so each case gets a fresh value; a backend that
// must be a process-wide singleton (embedded CPython) may return the same
// value every time, as long as Configure may then be called more than once.
// Cleanup belongs in t.Cleanup.
type Factory func(t *testing.T) shared.Sandbox

// Option adjusts Run.
type Option func(*config)

type config struct {
	configure  shared.ConfigureRequest
	scale      float64
	sessionFor string
	skips      map[string]string
	kill       AgentKiller
	reopen     time.Duration
	library    bool
}

// AgentKiller kills the agent that serves an open session from outside
// the plugin, as an operator or the kernel would: `docker kill` of its
// container, SIGKILL of its sandbox, deletion of its pod. impl is the
// factory's value (in both modes), for a backend whose agents are found
// through it.
type AgentKiller func(t *testing.T, impl shared.Sandbox, sessionID string)

// WithAgentKiller enables the AgentDeath case: a session whose agent is
// killed mid-call fails that call with shared.ErrUnavailable, and the next
// call on the same session id succeeds in a fresh agent with StateLost.
// Without it a session backend's AgentDeath case is skipped, saying so.
func WithAgentKiller(kill AgentKiller) Option {
	return func(c *config) { c.kill = kill }
}

// WithReopenWithin bounds how long the first call after an agent's death
// may take (it starts a fresh agent); default 30 s, scaled.
func WithReopenWithin(d time.Duration) Option {
	return func(c *config) { c.reopen = d }
}

// WithPersistentLibrary makes the AgentDeath case check that the user's
// tool library outlives the agent (a backend whose library lives on the
// user's volume; one whose library dies with the agent leaves it off).
func WithPersistentLibrary() Option {
	return func(c *config) { c.library = true }
}

// WithConfigure sets the Configure request Run sends after Info and before
// any other call in each case (the host sends the decoded `config {}` block
// and the `unsafe` flag the same way). The default is the zero request: no
// config block, unsafe=false.
func WithConfigure(req shared.ConfigureRequest) Option {
	return func(c *config) { c.configure = req }
}

// WithTimeoutScale multiplies every time bound of the suite (how fast a
// timed-out call must return, the per-call deadline) by f, for slow machines
// or backends with a costly start such as a container per session. Limits
// sent to the backend (e.g. a 500ms timeout) are not scaled. f <= 0 is
// ignored.
func WithTimeoutScale(f float64) Option {
	return func(c *config) {
		if f > 0 {
			c.scale = f
		}
	}
}

// WithSession makes each case open a session for userID (Open) after
// Configure, send its SessionID and UserID with every Execute, and Close it
// at the end. Use it for session tiers whose Execute needs a session.
func WithSession(userID string) Option {
	return func(c *config) { c.sessionFor = userID }
}

// WithSkip skips the named case (see CaseNames) in both modes, reporting
// reason in the test output. It is for a documented gap of a backend; a
// missing capability is detected from Info and needs no option. Naming an
// unknown case fails the test, so a renamed case cannot hide.
func WithSkip(caseName, reason string) Option {
	return func(c *config) {
		if c.skips == nil {
			c.skips = map[string]string{}
		}
		c.skips[caseName] = reason
	}
}

// CaseNames returns the names of the suite's cases in the order Run runs
// them. Subtests are named "inprocess/<Case>" and "grpc/<Case>".
func CaseNames() []string {
	out := make([]string, 0, len(allCases))
	for _, c := range allCases {
		out = append(out, c.name)
	}
	return out
}

// Modes in which every case runs.
const (
	// ModeInProcess calls the factory's value directly.
	ModeInProcess = "inprocess"
	// ModeGRPC serves the value with goplugin.TestPluginGRPCConn and calls the
	// shared.Sandbox the go-plugin client dispenses.
	ModeGRPC = "grpc"
)

// Run runs every case of the suite against the backend the factory returns,
// first in-process and then over gRPC, as subtests of t. See the package
// documentation.
func Run(t *testing.T, factory Factory, opts ...Option) {
	t.Helper()
	cfg := &config{scale: 1}
	for _, o := range opts {
		o(cfg)
	}
	known := map[string]bool{}
	for _, n := range CaseNames() {
		known[n] = true
	}
	for name := range cfg.skips {
		if !known[name] {
			t.Fatalf("conformance.WithSkip(%q): no such case; cases are %s", name, strings.Join(CaseNames(), ", "))
		}
	}
	for _, mode := range []string{ModeInProcess, ModeGRPC} {
		t.Run(mode, func(t *testing.T) {
			for _, c := range allCases {
				t.Run(c.name, func(t *testing.T) {
					if reason, ok := cfg.skips[c.name]; ok {
						t.Skipf("skipped by the backend's own test (conformance.WithSkip): %s", reason)
					}
					h := newHarness(t, factory, mode, cfg, c)
					c.run(t, h)
				})
			}
		})
	}
}

// harness is what a case works with: the Sandbox under test (direct or over
// gRPC), the direct implementation, its Info and the options.
type harness struct {
	mode    string
	sb      shared.Sandbox // what the case calls
	impl    shared.Sandbox // the factory's value
	info    shared.InfoResponse
	cfg     *config
	session string
}

func newHarness(t *testing.T, factory Factory, mode string, cfg *config, c testCase) *harness {
	t.Helper()
	impl := factory(t)
	if impl == nil {
		t.Fatal("conformance: the factory returned a nil shared.Sandbox")
	}
	h := &harness{mode: mode, sb: impl, impl: impl, cfg: cfg}
	if mode == ModeGRPC {
		client, server := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
			plugin.PluginName: &plugin.SandboxPlugin{Impl: impl},
		})
		t.Cleanup(func() {
			// Close asks the server to stop through go-plugin's controller
			// service (as the host does with a real plugin); stopping it
			// here as well would race with that. Stop it only if it hangs.
			_ = client.Close()
			select {
			case <-server.DoneCh:
			case <-time.After(5 * time.Second):
				server.Stop()
			}
		})
		raw, err := client.Dispense(plugin.PluginName)
		if err != nil {
			t.Fatalf("conformance: Dispense(%q): %v", plugin.PluginName, err)
		}
		sb, ok := raw.(shared.Sandbox)
		if !ok {
			t.Fatalf("conformance: Dispense(%q) returned %T, not a shared.Sandbox", plugin.PluginName, raw)
		}
		h.sb = sb
	}
	info, err := h.sb.Info(h.ctx(t), shared.InfoRequest{})
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	h.info = info
	if c.unconfigured {
		h.needs(t, c)
		return h
	}
	if _, err := h.sb.Configure(h.ctx(t), cfg.configure); err != nil {
		t.Fatalf("Configure(%s, unsafe=%v): %v (pass conformance.WithConfigure to send the request this backend needs)",
			string(cfg.configure.Config), cfg.configure.Unsafe, err)
	}
	// Capabilities may depend on the configuration (classes): as the host
	// does, ask again once it is applied.
	after, err := h.sb.Info(h.ctx(t), shared.InfoRequest{})
	if err != nil {
		t.Fatalf("Info after Configure: %v", err)
	}
	h.info = after
	h.needs(t, c) // capabilities may depend on the configuration (a runtime found, classes)
	if cfg.sessionFor != "" && !c.noSession {
		resp, err := h.sb.Open(h.ctx(t), shared.OpenRequest{UserID: cfg.sessionFor})
		if err != nil {
			t.Fatalf("Open(user %q): %v", cfg.sessionFor, err)
		}
		if resp.SessionID == "" {
			t.Fatalf("Open(user %q) returned an empty SessionID", cfg.sessionFor)
		}
		h.session = resp.SessionID
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), h.scaled(30*time.Second))
			defer cancel()
			if _, err := h.sb.Close(ctx, shared.CloseRequest{SessionID: resp.SessionID}); err != nil {
				t.Errorf("Close(session %q): %v", resp.SessionID, err)
			}
		})
	}
	return h
}

// needs skips the case unless the backend declares every capability it
// needs.
func (h *harness) needs(t *testing.T, c testCase) {
	t.Helper()
	for _, capability := range c.needs {
		if !h.info.Has(capability) {
			t.Skipf("backend %q (tier %d) does not declare capability %q, which this case needs; declared: %v",
				h.info.Name, h.info.Tier, capability, h.info.Capabilities)
		}
	}
}

// scaled multiplies d by the timeout scale.
func (h *harness) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * h.cfg.scale)
}

// ctx returns a context for one call, bounded by the per-call deadline and
// cancelled when the test ends.
func (h *harness) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), h.scaled(60*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// call runs Execute and returns the response, the error and the wall time the
// call took as the caller saw it.
func (h *harness) call(ctx context.Context, req shared.ExecuteRequest) (shared.ExecutionResult, time.Duration, error) {
	if h.session != "" {
		req.SessionID = h.session
		req.UserID = h.cfg.sessionFor
	}
	start := time.Now()
	resp, err := h.sb.Execute(ctx, req)
	return resp.Result, time.Since(start), err
}

// execute runs Execute and fails the test on a Go error: every case that
// uses it is a user-code outcome, which must land in the result. It checks
// the invariants every result must satisfy.
func (h *harness) execute(t *testing.T, req shared.ExecuteRequest) shared.ExecutionResult {
	t.Helper()
	res, elapsed, err := h.call(h.ctx(t), req)
	if err != nil {
		t.Fatalf("Execute(%s) returned a Go error: %v\n"+
			"a failure of the user's code must land in the ExecutionResult (success=false, error_kind); "+
			"a Go error is reserved for infrastructure failure", quote(req.Code), err)
	}
	if msg := invariantViolation(res, elapsed); msg != "" {
		t.Errorf("Execute(%s): %s\nresult: %s", quote(req.Code), msg, dump(res))
	}
	return res
}

// validate runs Validate and fails the test on a Go error.
func (h *harness) validate(t *testing.T, code string, allowed []string) []shared.Finding {
	t.Helper()
	resp, err := h.sb.Validate(h.ctx(t), shared.ValidateRequest{Code: code, AllowedImports: allowed})
	if err != nil {
		t.Fatalf("Validate(%s) returned a Go error: %v\n"+
			"a rejection must be reported as findings; a Go error is reserved for infrastructure failure",
			quote(code), err)
	}
	return resp.Findings
}

// healthy checks that the backend still serves a trivial call, e.g. after a
// timeout or an out-of-memory kill.
func (h *harness) healthy(t *testing.T, after string) {
	t.Helper()
	res := h.execute(t, shared.ExecuteRequest{Code: "return 1 + 1", Timeout: 10 * time.Second})
	if !res.Success || !jsonEqual(res.Output, []byte("2")) {
		t.Errorf("after %s, `return 1 + 1` did not succeed with 2: %s", after, dump(res))
	}
}

// invariantViolation checks what every ExecutionResult must satisfy and
// returns a description of the first violation, or "".
func invariantViolation(res shared.ExecutionResult, elapsed time.Duration) string {
	if res.Success {
		if res.ErrorKind != shared.KindNone {
			return fmt.Sprintf("success=true but error_kind=%q", res.ErrorKind)
		}
		if len(res.Output) == 0 || !json.Valid(res.Output) {
			return fmt.Sprintf("success=true but output %q is not one JSON value", string(res.Output))
		}
	} else {
		if res.ErrorKind == shared.KindNone {
			return "success=false without an error_kind"
		}
		if res.Error == "" {
			return fmt.Sprintf("success=false (error_kind %q) with an empty error message", res.ErrorKind)
		}
	}
	if res.DurationMS < 0 {
		return fmt.Sprintf("negative duration_ms %v", res.DurationMS)
	}
	// The backend measures inside the call; it cannot exceed what the caller
	// saw (a little slack for clock granularity).
	if limit := float64(elapsed.Microseconds())/1000 + 50; res.DurationMS > limit {
		return fmt.Sprintf("duration_ms %.1f exceeds the %.1f ms the whole call took", res.DurationMS, limit-50)
	}
	return ""
}

// expectSuccess fails unless res succeeded with output equal (as JSON) to
// want.
func expectSuccess(t *testing.T, code string, res shared.ExecutionResult, want string) {
	t.Helper()
	if !res.Success {
		t.Fatalf("Execute(%s) failed, want success with %s: error_kind=%q error=%q stderr=%q",
			quote(code), want, res.ErrorKind, res.Error, res.Stderr)
	}
	if !jsonEqual(res.Output, []byte(want)) {
		t.Errorf("Execute(%s): output %s, want %s", quote(code), string(res.Output), want)
	}
}

// expectFailure fails unless res failed with error_kind kind.
func expectFailure(t *testing.T, code string, res shared.ExecutionResult, kind shared.ErrorKind) {
	t.Helper()
	if res.Success {
		t.Fatalf("Execute(%s) succeeded with output %s, want success=false error_kind=%q",
			quote(code), string(res.Output), kind)
	}
	if res.ErrorKind != kind {
		t.Fatalf("Execute(%s): error_kind=%q, want %q (error: %q)", quote(code), res.ErrorKind, kind, res.Error)
	}
}

// expectFindings fails unless findings is non-empty and well formed; when
// line > 0 one finding must be on that line.
func expectFindings(t *testing.T, what, code string, findings []shared.Finding, line int) {
	t.Helper()
	if len(findings) == 0 {
		t.Fatalf("%s(%s): no findings, want a rejection", what, quote(code))
	}
	onLine := false
	for _, f := range findings {
		if f.Rule == "" || f.Message == "" {
			t.Errorf("%s(%s): finding without a rule id or message: %+v", what, quote(code), f)
		}
		if f.Line < 1 || f.Column < 1 {
			t.Errorf("%s(%s): finding without a 1-based line:col: %+v", what, quote(code), f)
		}
		if f.Line == line {
			onLine = true
		}
	}
	if line > 0 && !onLine {
		t.Errorf("%s(%s): no finding on line %d: %v", what, quote(code), line, findings)
	}
}

// jsonEqual compares two JSON documents semantically: object key order and
// number spelling (4 vs 4.0, 1e3 vs 1000) do not matter; numbers are
// compared exactly, so big integers do not lose precision.
func jsonEqual(a, b []byte) bool {
	va, err := decodeJSON(a)
	if err != nil {
		return false
	}
	vb, err := decodeJSON(b)
	if err != nil {
		return false
	}
	return valuesEqual(va, vb)
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

func valuesEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, ok1 := new(big.Rat).SetString(string(x))
		ry, ok2 := new(big.Rat).SetString(string(y))
		return ok1 && ok2 && rx.Cmp(ry) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valuesEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !valuesEqual(v, w) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a, b)
	}
}

// quote renders code for a failure message, shortened.
func quote(code string) string {
	const max = 120
	if len(code) > max {
		code = code[:max] + "…"
	}
	return fmt.Sprintf("%q", code)
}

// dump renders a result for a failure message, with long fields shortened.
func dump(res shared.ExecutionResult) string {
	short := func(s string) string {
		if len(s) > 300 {
			return s[:300] + fmt.Sprintf("…(%d bytes)", len(s))
		}
		return s
	}
	return fmt.Sprintf("{success:%v output:%s error_kind:%q error:%q stdout:%q stderr:%q stdout_truncated:%v duration_ms:%.1f limits:%+v findings:%d}",
		res.Success, short(string(res.Output)), res.ErrorKind, short(res.Error), short(res.Stdout), short(res.Stderr),
		res.StdoutTruncated, res.DurationMS, res.Limits, len(res.Findings))
}

// sortedCaps renders capabilities for comparison.
func sortedCaps(cs []shared.Capability) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, string(c))
	}
	sort.Strings(out)
	return out
}
