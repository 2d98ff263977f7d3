package host

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A subscriber that never reads loses events (counted) but never slows
// down the publisher or the other subscribers.
func TestBusStuckSubscriberDoesNotBlock(t *testing.T) {
	b := NewBus()
	stuck := b.Subscribe(1)
	var got []Event
	cancel := b.SubscribeFunc(2000, func(ev Event) { got = append(got, ev) })

	const n = 1000
	done := make(chan struct{})
	go func() {
		for i := 0; i < n; i++ {
			b.Emit(EventToolSpawned, "sb", map[string]any{"tool_name": "t"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a subscriber that never reads")
	}
	cancel()
	if len(got) != n {
		t.Fatalf("reading subscriber got %d events, want %d", len(got), n)
	}
	for i, ev := range got {
		if ev.Seq != uint64(i+1) || ev.Time.IsZero() {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	if stuck.Dropped() != n-1 || b.Dropped() != n-1 || b.Published() != n {
		t.Fatalf("dropped %d (bus %d), published %d", stuck.Dropped(), b.Dropped(), b.Published())
	}
	if ev := <-stuck.C; ev.Seq != 1 {
		t.Fatalf("the stuck subscriber's buffered event: %+v", ev)
	}
	b.Close()
	if _, ok := <-stuck.C; ok {
		t.Fatal("channel open after Bus.Close")
	}
	b.Emit(EventToolSpawned, "", nil) // no-op, no panic
	if s := b.Subscribe(1); s != nil {
		if _, ok := <-s.C; ok {
			t.Fatal("subscription after Close is open")
		}
	}
}

func TestBusFilterAndUnsubscribe(t *testing.T) {
	b := NewBus()
	defer b.Close()
	fails := b.Subscribe(10, EventToolSpawnFailed, EventValidationRejected)
	b.Emit(EventToolSpawned, "", map[string]any{"tool_name": "a"})
	b.Emit(EventToolSpawnFailed, "", map[string]any{"tool_name": "b", "reason": "r"})
	if ev := <-fails.C; ev.Type != EventToolSpawnFailed || ev.ToolName() != "b" || ev.Seq != 2 {
		t.Fatalf("event %+v", ev)
	}
	fails.Close()
	fails.Close() // idempotent
	if _, ok := <-fails.C; ok {
		t.Fatal("open after Close")
	}
	b.Emit(EventToolSpawnFailed, "", nil) // nobody listening: fine

	// Concurrent publishers, subscribers coming and going.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				b.Emit(EventToolSpawned, "", nil)
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				b.Subscribe(4).Close()
			}
		}()
	}
	wg.Wait()
}

func TestNilBus(t *testing.T) {
	var b *Bus
	b.Emit(EventToolSpawned, "", nil)
	s := b.Subscribe(1)
	if _, ok := <-s.C; ok {
		t.Fatal("nil bus subscription open")
	}
	s.Close()
	if b.Close() != nil || b.Dropped() != 0 || b.Published() != 0 {
		t.Fatal("nil bus")
	}
}

func TestAuditLogFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "audit.jsonl")
	b := NewBus()
	a, err := OpenAuditLog(b, path)
	if err != nil {
		t.Fatal(err)
	}
	b.Emit(EventToolSpawned, "tier1", map[string]any{"tool_name": "x"})
	b.Emit(EventInvocationCompleted, "tier1", map[string]any{"tool_name": "x", "duration_ms": 1.5})
	if err := b.Close(); err != nil { // closes the log, flushing it
		t.Fatal(err)
	}
	if a.Written() != 2 || a.Close() != nil {
		t.Fatalf("written %d", a.Written())
	}
	evs := readAudit(t, path)
	if len(evs) != 2 || evs[0].Type != EventToolSpawned || evs[1].Payload["duration_ms"] != 1.5 || evs[1].Sandbox != "tier1" {
		t.Fatalf("audit %+v", evs)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	// Appends.
	b = NewBus()
	if _, err := OpenAuditLog(b, path); err != nil {
		t.Fatal(err)
	}
	b.Emit(EventToolSpawned, "", map[string]any{"tool_name": "y"})
	b.Close()
	if evs := readAudit(t, path); len(evs) != 3 || evs[2].ToolName() != "y" {
		t.Fatalf("audit %+v", evs)
	}
}

func readAudit(t *testing.T, path string) []Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

func TestAuditLogConfig(t *testing.T) {
	dir := t.TempDir()
	cfg, diags := ParseConfig(filepath.Join(dir, "config.hcl"), []byte(`
audit_log = "logs/audit.jsonl"
sandbox "s" { plugin = "subprocess" }
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got, want := cfg.AuditLogPath(), filepath.Join(dir, "logs", "audit.jsonl"); got != want {
		t.Fatalf("AuditLogPath %q, want %q", got, want)
	}
	if DefaultConfig().AuditLogPath() != "" {
		t.Fatal("the embedded default has an audit log")
	}
}

// The whole path: a policy with audit_log, a host, a factory on the host's
// bus, and the events in the file after Close.
func TestAuditLogFromPolicy(t *testing.T) {
	needPlugin(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.hcl")
	src := `audit_log = "audit.jsonl"` + "\n" + toolsPolicy
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := LoadFile(ctx, path, WithPluginDirs(pluginDir))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := h.Sandbox(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	f := NewToolFactory(sb, h.Bus())
	tool, err := f.Spawn(ctx, doiSpec())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Call(ctx, json.RawMessage(`{"text":"10.1234/abc"}`)); err != nil {
		t.Fatal(err)
	}
	bad := doiSpec()
	bad.Implementation = "return open('/etc/passwd').read()"
	if _, err := f.Spawn(ctx, bad); err == nil {
		t.Fatal("open() accepted")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// The bus's events, in order, and the tool call's execution record
	// (written synchronously, so its place among them may vary).
	var evs, execs []Event
	for _, ev := range readAudit(t, filepath.Join(dir, "audit.jsonl")) {
		if ev.Type == EventExecution {
			execs = append(execs, ev)
		} else {
			evs = append(evs, ev)
		}
	}
	if len(execs) != 1 || execs[0].Payload["outcome"] != OutcomeSuccess || execs[0].Payload["code_sha256"] != CodeSHA256(doiSpec().Implementation) {
		t.Fatalf("execution records %+v", execs)
	}
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	want := []string{EventToolSpawned, EventInvocationCompleted, EventToolSpawnFailed, EventValidationRejected}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("audit events %v, want %v", types, want)
	}
	if r, _ := evs[3].Payload["reason"].(string); !strings.Contains(r, "forbidden-builtin") {
		t.Errorf("reason %q", r)
	}

	// An audit log that cannot be opened is a diagnostic on audit_log.
	if err := os.WriteFile(path, []byte(`audit_log = "."`+"\n"+toolsPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFile(ctx, path, WithPluginDirs(pluginDir))
	var de *DiagnosticsError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "Cannot open audit log") || !strings.Contains(err.Error(), "config.hcl:1:") {
		t.Fatalf("error %v", err)
	}
}
