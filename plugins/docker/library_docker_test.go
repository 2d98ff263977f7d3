package docker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"

	_ "modernc.org/sqlite"
)

// The per-user tool library against the real engine and real volumes
// Each test uses fresh orqtest-<hex> users; testUser removes
// their containers and volumes afterwards.

func newLibBackend(t testing.TB, p map[string]any) *Backend {
	t.Helper()
	requireDocker(t)
	b := NewBackend(hclog.New(&hclog.LoggerOptions{Name: "docker-lib-test", Level: hclog.Warn, Output: os.Stderr}))
	cfg, _ := json.Marshal(map[string]any{"image": testImage(), "promotion": p})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: cfg}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b
}

const libAdd = "return args['a'] + args['b']"

func runTool(t *testing.T, b *Backend, sid, tool, code string, args string) shared.ExecuteResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := b.Execute(ctx, shared.ExecuteRequest{Code: code, Args: json.RawMessage(args), SessionID: sid, ToolName: tool})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !resp.Result.Success {
		t.Fatalf("Execute failed: %+v", resp.Result)
	}
	return resp
}

func types(evs []shared.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func sessionTools(t *testing.T, b *Backend, sid string) []string {
	t.Helper()
	s := openedSession(t, b, sid)
	res, err := s.mcp.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func token(t *testing.T, b *Backend, sid, scope string) string {
	t.Helper()
	r, err := b.MintToken(context.Background(), shared.MintTokenRequest{SessionID: sid, Scope: scope, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return r.Token
}

func listLib(t *testing.T, b *Backend, sid string) toollib.ListResult {
	t.Helper()
	r, err := b.CallTool(context.Background(), shared.CallToolRequest{SessionID: sid, Tool: toollib.ToolListTools, Token: token(t, b, sid, shared.ScopeOperator)})
	if err != nil {
		t.Fatalf("list_tools: %v", err)
	}
	var l toollib.ListResult
	if err := json.Unmarshal(r.Result, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func closeSession(t *testing.T, b *Backend, sid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestLibraryPolicies runs each promotion policy end to end in a real
// container on the user's volume.
func TestLibraryPolicies(t *testing.T) {
	t.Run("threshold", func(t *testing.T) {
		b := newLibBackend(t, map[string]any{"policy": "threshold", "threshold": 3})
		user := testUser(t)
		sid := openSession(t, b, user)
		defer closeSession(t, b, sid)
		for i := 0; i < 2; i++ {
			if evs := runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`).Events; len(evs) != 0 {
				t.Fatalf("run %d: events %+v", i+1, evs)
			}
		}
		if slices.Contains(sessionTools(t, b, sid), "add") {
			t.Fatal("listed before the threshold")
		}
		resp := runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`)
		if !slices.Equal(types(resp.Events), []string{toollib.EventPromoted}) {
			t.Fatalf("3rd run: %+v", resp.Events)
		}
		if !slices.Contains(sessionTools(t, b, sid), "add") {
			t.Fatal("promoted tool not in tools/list")
		}
		l := listLib(t, b, sid)
		if l.Path != rtproto.LibraryPath || l.User != user || len(l.Tools) != 1 || l.Tools[0].Successes != 3 || l.Tools[0].PromotedBy != "policy:threshold" || l.Tools[0].CodeHash != toollib.CodeHash(libAdd) {
			t.Fatalf("library: %+v", l)
		}
		// A promoted tool is called by name through SessionTools with an agent token.
		r, err := b.CallTool(context.Background(), shared.CallToolRequest{SessionID: sid, Tool: "add", Arguments: json.RawMessage(`{"a":40,"b":2}`), Token: token(t, b, sid, shared.ScopeAgent)})
		if err != nil || !strings.Contains(string(r.Result), `"output":42`) {
			t.Fatalf("call add: %s %v", r.Result, err)
		}
	})
	t.Run("eager", func(t *testing.T) {
		b := newLibBackend(t, map[string]any{"policy": "eager"})
		user := testUser(t)
		sid := openSession(t, b, user)
		defer closeSession(t, b, sid)
		if evs := runTool(t, b, sid, "upper", "return args['s'].upper()", `{"s":"x"}`).Events; !slices.Equal(types(evs), []string{toollib.EventPromoted}) {
			t.Fatalf("eager: %+v", evs)
		}
		if !slices.Contains(sessionTools(t, b, sid), "upper") {
			t.Fatal("not listed")
		}
	})
	t.Run("operator_approval", func(t *testing.T) {
		b := newLibBackend(t, map[string]any{"policy": "operator_approval"})
		user := testUser(t)
		sid := openSession(t, b, user)
		defer closeSession(t, b, sid)
		resp := runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`)
		if !slices.Equal(types(resp.Events), []string{toollib.EventPromotionPending}) {
			t.Fatalf("pending: %+v", resp.Events)
		}
		var p map[string]any
		_ = json.Unmarshal(resp.Events[0].Payload, &p)
		if p["tool_name"] != "add" || p["user"] != user || p["code_hash"] != toollib.CodeHash(libAdd) {
			t.Fatalf("pending payload: %v", p)
		}
		ctx := context.Background()
		agent := token(t, b, sid, shared.ScopeAgent)
		for _, tool := range []string{toollib.ToolPromote, toollib.ToolForget} {
			_, err := b.CallTool(ctx, shared.CallToolRequest{SessionID: sid, Tool: tool, Arguments: json.RawMessage(`{"name":"add"}`), Token: agent})
			if !errors.Is(err, shared.ErrPermissionDenied) || !strings.Contains(err.Error(), "operator scope") {
				t.Fatalf("%s with an agent token: %v", tool, err)
			}
		}
		if slices.Contains(sessionTools(t, b, sid), "add") {
			t.Fatal("pending tool listed")
		}
		op := token(t, b, sid, shared.ScopeOperator)
		r, err := b.CallTool(ctx, shared.CallToolRequest{SessionID: sid, Tool: toollib.ToolPromote, Arguments: json.RawMessage(`{"name":"add","by":"ops"}`), Token: op})
		if err != nil || !slices.Equal(types(r.Events), []string{toollib.EventPromoted}) {
			t.Fatalf("operator promote: %v %+v", err, r)
		}
		if !slices.Contains(sessionTools(t, b, sid), "add") {
			t.Fatal("promoted tool not listed")
		}
		r, err = b.CallTool(ctx, shared.CallToolRequest{SessionID: sid, Tool: toollib.ToolForget, Arguments: json.RawMessage(`{"name":"add"}`), Token: op})
		if err != nil || !slices.Equal(types(r.Events), []string{toollib.EventForgotten}) {
			t.Fatalf("operator forget: %v %+v", err, r)
		}
		if slices.Contains(sessionTools(t, b, sid), "add") || len(listLib(t, b, sid).Tools) != 0 {
			t.Fatal("forgotten tool remains")
		}
	})
}

// TestLibraryReplayAndIsolation: a promoted tool is in the first tools/list
// of the user's next session (a new container on the same volume); another
// user's session never sees it.
func TestLibraryReplayAndIsolation(t *testing.T) {
	b := newLibBackend(t, map[string]any{"policy": "eager"})
	alice, bob := testUser(t), testUser(t)
	sid := openSession(t, b, alice)
	runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`)
	closeSession(t, b, sid)

	sid2 := openSession(t, b, alice)
	defer closeSession(t, b, sid2)
	if names := sessionTools(t, b, sid2); !slices.Contains(names, "add") {
		t.Fatalf("replay: add missing from the first tools/list: %v", names)
	}
	r, err := b.CallTool(context.Background(), shared.CallToolRequest{SessionID: sid2, Tool: "add", Arguments: json.RawMessage(`{"a":2,"b":3}`), Token: token(t, b, sid2, shared.ScopeAgent)})
	if err != nil || !strings.Contains(string(r.Result), `"output":5`) {
		t.Fatalf("replayed add: %s %v", r.Result, err)
	}

	sidB := openSession(t, b, bob)
	defer closeSession(t, b, sidB)
	if slices.Contains(sessionTools(t, b, sidB), "add") || len(listLib(t, b, sidB).Tools) != 0 {
		t.Fatal("bob sees alice's tool")
	}
	if _, err := b.CallTool(context.Background(), shared.CallToolRequest{SessionID: sidB, Tool: "add", Arguments: json.RawMessage(`{"a":1,"b":1}`), Token: token(t, b, sidB, shared.ScopeAgent)}); !errors.Is(err, shared.ErrNotFound) {
		t.Fatalf("bob calling alice's tool: %v", err)
	}
}

// prepareVolume creates the user's volume and returns its host directory,
// laid out as the image makes it: owned by the runtime (root), mode 0700
// (skipping when the engine's volumes are not reachable from here, e.g. a
// remote or rootless engine).
func prepareVolume(t *testing.T, dc *client.Client, user string) string {
	t.Helper()
	ctx := context.Background()
	v, err := dc.VolumeCreate(ctx, client.VolumeCreateOptions{Name: VolumeName(user)})
	if err != nil {
		t.Fatal(err)
	}
	dir := v.Volume.Mountpoint
	if err := errors.Join(os.Chown(dir, 0, 0), os.Chmod(dir, 0o700)); err != nil {
		t.Skipf("SKIPPING: the volume's host directory %s is not writable from the test: %v", dir, err)
	}
	return dir
}

// TestLibraryCorruptedAndLockedVolume: a corrupted library file is moved
// aside and replaced; a locked one gives a clear error; the session runs
// code either way.
func TestLibraryCorruptedAndLockedVolume(t *testing.T) {
	dc := requireDocker(t)
	b := newLibBackend(t, map[string]any{"policy": "eager"})
	ctx := context.Background()

	t.Run("corrupted", func(t *testing.T) {
		user := testUser(t)
		dir := prepareVolume(t, dc, user)
		f := filepath.Join(dir, "orqest-tools.sqlite")
		if err := os.WriteFile(f, []byte(strings.Repeat("garbage, not SQLite\n", 300)), 0o644); err != nil {
			t.Fatal(err)
		}
		sid := openSession(t, b, user)
		defer closeSession(t, b, sid)
		resp := runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`)
		if string(resp.Result.Output) != "3" {
			t.Fatalf("code did not run: %+v", resp.Result)
		}
		if !slices.Equal(types(resp.Events), []string{toollib.EventLibraryRepaired, toollib.EventPromoted}) || !strings.Contains(string(resp.Events[0].Payload), "not a database") {
			t.Fatalf("want the repair of a library that is not a database, then the promotion: %+v", resp.Events)
		}
		if moved, _ := filepath.Glob(f + ".corrupt-*"); len(moved) != 1 {
			t.Fatalf("the corrupt file moved aside: %v", moved)
		}
		if lib := listLib(t, b, sid); len(lib.Tools) != 1 || lib.Tools[0].Name != "add" {
			t.Fatalf("the fresh library: %+v", lib.Tools)
		}
	})
	t.Run("locked", func(t *testing.T) {
		user := testUser(t)
		dir := prepareVolume(t, dc, user)
		f := filepath.Join(dir, "orqest-tools.sqlite")
		db, err := sql.Open("sqlite", "file:"+f)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "CREATE TABLE other(x); BEGIN EXCLUSIVE; INSERT INTO other VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		sid := openSession(t, b, user)
		defer closeSession(t, b, sid)
		t.Logf("open with a locked library: %v", time.Since(start))
		resp := runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`)
		if string(resp.Result.Output) != "3" {
			t.Fatalf("code did not run: %+v", resp.Result)
		}
		if len(resp.Events) != 1 || resp.Events[0].Type != toollib.EventLibraryUnavailable || !strings.Contains(string(resp.Events[0].Payload), "locked") {
			t.Fatalf("want a clear 'locked' event: %+v", resp.Events)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		db.Close()
		time.Sleep(1100 * time.Millisecond) // the runtime retries once a second
		if evs := runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`).Events; !slices.Equal(types(evs), []string{toollib.EventPromoted}) {
			t.Fatalf("after the lock was released: %+v", evs)
		}
	})
}
