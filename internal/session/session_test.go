package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/warmpool"
	"github.com/orqest/sandbox/shared"
)

// These tests pin the kit's bookkeeping (registry, reopen, pool, stop)
// with agents that are in-memory MCP servers answering execute_python.
// That the real agents behave so is shared/conformance's AgentDeath and
// Sessions cases, which docker, gvisor and kubernetes run against their
// engines.

// memAgent is an agent served in memory: execute_python returns the
// number of calls this agent has answered, or blocks while block is set.
type memAgent struct {
	name    string
	user    string
	label   string
	done    chan struct{}
	killed  sync.Once
	stopped atomic.Bool
	block   chan struct{} // nil: answer at once
	failCon bool
	calls   atomic.Int64
	inCall  atomic.Int64 // calls being answered now
}

func (a *memAgent) Name() string          { return "the memory agent " + a.name }
func (a *memAgent) Done() <-chan struct{} { return a.done }
func (a *memAgent) kill()                 { a.killed.Do(func() { close(a.done) }) }

func (a *memAgent) Stop(context.Context) error {
	a.stopped.Store(true)
	a.kill()
	return nil
}

func (a *memAgent) Connect(ctx context.Context, client *mcp.Client, hello rtproto.Hello) (*mcp.ClientSession, error) {
	if a.failCon {
		return nil, errors.New("refused by the test")
	}
	if hello.User != a.user || len(hello.Secret) < rtproto.MinSecretBytes {
		return nil, errors.New("bad hello")
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "0"}, nil)
	srv.AddTool(&mcp.Tool{Name: rtproto.ToolExecute, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a.inCall.Add(1)
		defer a.inCall.Add(-1)
		if a.block != nil {
			select {
			case <-a.block:
			case <-a.done:
				return nil, errors.New("agent gone")
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		n := a.calls.Add(1)
		out, _ := json.Marshal(shared.ExecutionResult{Success: true, Output: json.RawMessage(`"` + a.name + `"`), DurationMS: float64(n)})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}, nil
	})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		return nil, err
	}
	go func() { <-a.done; ss.Close() }()
	return client.Connect(ctx, ct, nil)
}

// memDriver starts memAgents and remembers them.
type memDriver struct {
	mu      sync.Mutex
	started []*memAgent
	block   chan struct{}
	failCon bool
}

func (d *memDriver) Start(_ context.Context, user, label string) (Agent, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := &memAgent{name: label + "-" + randomHex(2), user: user, label: label, done: make(chan struct{}), block: d.block, failCon: d.failCon}
	d.started = append(d.started, a)
	return a, nil
}

func (d *memDriver) all() []*memAgent {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*memAgent(nil), d.started...)
}

func newManager(t *testing.T, d *memDriver, sessionless bool) *Manager {
	t.Helper()
	m := New(Config{Impl: &mcp.Implementation{Name: "test", Version: "0"}, Driver: d, MaxCodeBytes: 1 << 16, Sessionless: sessionless, StopTimeout: 5 * time.Second})
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestReopenAfterDeathMarksStateLostOnce(t *testing.T) {
	d := &memDriver{}
	m := newManager(t, d, false)
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "alice", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	first := d.all()[0]
	res, err := m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s1", UserID: "alice"})
	if err != nil || res.Result.StateLost {
		t.Fatalf("before the death: %+v, %v", res.Result, err)
	}
	first.kill()
	res, err = m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s1", UserID: "alice"})
	if err != nil {
		t.Fatalf("after the death: %v", err)
	}
	if !res.Result.StateLost {
		t.Errorf("the first result after the death has StateLost false")
	}
	if all := d.all(); len(all) != 2 || all[1].user != "alice" || all[1].label != "s1" {
		t.Fatalf("agents started: %+v, want a second one for alice labelled s1", all)
	}
	if string(res.Result.Output) == `"`+first.name+`"` {
		t.Errorf("the call after the death was answered by the dead agent")
	}
	res, err = m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s1"})
	if err != nil || res.Result.StateLost {
		t.Errorf("the second result after the death: %+v, %v; want no StateLost", res.Result, err)
	}
	waitFor(t, "the dead agent removed", first.stopped.Load)
}

func TestDeathMidCallFailsWithUnavailable(t *testing.T) {
	d := &memDriver{block: make(chan struct{})}
	m := newManager(t, d, false)
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "bob", SessionID: "s2"}); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s2", Timeout: 10 * time.Second})
		errc <- err
	}()
	waitFor(t, "the call to reach the agent", func() bool { return d.all()[0].inCall.Load() == 1 })
	d.all()[0].kill()
	err := <-errc
	if !errors.Is(err, shared.ErrUnavailable) || !strings.Contains(err.Error(), `session "s2"`) {
		t.Fatalf("the call in flight: %v; want ErrUnavailable naming the session", err)
	}
	close(d.block) // the fresh agent answers
	res, err := m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s2"})
	if err != nil || !res.Result.StateLost {
		t.Fatalf("the next call: %+v, %v; want success with StateLost", res.Result, err)
	}
}

func TestOpenCloseAndShutdown(t *testing.T) {
	d := &memDriver{}
	m := newManager(t, d, false)
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "carol", SessionID: "s3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "carol", SessionID: "s3"}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("a second Open of s3: %v, want ErrFailedPrecondition", err)
	}
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "carol", SessionID: "bad id!"}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("Open of a bad id: %v, want ErrInvalidArgument", err)
	}
	if _, err := m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s3", UserID: "mallory"}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("another user's call: %v, want ErrInvalidArgument", err)
	}
	if got := m.Sessions(); len(got) != 1 || got[0].ID != "s3" || got[0].User != "carol" || got[0].Agent == "" {
		t.Errorf("Sessions: %+v", got)
	}
	if _, err := m.Close(ctx(t), shared.CloseRequest{SessionID: "s3"}); err != nil {
		t.Fatal(err)
	}
	if !d.all()[0].stopped.Load() {
		t.Error("Close left the agent running")
	}
	if _, err := m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s3"}); !errors.Is(err, shared.ErrSessionNotFound) || !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("Execute after Close: %v, want ErrSessionNotFound (an ErrNotFound)", err)
	}
	open, err := m.Open(ctx(t), shared.OpenRequest{UserID: "carol"})
	if err != nil || !strings.HasPrefix(open.SessionID, "s-") {
		t.Fatalf("Open without an id: %+v, %v", open, err)
	}
	m.Shutdown(ctx(t))
	for _, a := range d.all() {
		if !a.stopped.Load() {
			t.Errorf("Shutdown left %s running", a.name)
		}
	}
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "carol"}); !errors.Is(err, shared.ErrUnavailable) {
		t.Errorf("Open after Shutdown: %v, want ErrUnavailable", err)
	}
}

func TestBindFailureStopsTheAgentAndFreesTheID(t *testing.T) {
	d := &memDriver{failCon: true}
	m := newManager(t, d, false)
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "dave", SessionID: "s4"}); !errors.Is(err, shared.ErrUnavailable) && err == nil {
		t.Fatalf("Open with an agent that refuses MCP: %v", err)
	}
	if !d.all()[0].stopped.Load() {
		t.Error("the agent that could not be bound was left running")
	}
	d.mu.Lock()
	d.failCon = false
	d.mu.Unlock()
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "dave", SessionID: "s4"}); err != nil {
		t.Errorf("the id is not free after a failed Open: %v", err)
	}
}

func TestWarmPoolAndTemporarySessions(t *testing.T) {
	d := &memDriver{}
	m := newManager(t, d, true)
	pool := &warmpool.Config{Size: 2}
	if err := pool.Normalize(); err != nil {
		t.Fatal(err)
	}
	m.Configure(Settings{Pool: pool})
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "erin", SessionID: "s5"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a warm agent for erin", func() bool { return m.Warm("erin") })
	warm := d.all()[1]
	if !strings.HasPrefix(warm.label, "warm-") {
		t.Fatalf("the pool's agent is labelled %q", warm.label)
	}
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "erin", SessionID: "s6"}); err != nil {
		t.Fatal(err)
	}
	if a, err := m.Agent("s6"); err != nil || a != Agent(warm) {
		t.Errorf("s6 is served by %v (%v), want the warm agent %s", a, err, warm.name)
	}
	// A sessionless call opens a temporary session and closes it after.
	before := len(m.Sessions())
	res, err := m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", UserID: "erin"})
	if err != nil || !res.Result.Success {
		t.Fatalf("sessionless: %+v, %v", res.Result, err)
	}
	if after := len(m.Sessions()); after != before {
		t.Errorf("sessions after a sessionless call: %d, before %d", after, before)
	}
	if _, err := m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", Stateful: true}); err == nil {
		t.Error("a stateful call without a session was accepted")
	}
	m.Configure(Settings{}) // a new configuration discards the warm agents
	waitFor(t, "the warm agents removed", func() bool { return m.Warming() == 0 })
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
