package main

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/shared"
)

// run prints the code's output as it is written: the first line reaches
// the CLI's stdout while the code still sleeps, and the value follows
// the rest of the output at the end.
func TestRunStreamsOutput(t *testing.T) {
	needPlugin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "run", "--allow", "time", "-e", "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')\nreturn 3")
	cmd.Dir = t.TempDir()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	firstAt := time.Now()
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	rest := new(strings.Builder)
	for {
		l, err := r.ReadString('\n')
		rest.WriteString(l)
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if early := time.Since(firstAt); early < time.Second {
		t.Errorf("the first line came %v before the CLI exited; want it while the code slept 2 s", early)
	}
	if rest.String() != "second\n3\n" {
		t.Errorf("after the first line: %q", rest.String())
	}
}

// run_python called with a progress token streams the code's output as
// progress notifications while it runs: the first line arrives before
// the result, each notification names its stream, and the messages add
// up to the result's stdout.
func TestMCPRunPythonStreamsProgress(t *testing.T) {
	s, _ := newTestMCPServer(t)
	checkStreamed(t, s, mcpRunPython, map[string]any{
		"code":            "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')\nreturn 1",
		"allowed_imports": []string{"time"},
	})
}

// A spawned tool called with a progress token streams its output as
// run_python does.
func TestMCPSpawnedToolStreamsProgress(t *testing.T) {
	s, _ := newTestMCPServer(t)
	cs, _ := connect(t, s)
	if r := call(t, cs, mcpSpawnTool, map[string]any{"name": "slow_echo", "parameters": map[string]any{"pause": map[string]any{"type": "number"}},
		"implementation": "import time\nprint('first', flush=True)\ntime.sleep(args['pause'])\nprint('second')\nreturn 1", "allowed_imports": []string{"time"}}); r.IsError {
		t.Fatalf("spawn_tool: %s", text(r))
	}
	checkStreamed(t, s, "slow_echo", map[string]any{"pause": 1.5})
}

// checkStreamed calls tool with args and a progress token on a fresh
// client of s, and checks that the code's "first\n" arrived on stdout
// well before the result (the code sleeps ~1.5 s after it) and that the
// notifications add up to "first\nsecond\n".
func checkStreamed(t *testing.T, s *mcpServer, tool string, args map[string]any) {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	type note struct {
		msg, stream string
		at          time.Time
	}
	// The client runs the handler on its own goroutine, and the last
	// notification may be handled after CallTool has returned: the notes are
	// read until they add up to what the code printed, or a deadline passes.
	const want = "first\nsecond\n"
	var (
		mu    sync.Mutex
		all   []note
		added = make(chan struct{}, 1)
	)
	joined := func() string {
		mu.Lock()
		defer mu.Unlock()
		var b strings.Builder
		for _, n := range all {
			b.WriteString(n.msg)
		}
		return b.String()
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "stream-agent", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			stream, _ := r.Params.Meta[shared.MetaStream].(string)
			mu.Lock()
			all = append(all, note{msg: r.Params.Message, stream: stream, at: time.Now()})
			mu.Unlock()
			select {
			case added <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	end := time.Now()
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	deadline := time.After(10 * time.Second)
wait:
	for got := joined(); len(got) < len(want); got = joined() {
		select {
		case <-added:
		case <-deadline:
			break wait
		}
	}
	got := joined()
	mu.Lock()
	notes := append([]note(nil), all...)
	mu.Unlock()
	if len(notes) == 0 || notes[0].msg != "first\n" || notes[0].stream != "stdout" {
		t.Fatalf("notifications: %+v", notes)
	}
	if early := end.Sub(notes[0].at); early < 700*time.Millisecond {
		t.Errorf("the first line arrived %v before the result; want it while the code slept", early)
	}
	if got != want {
		t.Errorf("notifications add up to %q", got)
	}
}
