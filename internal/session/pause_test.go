package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/shared"
)

// memPauser is a memDriver that can pause: Pause keeps the session's meta
// (the store outlives a Manager, as a directory outlives a plugin
// process) and kills the agent; Resume starts a fresh memAgent for the
// saved user.
type memPauser struct {
	*memDriver
	mu      sync.Mutex
	store   map[string][]byte
	calls   []string // "pause id", "resume id", "forget id"
	failRes bool
}

func newPauser() *memPauser { return &memPauser{memDriver: &memDriver{}, store: map[string][]byte{}} }

func (p *memPauser) note(op, id string) {
	p.mu.Lock()
	p.calls = append(p.calls, op+" "+id)
	p.mu.Unlock()
}

func (p *memPauser) Pause(_ context.Context, a Agent, id string, meta []byte) (shared.PauseResponse, error) {
	p.note("pause", id)
	p.mu.Lock()
	p.store[id] = meta
	p.mu.Unlock()
	a.(*memAgent).kill() // the agent ends with its checkpoint
	return shared.PauseResponse{Memory: true, Bytes: int64(len(meta))}, nil
}

func (p *memPauser) Resume(ctx context.Context, id string) (Agent, []byte, error) {
	p.note("resume", id)
	p.mu.Lock()
	meta, ok := p.store[id]
	fail := p.failRes
	p.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("no paused session %q: %w", id, shared.ErrSessionNotFound)
	}
	if fail {
		return nil, nil, fmt.Errorf("restore failed (test): %w", shared.ErrUnavailable)
	}
	var pm pausedMeta
	if err := json.Unmarshal(meta, &pm); err != nil {
		return nil, nil, err
	}
	a, err := p.Start(ctx, pm.User, id)
	return a, meta, err
}

func (p *memPauser) Forget(id string) (bool, error) {
	p.note("forget", id)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.store[id]
	delete(p.store, id)
	return ok, nil
}

func newPauseManager(t *testing.T, p *memPauser) *Manager {
	t.Helper()
	m := New(Config{Impl: &mcp.Implementation{Name: "test", Version: "0"}, Driver: p, MaxCodeBytes: 1 << 16, StopTimeout: 5 * time.Second})
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

// A paused session refuses calls until Resume; its agent's end is no
// death (it is not removed as one); Resume in another Manager (another
// plugin process) registers it from the saved meta with the same user and
// secret; a failed resume keeps the saved state; Close of a paused
// session forgets it.
func TestPauseAndResume(t *testing.T) {
	p := newPauser()
	m := newPauseManager(t, p)
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "alice", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	secret := string(m.sessions["s1"].secret)
	m.mu.Unlock()
	first := p.all()[0]
	if _, err := m.Pause(ctx(t), shared.PauseRequest{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s1"}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("a call on a paused session: %v", err)
	}
	if _, err := m.ListFiles(ctx(t), shared.ListFilesRequest{SessionID: "s1"}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("files of a paused session: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if first.stopped.Load() || len(p.all()) != 1 {
		t.Errorf("the paused agent was handled as a death (stopped %v, agents %d)", first.stopped.Load(), len(p.all()))
	}

	// Another process: the session is known only by what was saved.
	m2 := newPauseManager(t, p)
	p.failRes = true
	if _, err := m2.Resume(ctx(t), shared.ResumeRequest{SessionID: "s1"}); !errors.Is(err, shared.ErrUnavailable) {
		t.Fatalf("a failing restore: %v", err)
	}
	if _, err := m2.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s1"}); !errors.Is(err, shared.ErrSessionNotFound) {
		t.Errorf("after a failed resume the session is registered: %v", err)
	}
	p.failRes = false
	r, err := m2.Resume(ctx(t), shared.ResumeRequest{SessionID: "s1"})
	if err != nil || r.UserID != "alice" || r.SessionID != "s1" {
		t.Fatalf("resume in another manager: %+v %v", r, err)
	}
	m2.mu.Lock()
	if got := string(m2.sessions["s1"].secret); got != secret {
		t.Error("the resumed session has another secret: its agent's tokens would not verify")
	}
	m2.mu.Unlock()
	if res, err := m2.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s1", UserID: "alice"}); err != nil || !res.Result.Success || res.Result.StateLost {
		t.Errorf("a call after resume: %+v %v", res.Result, err)
	}
	if _, ok := p.store["s1"]; ok {
		t.Error("the saved state outlived a successful resume")
	}
	if _, err := m2.Resume(ctx(t), shared.ResumeRequest{SessionID: "s1"}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("resume of a running session: %v", err)
	}
	if _, err := m2.Pause(ctx(t), shared.PauseRequest{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Close(ctx(t), shared.CloseRequest{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.store["s1"]; ok {
		t.Error("Close of a paused session kept its saved state")
	}
}

// A session with a call in flight is not paused (ErrSessionBusy, nothing
// saved) and the call finishes; ids that are not identifiers (a path) are
// refused before the Driver sees them; a Driver that cannot pause is
// ErrNotSupported.
func TestPauseRefusals(t *testing.T) {
	p := newPauser()
	p.block = make(chan struct{})
	m := newPauseManager(t, p)
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "bob", SessionID: "s2"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Execute(ctx(t), shared.ExecuteRequest{Code: "return 1", SessionID: "s2", Timeout: 10 * time.Second})
		done <- err
	}()
	waitFor(t, "the call in flight", func() bool { return p.all()[0].inCall.Load() == 1 })
	if _, err := m.Pause(ctx(t), shared.PauseRequest{SessionID: "s2"}); !errors.Is(err, shared.ErrSessionBusy) {
		t.Errorf("pause mid-call: %v", err)
	}
	close(p.block)
	if err := <-done; err != nil {
		t.Errorf("the call after a refused pause: %v", err)
	}
	for _, id := range []string{"../../etc", "a/b", ""} {
		if _, err := m.Resume(ctx(t), shared.ResumeRequest{SessionID: id}); !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("resume %q: %v, want ErrInvalidArgument", id, err)
		}
		if _, err := m.Pause(ctx(t), shared.PauseRequest{SessionID: id}); !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("pause %q: %v, want ErrInvalidArgument", id, err)
		}
	}
	if len(p.calls) != 0 {
		t.Errorf("the driver was asked: %v", p.calls)
	}
	plain := newManager(t, &memDriver{}, false)
	if _, err := plain.Pause(ctx(t), shared.PauseRequest{SessionID: "s2"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Errorf("pause without a Pauser: %v", err)
	}
}

// resumedAgent is a memAgent that came back without its memory: it says
// so through Resumed.
type resumedAgent struct{ *memAgent }

func (resumedAgent) Resumed(resp *shared.ResumeResponse) {
	resp.Memory, resp.StateLost = false, true
	resp.Kept, resp.NotKept = []string{"default/x"}, []string{"default/f"}
}

// dataPauser is a memPauser whose resumed agents keep no memory.
type dataPauser struct{ *memPauser }

func (p dataPauser) Resume(ctx context.Context, id string) (Agent, []byte, error) {
	a, meta, err := p.memPauser.Resume(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return resumedAgent{a.(*memAgent)}, meta, nil
}

// An agent that implements Resumed sets what the Resume answers: memory
// false, state lost, its kept and not kept lists; the kit fills the id
// and user.
func TestResumeReportsWhatCameBack(t *testing.T) {
	p := dataPauser{newPauser()}
	m := New(Config{Impl: &mcp.Implementation{Name: "test", Version: "0"}, Driver: p, MaxCodeBytes: 1 << 16, StopTimeout: 5 * time.Second})
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	if _, err := m.Open(ctx(t), shared.OpenRequest{UserID: "alice", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(ctx(t), shared.PauseRequest{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	r, err := m.Resume(ctx(t), shared.ResumeRequest{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.SessionID != "s1" || r.UserID != "alice" || r.Memory || !r.StateLost || len(r.Kept) != 1 || r.Kept[0] != "default/x" || len(r.NotKept) != 1 || r.NotKept[0] != "default/f" {
		t.Errorf("resume: %+v", r)
	}
}
