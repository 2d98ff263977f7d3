package agent

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared/toollib"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtproto"
)

// These tests run the runtime's MCP server with a real SQLite library (a
// temp file) and an MCP client of the official SDK over the in-memory
// transport, with the host's python3. The same flows against real
// containers and volumes are in plugins/docker (library_docker_test.go).

type libRuntime struct {
	cs      *mcp.ClientSession
	rt      *runtime
	secret  []byte
	changed chan struct{} // one value per notifications/tools/list_changed
}

func startLibRuntime(t *testing.T, dbPath, user string, p *toollib.Promotion) *libRuntime {
	t.Helper()
	py, err := findPython("")
	if err != nil {
		t.Skipf("SKIPPING: no python3: %v", err)
	}
	table := rules.JSON()
	secret := []byte(strings.Repeat("s", 32))
	rt := &runtime{
		hello:   rtproto.Hello{Secret: secret, User: user, Session: testSession, Promotion: p},
		started: time.Now(),
		exec:    &executor{python: py, rules: table, workdir: t.TempDir()},
		log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if err := rt.attachLibrary(dbPath, false); err != nil {
		t.Fatal(err)
	}
	lr := &libRuntime{rt: rt, secret: secret, changed: make(chan struct{}, 16)}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := rt.server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "library-test"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { lr.changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	lr.cs = cs
	t.Cleanup(func() {
		cs.Close()
		ss.Close()
		if rt.lib != nil && rt.lib.db != nil {
			rt.lib.db.Close()
		}
	})
	return lr
}

func (lr *libRuntime) token(t *testing.T, user, scope string) string {
	t.Helper()
	tok, err := rtproto.Mint(lr.secret, user, testSession, scope, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// run calls execute_python with tool_name and returns the result and events.
func (lr *libRuntime) run(t *testing.T, user, tool, code string, args map[string]any) (map[string]any, []toollib.Event) {
	t.Helper()
	a := map[string]any{"code": code, "tool_name": tool}
	if args != nil {
		a["args"] = args
	}
	out := callTool(t, lr.cs, rtproto.ToolExecute, lr.token(t, user, rtproto.ScopeAgent), a)
	if out.IsError {
		t.Fatalf("execute_python: %v", out.Content)
	}
	return resultMap(t, out), metaEvents(t, out)
}

func resultMap(t *testing.T, out *mcp.CallToolResult) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out.Content[0].(*mcp.TextContent).Text), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func metaEvents(t *testing.T, out *mcp.CallToolResult) []toollib.Event {
	t.Helper()
	raw, ok := out.Meta[rtproto.MetaEvents]
	if !ok {
		return nil
	}
	b, _ := json.Marshal(raw)
	var evs []toollib.Event
	if err := json.Unmarshal(b, &evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

func eventTypes(evs []toollib.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func (lr *libRuntime) toolNames(t *testing.T) []string {
	t.Helper()
	res, err := lr.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func (lr *libRuntime) list(t *testing.T, user string) toollib.ListResult {
	t.Helper()
	out := callTool(t, lr.cs, toollib.ToolListTools, lr.token(t, user, rtproto.ScopeOperator), map[string]any{})
	if out.IsError {
		t.Fatalf("list_tools: %v", out.Content[0].(*mcp.TextContent).Text)
	}
	var lres toollib.ListResult
	if err := json.Unmarshal([]byte(out.Content[0].(*mcp.TextContent).Text), &lres); err != nil {
		t.Fatal(err)
	}
	return lres
}

func waitChanged(t *testing.T, lr *libRuntime) {
	t.Helper()
	select {
	case <-lr.changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/tools/list_changed within 5s")
	}
}

const addCode = "return args['a'] + args['b']"

func TestLibraryThresholdPromotesAndNotifies(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orqest-tools.sqlite")
	lr := startLibRuntime(t, db, testUser, &toollib.Promotion{Policy: toollib.PolicyThreshold, Threshold: 3})
	for i := 1; i <= 2; i++ {
		res, evs := lr.run(t, testUser, "add", addCode, map[string]any{"a": i, "b": 1})
		if res["success"] != true || len(evs) != 0 {
			t.Fatalf("run %d: %v events %v", i, res, evs)
		}
	}
	l := lr.list(t, testUser)
	if len(l.Tools) != 1 || l.Tools[0].Status != toollib.StatusCandidate || l.Tools[0].Successes != 2 || l.Tools[0].CodeHash != toollib.CodeHash(addCode) {
		t.Fatalf("after 2 runs: %+v", l.Tools)
	}
	if slices.Contains(lr.toolNames(t), "add") {
		t.Fatal("add listed before promotion")
	}
	_, evs := lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 1})
	if !slices.Equal(eventTypes(evs), []string{toollib.EventPromoted}) || evs[0].Payload["promoted_by"] != "policy:threshold" {
		t.Fatalf("3rd run events: %+v", evs)
	}
	waitChanged(t, lr)
	if !slices.Contains(lr.toolNames(t), "add") {
		t.Fatalf("add not in tools/list after promotion: %v", lr.toolNames(t))
	}
	// The promoted tool is first-class: called by name with an agent token.
	out := callTool(t, lr.cs, "add", lr.token(t, testUser, rtproto.ScopeAgent), map[string]any{"a": 40, "b": 2})
	if res := resultMap(t, out); res["output"] != float64(42) {
		t.Fatalf("add(40, 2): %v", res)
	}
	// ... and without a token it is refused like every tool.
	if out := callTool(t, lr.cs, "add", "", map[string]any{"a": 1, "b": 2}); !out.IsError || errClass(out) != classUnauthorized {
		t.Fatalf("tokenless call of a promoted tool: %+v", out)
	}
	l = lr.list(t, testUser)
	e := l.Tools[0]
	if e.Status != toollib.StatusPromoted || e.Successes != 4 || e.PromotedBy != "policy:threshold" || e.PromotedAt == "" || e.MeanMS <= 0 {
		t.Fatalf("governance fields: %+v", e)
	}
	// Another code under the same name is another (name, hash): counted apart.
	lr.run(t, testUser, "add", "return args['a'] + args['b'] + 0", map[string]any{"a": 1, "b": 1})
	if l := lr.list(t, testUser); len(l.Tools) != 2 {
		t.Fatalf("want 2 entries (two hashes), got %+v", l.Tools)
	}
}

func TestLibraryEager(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orqest-tools.sqlite")
	lr := startLibRuntime(t, db, testUser, &toollib.Promotion{Policy: toollib.PolicyEager})
	// A failed invocation is counted but never promotes.
	_, evs := lr.run(t, testUser, "shout", "raise ValueError('no')", nil)
	if len(evs) != 0 {
		t.Fatalf("failure promoted: %+v", evs)
	}
	_, evs = lr.run(t, testUser, "shout", "return args['s'].upper()", map[string]any{"s": "hi"})
	if !slices.Equal(eventTypes(evs), []string{toollib.EventPromoted}) {
		t.Fatalf("eager: %+v", evs)
	}
	waitChanged(t, lr)
	if !slices.Contains(lr.toolNames(t), "shout") {
		t.Fatal("shout not listed")
	}
}

func TestLibraryOperatorApprovalAndScopes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orqest-tools.sqlite")
	lr := startLibRuntime(t, db, testUser, &toollib.Promotion{Policy: toollib.PolicyOperatorApproval})
	_, evs := lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2})
	if !slices.Equal(eventTypes(evs), []string{toollib.EventPromotionPending}) || evs[0].Payload["code_hash"] != toollib.CodeHash(addCode) {
		t.Fatalf("pending: %+v", evs)
	}
	_, evs = lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2})
	if len(evs) != 0 {
		t.Fatalf("second run re-announced: %+v", evs)
	}
	if slices.Contains(lr.toolNames(t), "add") {
		t.Fatal("pending tool listed")
	}
	agent := lr.token(t, testUser, rtproto.ScopeAgent)
	for _, tool := range []string{toollib.ToolPromote, toollib.ToolForget, toollib.ToolListTools} {
		out := callTool(t, lr.cs, tool, agent, map[string]any{"name": "add"})
		if tool == toollib.ToolListTools {
			out = callTool(t, lr.cs, tool, agent, map[string]any{})
		}
		if !out.IsError || errClass(out) != classUnauthorized || !strings.Contains(out.Content[0].(*mcp.TextContent).Text, "operator scope") {
			t.Fatalf("%s with an agent token: %+v", tool, out.Content)
		}
	}
	// A token without a scope is agent scope.
	noScope := mintRaw(t, lr.secret, testUser, "")
	if out := callTool(t, lr.cs, toollib.ToolPromote, noScope, map[string]any{"name": "add"}); errClass(out) != classUnauthorized {
		t.Fatalf("scope-less token promoted: %+v", out.Content)
	}
	if st := lr.list(t, testUser).Tools[0].Status; st != toollib.StatusPending {
		t.Fatalf("status after refused calls: %s", st)
	}
	op := lr.token(t, testUser, rtproto.ScopeOperator)
	out := callTool(t, lr.cs, toollib.ToolPromote, op, map[string]any{"name": "add", "by": "alice-admin"})
	if out.IsError || !slices.Equal(eventTypes(metaEvents(t, out)), []string{toollib.EventPromoted}) {
		t.Fatalf("operator promote: %+v", out.Content)
	}
	waitChanged(t, lr)
	if e := lr.list(t, testUser).Tools[0]; e.Status != toollib.StatusPromoted || e.PromotedBy != "alice-admin" {
		t.Fatalf("after promote: %+v", e)
	}
	if !slices.Contains(lr.toolNames(t), "add") {
		t.Fatal("promoted tool not listed")
	}
	if out := callTool(t, lr.cs, toollib.ToolPromote, op, map[string]any{"name": "nope"}); errClass(out) != classNotFound {
		t.Fatalf("promote unknown: %+v", out.Content)
	}
	out = callTool(t, lr.cs, toollib.ToolForget, op, map[string]any{"name": "add"})
	if out.IsError || !slices.Equal(eventTypes(metaEvents(t, out)), []string{toollib.EventForgotten}) {
		t.Fatalf("forget: %+v", out.Content)
	}
	waitChanged(t, lr)
	if slices.Contains(lr.toolNames(t), "add") || len(lr.list(t, testUser).Tools) != 0 {
		t.Fatal("forgotten tool still there")
	}
	// Reserved and malformed tool names are refused before anything runs.
	for _, name := range []string{"execute_python", "promote_tool", "1bad", "a-b", "../x"} {
		out := callTool(t, lr.cs, rtproto.ToolExecute, lr.token(t, testUser, rtproto.ScopeAgent), map[string]any{"code": "return 1", "tool_name": name})
		if errClass(out) != classInvalidArgument {
			t.Fatalf("tool_name %q: %+v", name, out.Content)
		}
	}
}

func mintRaw(t *testing.T, secret []byte, user, scope string) string {
	t.Helper()
	tok, err := rtproto.Mint(secret, user, testSession, scope, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestLibraryReplayAcrossSessionsAndUsers(t *testing.T) {
	dir := t.TempDir()
	alice := filepath.Join(dir, "alice.sqlite")
	lr := startLibRuntime(t, alice, "alice", &toollib.Promotion{Policy: toollib.PolicyEager})
	lr.run(t, "alice", "add", addCode, map[string]any{"a": 1, "b": 2})
	lr.cs.Close()

	// A new session on the same library: the promoted tool is in the first
	// tools/list, no respawn needed.
	lr2 := startLibRuntime(t, alice, "alice", nil)
	if !slices.Contains(lr2.toolNames(t), "add") {
		t.Fatalf("replay: add missing from the first tools/list: %v", lr2.toolNames(t))
	}
	out := callTool(t, lr2.cs, "add", lr2.token(t, "alice", rtproto.ScopeAgent), map[string]any{"a": 2, "b": 3})
	if res := resultMap(t, out); res["output"] != float64(5) {
		t.Fatalf("replayed add: %v", res)
	}
	// Bob has his own library (his own volume): nothing of Alice's.
	bob := startLibRuntime(t, filepath.Join(dir, "bob.sqlite"), "bob", nil)
	if slices.Contains(bob.toolNames(t), "add") || len(bob.list(t, "bob").Tools) != 0 {
		t.Fatal("bob sees alice's tool")
	}
}

func TestLibraryDemotion(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orqest-tools.sqlite")
	lr := startLibRuntime(t, db, testUser, &toollib.Promotion{Policy: toollib.PolicyEager, DemoteAfterFailures: 2})
	code := "if args.get('fail'):\n    raise ValueError('bad input')\nreturn 'ok'"
	lr.run(t, testUser, "flaky", code, nil)
	waitChanged(t, lr)
	agent := lr.token(t, testUser, rtproto.ScopeAgent)
	// One failure, then a success: the consecutive count resets.
	callTool(t, lr.cs, "flaky", agent, map[string]any{"fail": true})
	callTool(t, lr.cs, "flaky", agent, map[string]any{})
	if e := lr.list(t, testUser).Tools[0]; e.Status != toollib.StatusPromoted || e.Failures != 1 || e.ConsecutiveFailures != 0 {
		t.Fatalf("after fail+ok: %+v", e)
	}
	callTool(t, lr.cs, "flaky", agent, map[string]any{"fail": true})
	out := callTool(t, lr.cs, "flaky", agent, map[string]any{"fail": true})
	if !slices.Equal(eventTypes(metaEvents(t, out)), []string{toollib.EventDemoted}) {
		t.Fatalf("demotion event: %+v", metaEvents(t, out))
	}
	waitChanged(t, lr)
	e := lr.list(t, testUser).Tools[0]
	if e.Status != toollib.StatusDemoted || e.DemotedAt == "" || !strings.Contains(e.LastError, "bad input") || e.Failures != 3 {
		t.Fatalf("after demotion: %+v", e)
	}
	if slices.Contains(lr.toolNames(t), "flaky") {
		t.Fatal("demoted tool still listed")
	}
	// Demoted tools are not re-promoted by policy; an operator can.
	if _, evs := lr.run(t, testUser, "flaky", code, nil); len(evs) != 0 {
		t.Fatalf("demoted tool re-promoted by policy: %+v", evs)
	}
	out = callTool(t, lr.cs, toollib.ToolPromote, lr.token(t, testUser, rtproto.ScopeOperator), map[string]any{"name": "flaky"})
	if out.IsError {
		t.Fatalf("operator re-promote: %+v", out.Content)
	}
}

// repairedEvent returns the one tool.library_repaired event of evs.
func repairedEvent(t *testing.T, evs []toollib.Event) toollib.Event {
	t.Helper()
	var out []toollib.Event
	for _, e := range evs {
		if e.Type == toollib.EventLibraryRepaired {
			out = append(out, e)
		}
	}
	if len(out) != 1 {
		t.Fatalf("want one %s event, got %+v", toollib.EventLibraryRepaired, evs)
	}
	return out[0]
}

// TestLibraryCorruptedFileIsMovedAside: a library that is not a database
// is moved aside to a timestamped name, a fresh one is created, the call
// runs and is counted in the fresh one, and the repair is reported once.
func TestLibraryCorruptedFileIsMovedAside(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orqest-tools.sqlite")
	garbage := []byte(strings.Repeat("this is not a database\n", 400))
	if err := os.WriteFile(db, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	lr := startLibRuntime(t, db, testUser, nil)
	res, evs := lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2})
	if res["success"] != true || res["output"] != float64(3) {
		t.Fatalf("code did not run: %v", res)
	}
	ev := repairedEvent(t, evs)
	moved, _ := ev.Payload["moved_to"].(string)
	if !strings.HasPrefix(moved, db+".corrupt-") || !strings.Contains(ev.Payload["error"].(string), "not a database") {
		t.Fatalf("repair event: %+v", ev)
	}
	if b, err := os.ReadFile(moved); err != nil || !slices.Equal(b, garbage) {
		t.Fatalf("the corrupt file was not kept at %s: %v", moved, err)
	}
	lib := lr.list(t, testUser)
	if len(lib.Tools) != 1 || lib.Tools[0].Name != "add" || lib.Tools[0].Successes != 1 {
		t.Fatalf("the fresh library did not count the call: %+v", lib.Tools)
	}
	if _, evs := lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2}); len(evs) != 0 {
		t.Fatalf("the repair was reported twice, or the next call failed: %+v", evs)
	}
}

// TestLibraryCorruptedDuringSession: the database is overwritten while
// the runtime has it open; the next call still runs, the library is moved
// aside and recreated, and the call is counted in the fresh one.
func TestLibraryCorruptedDuringSession(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orqest-tools.sqlite")
	lr := startLibRuntime(t, db, testUser, &toollib.Promotion{Policy: toollib.PolicyEager})
	if _, evs := lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2}); !slices.Equal(eventTypes(evs), []string{toollib.EventPromoted}) {
		t.Fatalf("first call: %+v", evs)
	}
	if err := os.WriteFile(db, []byte(strings.Repeat("garbage", 2000)), 0o600); err != nil {
		t.Fatal(err)
	}
	res, evs := lr.run(t, testUser, "mul", "return args['a'] * args['b']", map[string]any{"a": 2, "b": 3})
	if res["success"] != true || res["output"] != float64(6) {
		t.Fatalf("code did not run: %v", res)
	}
	if !slices.Equal(eventTypes(evs), []string{toollib.EventLibraryRepaired, toollib.EventPromoted}) {
		t.Fatalf("want the repair, then the promotion in the fresh library: %+v", evs)
	}
	if moved, _ := repairedEvent(t, evs).Payload["moved_to"].(string); !strings.HasPrefix(moved, db+".corrupt-") {
		t.Fatalf("moved_to = %q", moved)
	}
}

// TestLibraryFileRemovedDuringSession: the database file is removed while
// the runtime has it open; the next call reports it, is counted in a fresh
// library on the path (not in the removed file), and a later session sees
// that count.
func TestLibraryFileRemovedDuringSession(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orqest-tools.sqlite")
	lr := startLibRuntime(t, db, testUser, nil)
	lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2})
	for _, suf := range libraryFileSuffixes {
		_ = os.Remove(db + suf)
	}
	res, evs := lr.run(t, testUser, "mul", "return args['a'] * args['b']", map[string]any{"a": 2, "b": 3})
	if res["success"] != true {
		t.Fatalf("code did not run: %v", res)
	}
	if r, _ := repairedEvent(t, evs).Payload["repairs"].([]any); len(r) != 1 || !strings.Contains(r[0].(string), "removed") {
		t.Fatalf("repairs = %v", r)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("no library on the path after the call: %v", err)
	}
	lib := startLibRuntime(t, db, testUser, nil).list(t, testUser)
	if len(lib.Tools) != 1 || lib.Tools[0].Name != "mul" || lib.Tools[0].Successes != 1 {
		t.Fatalf("the next session's library: %+v", lib.Tools)
	}
}

// TestLibraryModeRepaired: a library file its owner cannot read or write
// is given back mode 0600; the promoted tool in it is still there.
func TestLibraryModeRepaired(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orqest-tools.sqlite")
	lr := startLibRuntime(t, db, testUser, &toollib.Promotion{Policy: toollib.PolicyEager})
	lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2})
	lr.rt.lib.mu.Lock()
	lr.rt.lib.closeLocked()
	lr.rt.lib.mu.Unlock()
	if err := os.Chmod(db, 0); err != nil {
		t.Fatal(err)
	}
	lr2 := startLibRuntime(t, db, testUser, &toollib.Promotion{Policy: toollib.PolicyEager})
	if !slices.Contains(lr2.toolNames(t), "add") {
		t.Fatalf("the promoted tool is gone: %v", lr2.toolNames(t))
	}
	_, evs := lr2.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2})
	ev := repairedEvent(t, evs)
	if st, err := os.Stat(db); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode after the repair: %v %v", st.Mode(), err)
	}
	if r, _ := ev.Payload["repairs"].([]any); len(r) != 1 || !strings.Contains(r[0].(string), "mode 0000 -> 0600") {
		t.Fatalf("repairs = %v", ev.Payload["repairs"])
	}
}

func TestLibraryLockedFileStillRunsCodeAndRecovers(t *testing.T) {
	db := filepath.Join(t.TempDir(), "orqest-tools.sqlite")
	// Another process (here: this test) holds an exclusive lock.
	locker, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	conn, err := locker.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, "CREATE TABLE x(a); BEGIN EXCLUSIVE; INSERT INTO x VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lr := startLibRuntime(t, db, testUser, &toollib.Promotion{Policy: toollib.PolicyEager})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a locked library delayed the start by %v", d)
	}
	res, evs := lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2})
	if res["success"] != true {
		t.Fatalf("code did not run: %v", res)
	}
	if len(evs) != 1 || evs[0].Type != toollib.EventLibraryUnavailable || !strings.Contains(evs[0].Payload["error"].(string), "locked") {
		t.Fatalf("want a clear 'locked' event, got %+v", evs)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	time.Sleep(1100 * time.Millisecond) // the runtime retries at most once a second
	_, evs = lr.run(t, testUser, "add", addCode, map[string]any{"a": 1, "b": 2})
	if !slices.Equal(eventTypes(evs), []string{toollib.EventPromoted}) {
		t.Fatalf("after the lock was released: %+v", evs)
	}
}
