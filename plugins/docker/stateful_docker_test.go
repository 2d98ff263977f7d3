package docker

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// interpreters counts the stateful interpreters in a session's container:
// the Python processes that are not a fork-server or one of its children
// (whose command line ends with the forkserver argument).
func interpreters(t *testing.T, dc *client.Client, b *Backend, sid string) (int, []string) {
	t.Helper()
	s := openedSession(t, b, sid)
	top, err := dc.ContainerTop(context.Background(), s.containerID, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
	if err != nil {
		t.Fatalf("ContainerTop: %v", err)
	}
	n := 0
	var all []string
	for _, p := range top.Processes {
		cmd := strings.Join(p, " ")
		short := cmd
		if len(short) > 60 {
			short = short[:30] + "…" + short[len(short)-30:]
		}
		all = append(all, short)
		if strings.Contains(cmd, "python3") && !strings.HasSuffix(strings.TrimSpace(cmd), runner.ForkServerArg) {
			n++
		}
	}
	return n, all
}

// waitInterpreters waits until the container runs want stateful
// interpreters (a killed one is reaped asynchronously) and returns the
// last count.
func waitInterpreters(t *testing.T, dc *client.Client, b *Backend, sid string, want int) int {
	t.Helper()
	n := 0
	for i := 0; i < 50; i++ {
		if n, _ = interpreters(t, dc, b, sid); n == want {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return n
}

func nameError(res shared.ExecutionResult, name string) bool {
	return !res.Success && res.ErrorKind == shared.KindRuntime && strings.Contains(res.Error, "NameError") && strings.Contains(res.Error, "'"+name+"'")
}

// Stateful calls on the real engine: state across three calls, agents and
// sessions do not see each other's globals, stateless calls stay
// stateless, a timeout loses the state and says so (the next call starts
// clean), and no interpreter is left behind.
func TestStatefulSessions(t *testing.T) {
	user := testUser(t)
	dc := requireDocker(t)
	b := newBackend(t)
	s1 := openSession(t, b, user)
	s2 := openSession(t, b, user)
	st := func(sid, agent, code string) shared.ExecuteRequest {
		return shared.ExecuteRequest{SessionID: sid, UserID: user, AgentID: agent, Code: code, Stateful: true}
	}
	if n, all := interpreters(t, dc, b, s1); n != 0 {
		t.Fatalf("a new session runs %d stateful interpreters: %v", n, all)
	}

	// State across three calls.
	for i, code := range []string{"counter = 41", "counter += 1"} {
		if res := execOK(t, b, st(s1, "a", code)); !res.Success || res.StateLost {
			t.Fatalf("call %d: %+v", i+1, res)
		}
	}
	res := execOK(t, b, st(s1, "a", "return counter"))
	if !res.Success || string(res.Output) != "42" {
		t.Fatalf("call 3: want 42, got %+v", res)
	}

	// Another agent of the session, the same agent in another session, and
	// a stateless call of the same agent see none of it.
	if res := execOK(t, b, st(s1, "b", "return counter")); !nameError(res, "counter") {
		t.Fatalf("agent b: want NameError, got %+v", res)
	}
	if res := execOK(t, b, st(s2, "a", "return counter")); !nameError(res, "counter") {
		t.Fatalf("session 2: want NameError, got %+v", res)
	}
	stateless := st(s1, "a", "return counter")
	stateless.Stateful = false
	if res := execOK(t, b, stateless); !nameError(res, "counter") {
		t.Fatalf("stateless call: want NameError, got %+v", res)
	}
	stateless.Code = "counter = 0\nreturn counter"
	execOK(t, b, stateless)
	if res := execOK(t, b, st(s1, "a", "return counter")); string(res.Output) != "42" {
		t.Fatalf("a stateless call changed the state: %+v", res)
	}
	// The validator runs on every stateful call.
	if res := execOK(t, b, st(s1, "a", "counter = 0\nimport os")); res.Success || res.ErrorKind != shared.KindValidation {
		t.Fatalf("validation: %+v", res)
	}

	// Two interpreters: agents a and b.
	if n := waitInterpreters(t, dc, b, s1, 2); n != 2 {
		_, all := interpreters(t, dc, b, s1)
		t.Fatalf("session 1 runs %d stateful interpreters, want 2: %v", n, all)
	}

	// A timeout kills a's interpreter: the result says the state is lost,
	// b's is untouched, and a's next call starts clean.
	loop := st(s1, "a", "counter = 1\nwhile True:\n    pass")
	loop.Timeout = time.Second
	res = execOK(t, b, loop)
	if res.ErrorKind != shared.KindTimeout || !res.StateLost || !strings.Contains(res.Error, "state is lost") {
		t.Fatalf("timeout: want a timeout with state_lost, got %+v", res)
	}
	if n := waitInterpreters(t, dc, b, s1, 1); n != 1 {
		_, all := interpreters(t, dc, b, s1)
		t.Fatalf("after the timeout session 1 runs %d stateful interpreters, want 1 (b's): %v", n, all)
	}
	res = execOK(t, b, st(s1, "a", "return counter"))
	if !nameError(res, "counter") || res.StateLost {
		t.Fatalf("after the timeout: want a clean NameError without state_lost, got %+v", res)
	}
	execOK(t, b, st(s1, "b", "x = 1"))
	if res := execOK(t, b, st(s1, "b", "return x")); string(res.Output) != "1" {
		t.Fatalf("agent b after a's timeout: %+v", res)
	}

	// Close: the containers (and every interpreter in them) are gone.
	for _, sid := range []string{s1, s2} {
		if _, err := b.Close(context.Background(), shared.CloseRequest{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
	}
	if left := containersOf(t, dc, LabelUser+"="+user); len(left) > 0 {
		t.Fatalf("containers left after Close: %v", left)
	}
}

// A stateful call without a session is refused, not run in a throwaway
// one.
func TestStatefulNeedsSession(t *testing.T) {
	b := newBackend(t)
	_, err := b.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", Stateful: true})
	if err == nil || !strings.Contains(err.Error(), "open a session") {
		t.Fatalf("want an InvalidArgument telling to open a session, got %v", err)
	}
}

// TestStatefulLatency measures warm stateful and stateless calls of one
// session (logged; run with -v).
func TestStatefulLatency(t *testing.T) {
	user := testUser(t)
	b := newBackend(t)
	sid := openSession(t, b, user)
	measure := func(stateful bool) time.Duration {
		req := shared.ExecuteRequest{SessionID: sid, UserID: user, Code: "n = 1\nreturn n", Stateful: stateful}
		execOK(t, b, req) // warm
		var ds []time.Duration
		for i := 0; i < 30; i++ {
			start := time.Now()
			if res := execOK(t, b, req); !res.Success {
				t.Fatalf("%+v", res)
			}
			ds = append(ds, time.Since(start))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	stateless, stateful := measure(false), measure(true)
	stateless2 := measure(false)
	t.Logf("median warm call through the plugin (30 calls each): stateless %v, stateful %v, stateless again %v", stateless, stateful, stateless2)
}
