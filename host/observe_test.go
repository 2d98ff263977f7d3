package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const observedPolicy = `audit_log = "audit.jsonl"
policy "default" {
  allowed_imports = ["re"]
  timeout         = "3s"
}
sandbox "tier1" {
  plugin = "subprocess"
}
`

func loadObserved(t *testing.T, dir string, opts ...Option) *Host {
	t.Helper()
	needPlugin(t)
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(observedPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := LoadFile(context.Background(), path, append([]Option{WithPluginDirs(pluginDir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// One host, three executions (a success, a validation rejection, a
// timeout): the metrics, the spans, the log line and the audit records each
// say what happened; a second host on the same audit file continues its seq.
func TestExecuteObserved(t *testing.T) {
	dir := t.TempDir()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs, JSONFormat: true})
	h := loadObserved(t, dir, WithTracerProvider(tp), WithLogger(logger))
	sb, err := h.Sandbox(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithCaller(context.Background(), "test-caller")
	const okCode = "return len(args['s'])"
	const badCode = "import os\nreturn 1"
	const slowCode = "while True:\n    pass"
	calls := []struct {
		req  shared.ExecuteRequest
		kind shared.ErrorKind
	}{
		{shared.ExecuteRequest{Code: okCode, Args: json.RawMessage(`{"s":"zebra-quokka"}`), UserID: "alice"}, shared.KindNone},
		{shared.ExecuteRequest{Code: badCode, UserID: "alice"}, shared.KindValidation},
		{shared.ExecuteRequest{Code: slowCode, UserID: "bob", Timeout: 300 * time.Millisecond}, shared.KindTimeout},
	}
	for _, c := range calls {
		res, err := sb.Execute(ctx, c.req)
		if err != nil || res.ErrorKind != c.kind {
			t.Fatalf("%q: %+v, %v", c.req.Code, res, err)
		}
	}

	// Metrics.
	m := h.metrics
	for _, want := range []struct {
		outcome string
		n       float64
	}{{"success", 1}, {"validation", 1}, {"timeout", 1}} {
		if got := testutil.ToFloat64(m.executions.WithLabelValues("tier1", "1", want.outcome)); got != want.n {
			t.Errorf("orqest_executions_total{outcome=%q} = %v, want %v", want.outcome, got, want.n)
		}
	}
	if got := testutil.ToFloat64(m.rejections.WithLabelValues("tier1", "import-not-allowed")); got != 1 {
		t.Errorf("rejections{rule=import-not-allowed} = %v", got)
	}
	if got := testutil.ToFloat64(m.kills.WithLabelValues("tier1", "timeout")); got != 1 {
		t.Errorf("kills{reason=timeout} = %v", got)
	}
	if got := testutil.ToFloat64(m.launches.WithLabelValues("tier1", "subprocess")); got != 1 {
		t.Errorf("launches = %v", got)
	}
	counts := histogramCounts(t, h)
	// The rejection never reached the plugin nor the queue.
	if counts["orqest_plugin_call_seconds"] != 2 || counts["orqest_queue_wait_seconds"] != 2 || counts["orqest_execution_seconds"] != 3 {
		t.Errorf("histogram sample counts %v", counts)
	}

	// Spans: one orqest.execute per call, a plugin-call child for the two
	// that reached the plugin, and the gRPC client span under it.
	var execs, calls2 []sdktrace.ReadOnlySpan
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byID[s.SpanContext().SpanID()] = s
		switch s.Name() {
		case SpanExecute:
			execs = append(execs, s)
		case SpanPluginCall:
			calls2 = append(calls2, s)
		}
	}
	if len(execs) != 3 || len(calls2) != 2 {
		t.Fatalf("%d execute spans, %d plugin-call spans", len(execs), len(calls2))
	}
	attrs := map[string]string{}
	for _, kv := range execs[0].Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["orqest.code.sha256"] != CodeSHA256(okCode) || attrs["orqest.caller"] != "test-caller" || attrs["orqest.user"] != "alice" ||
		attrs["orqest.outcome"] != "success" || attrs["orqest.tier"] != "1" || attrs["orqest.plugin"] != "subprocess" || attrs["orqest.sandbox"] != "tier1" {
		t.Errorf("execute span attributes %v", attrs)
	}
	for _, c := range calls2 {
		p, ok := byID[c.Parent().SpanID()]
		if !ok || p.Name() != SpanExecute || c.SpanContext().TraceID() != p.SpanContext().TraceID() {
			t.Errorf("plugin-call span's parent is not an execute span")
		}
		var grpcChild bool
		for _, s := range rec.Ended() {
			if s.Parent().SpanID() == c.SpanContext().SpanID() && s.SpanKind() == trace.SpanKindClient {
				grpcChild = true
			}
		}
		if !grpcChild {
			t.Errorf("no gRPC client span under the plugin call")
		}
	}

	// The log line: one per execution, the hash's first 12 hex, never the code.
	out := logs.String()
	if n := strings.Count(out, `"@message":"execution"`); n != 3 {
		t.Errorf("%d execution log lines:\n%s", n, out)
	}
	if !strings.Contains(out, `"code_sha256":"`+CodeSHA256(okCode)[:12]+`"`) || !strings.Contains(out, `"outcome":"timeout"`) {
		t.Errorf("log lines lack the hash or the outcome:\n%s", out)
	}
	if strings.Contains(out, "while True") || strings.Contains(out, "args['s']") || strings.Contains(out, "zebra-quokka") {
		t.Errorf("the log carries code or args:\n%s", out)
	}

	// The audit log: one record per execution, in seq order.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	evs := executionRecords(t, filepath.Join(dir, "audit.jsonl"))
	if len(evs) != 3 {
		t.Fatalf("%d execution records", len(evs))
	}
	first := evs[0].Payload
	if first["code_sha256"] != CodeSHA256(okCode) || first["caller"] != "test-caller" || first["user"] != "alice" ||
		first["outcome"] != "success" || first["sandbox"] != nil || evs[0].Sandbox != "tier1" || first["tier"] != "1" {
		t.Errorf("first record %+v", evs[0])
	}
	if evs[1].Payload["error_kind"] != "validation" || evs[1].Payload["findings"] != float64(1) {
		t.Errorf("second record %+v", evs[1])
	}
	if evs[2].Payload["error_kind"] != "timeout" || evs[2].Payload["user"] != "bob" {
		t.Errorf("third record %+v", evs[2])
	}
	if b := mustRead(t, filepath.Join(dir, "audit.jsonl")); bytes.Contains(b, []byte("while True")) || bytes.Contains(b, []byte("zebra-quokka")) {
		t.Error("the audit log carries code or args")
	}
	last := evs[2].Seq

	// A new host (a new process, as far as the file can tell) continues
	// the file's sequence.
	h2 := loadObserved(t, dir)
	sb2, _ := h2.Sandbox(context.Background(), "")
	if _, err := sb2.Execute(context.Background(), shared.ExecuteRequest{Code: badCode}); err != nil {
		t.Fatal(err)
	}
	h2.Close()
	all := readAudit(t, filepath.Join(dir, "audit.jsonl"))
	if got := all[len(all)-1]; got.Type != EventExecution || got.Seq != last+1 {
		t.Fatalf("the second host's record has seq %d (%s), want %d", got.Seq, got.Type, last+1)
	}
	for i := range all {
		if all[i].Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, all[i].Seq)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func executionRecords(t *testing.T, path string) []Event {
	t.Helper()
	var out []Event
	for _, ev := range readAudit(t, path) {
		if ev.Type == EventExecution {
			out = append(out, ev)
		}
	}
	return out
}

func histogramCounts(t *testing.T, h *Host) map[string]uint64 {
	t.Helper()
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if hg := m.GetHistogram(); hg != nil {
				out[mf.GetName()] += hg.GetSampleCount()
			}
		}
	}
	return out
}

// A plugin process that installs a tracer provider gets the host's trace:
// its server span's parent is the host's gRPC client span (under
// orqest.plugin_call, under orqest.execute), and the span its Execute
// starts is a child of that server span, all in one trace.
func TestTraceReachesPluginProcess(t *testing.T) {
	dir := buildTestPlugin(t, "traced", "tracedplugin")
	cfg, diags := ParseConfig(filepath.Join(dir, "config.hcl"), []byte("sandbox \"t\" {\n  plugin = \"traced\"\n}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	spansFile := filepath.Join(dir, "spans.jsonl")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	ctx := context.Background()
	h, err := Load(ctx, cfg, WithPluginDirs(dir), WithPluginEnv("ORQEST_TEST_SPANS="+spansFile), WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sb, _ := h.Sandbox(ctx, "")
	if res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1"}); err != nil || !res.Success {
		t.Fatalf("%+v %v", res, err)
	}

	var execSpan, call, client sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case s.Name() == SpanExecute:
			execSpan = s
		case s.Name() == SpanPluginCall:
			call = s
		}
	}
	for _, s := range rec.Ended() {
		if call != nil && s.SpanKind() == trace.SpanKindClient && s.Parent().SpanID() == call.SpanContext().SpanID() {
			client = s
		}
	}
	if execSpan == nil || call == nil || client == nil || call.Parent().SpanID() != execSpan.SpanContext().SpanID() {
		t.Fatalf("host spans: execute %v, plugin call %v, client %v", execSpan != nil, call != nil, client != nil)
	}

	// The plugin exports its spans as they end; its server span ends just
	// after the response, so wait for it.
	type pspan struct{ Name, TraceID, SpanID, ParentID string }
	var server, backend *pspan
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (server == nil || backend == nil) {
		server, backend = nil, nil
		b, _ := os.ReadFile(spansFile)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]string
			if json.Unmarshal([]byte(line), &m) != nil {
				continue
			}
			s := &pspan{m["name"], m["trace_id"], m["span_id"], m["parent_id"]}
			switch {
			case s.Name == "backend.execute":
				backend = s
			case strings.HasSuffix(s.Name, "Sandbox/Execute"):
				server = s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if server == nil || backend == nil {
		t.Fatalf("the plugin exported no server or backend span for Execute")
	}
	want := execSpan.SpanContext().TraceID().String()
	if server.TraceID != want || backend.TraceID != want {
		t.Fatalf("plugin spans in traces %s and %s, the host's is %s", server.TraceID, backend.TraceID, want)
	}
	if server.ParentID != client.SpanContext().SpanID().String() || backend.ParentID != server.SpanID {
		t.Fatalf("plugin span parents: server's %s (host client span %s), backend's %s (server span %s)",
			server.ParentID, client.SpanContext().SpanID(), backend.ParentID, server.SpanID)
	}
}

// An infrastructure error that wraps a context error beside its class is
// counted under the class the backend named, here and after the wire.
func TestOutcomeOfADoublyWrappedError(t *testing.T) {
	err := fmt.Errorf("execute: start python3: %w: %w", context.DeadlineExceeded, shared.ErrUnavailable)
	for _, e := range []error{err, plugin.FromGRPC(plugin.ToGRPC(err))} {
		if got := outcomeOf(shared.ExecutionResult{}, e); got != OutcomeErrorPrefix+"unavailable" {
			t.Errorf("outcomeOf(%v) = %q, want %q", e, got, OutcomeErrorPrefix+"unavailable")
		}
		if got := errorClassOf(e); got != "unavailable" {
			t.Errorf("errorClassOf(%v) = %q", e, got)
		}
	}
}
