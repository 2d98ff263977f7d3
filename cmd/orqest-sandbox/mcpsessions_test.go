package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/host"
)

// listed decodes a list_sessions answer.
func listed(t *testing.T, cs *mcp.ClientSession) sessionListing {
	t.Helper()
	r := call(t, cs, mcpListSessions, map[string]any{})
	if r.IsError {
		t.Fatalf("list_sessions: %s", text(r))
	}
	var out sessionListing
	if err := decodeStructured(r, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Over mcp serve on tier 2 the host's session policy holds per client:
// its default session counts against max_sessions_per_user, a session
// beyond it is refused naming the limit; list_sessions shows the client's
// own sessions; idle sessions are reclaimed, and the names the server
// holds keep working (the next run says state_lost).
func TestMCPSessionsFollowHostPolicy(t *testing.T) {
	alice, bob := "orqtest-mcpla-"+randomID(), "orqtest-mcplb-"+randomID()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, sb := dockerPolicySandbox(t, ctx, "sessions {\n  max_sessions_per_user = 2\n  reclaim_idle_after = \"1h\"\n}",
		`idle_timeout = "8s"
  config { image = "`+runtimeImage()+`" }`, alice, bob)
	a, b := mcpHTTPClients(t, ctx, h, sb, alice, bob)

	if r := call(t, a, mcpRunPython, map[string]any{"code": "return 1"}); r.IsError {
		t.Fatalf("run_python in the default session: %s", text(r))
	}
	if r := call(t, a, mcpRunPython, map[string]any{"code": "return 1", "session": "s1"}); r.IsError {
		t.Fatalf("run_python in s1: %s", text(r))
	}
	r := call(t, a, mcpRunPython, map[string]any{"code": "return 1", "session": "s2"})
	if !r.IsError || !strings.Contains(text(r), `max_sessions_per_user 2 for user "`+alice+`"`) || !strings.Contains(text(r), "close_session") {
		t.Fatalf("a third session of alice: %s, want a refusal naming max_sessions_per_user", text(r))
	}
	var st struct {
		Classes []string `json:"error_classes"`
	}
	if decodeStructured(r, &st); !slices.Contains(st.Classes, "failed_precondition") {
		t.Errorf("refusal classes %v", st.Classes)
	}
	l := listed(t, a)
	if len(l.Sessions) != 2 || !l.Sessions[0].Default || l.Sessions[1].Name != "s1" || l.Sessions[1].State != host.SessionOpen || l.MaxSessionsPerUser != 2 {
		t.Fatalf("alice's sessions: %+v", l)
	}
	for _, s := range listed(t, b).Sessions {
		if s.ID == l.Sessions[1].ID || s.Name == "s1" {
			t.Errorf("bob lists alice's session: %+v", s)
		}
	}

	// Idle for idle_timeout: both are reclaimed (their containers go).
	deadline := time.Now().Add(45 * time.Second)
	for {
		l = listed(t, a)
		if len(l.Sessions) == 2 && l.Sessions[0].State == host.SessionReclaimed && l.Sessions[1].State == host.SessionReclaimed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reclaimed: %+v", l)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if l.Sessions[1].Reason != host.ReclaimIdle {
		t.Errorf("reason %q", l.Sessions[1].Reason)
	}
	// s1 still works, in a new session under its id.
	r = call(t, a, mcpRunPython, map[string]any{"code": "return 2", "session": "s1"})
	var res struct {
		Success   bool            `json:"success"`
		Output    json.RawMessage `json:"output"`
		StateLost bool            `json:"state_lost"`
	}
	if decodeStructured(r, &res); r.IsError || !res.Success || string(res.Output) != "2" || !res.StateLost {
		t.Fatalf("s1 after the reclaim: %s %+v", text(r), res)
	}
	if l2 := listed(t, a); l2.Sessions[1].ID != l.Sessions[1].ID || l2.Sessions[1].State != host.SessionOpen {
		t.Errorf("s1 after the reclaim: %+v, want the same id open", l2.Sessions[1])
	}
	// A reclaimed session holds no place: s2 opens now.
	if r := call(t, a, mcpRunPython, map[string]any{"code": "return 3", "session": "s2"}); r.IsError {
		t.Fatalf("s2 once the default session is reclaimed: %s", text(r))
	}
	if r := call(t, a, mcpCloseSession, map[string]any{"session": "s1"}); r.IsError {
		t.Fatalf("close_session: %s", text(r))
	}
	if l := listed(t, a); len(l.Sessions) != 2 || l.Sessions[1].Name != "s2" {
		t.Errorf("after close_session s1: %+v", l)
	}
	if r := call(t, a, mcpListSessions, map[string]any{"all": true}); !r.IsError {
		t.Errorf("list_sessions with an argument: %s", text(r))
	}

	// The plugin dies: the server's names keep working, in new sessions
	// of the relaunched plugin under the same ids.
	pid := sb.PluginPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); sb.PluginPID() == pid; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the killed plugin is still the sandbox's")
		}
	}
	r = call(t, a, mcpRunPython, map[string]any{"code": "return 4", "session": "s2"})
	res.StateLost = false
	if decodeStructured(r, &res); r.IsError || string(res.Output) != "4" || !res.StateLost {
		t.Fatalf("s2 after the plugin was killed: %s %+v", text(r), res)
	}
}
