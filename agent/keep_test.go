package agent

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// stateful runs code in agent's stateful interpreter (json allowed) and
// returns its result.
func stateful(t *testing.T, cs *mcp.ClientSession, tok, agent, code string) shared.ExecutionResult {
	t.Helper()
	out := callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{Code: code, AgentID: agent, Stateful: true, TimeoutS: 20, AllowedImports: []string{"json"}})
	if out.IsError {
		t.Fatalf("execute %q: %+v", code, out.Content)
	}
	raw, _ := json.Marshal(out.StructuredContent)
	var res shared.ExecutionResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// decodeText decodes a tool result's JSON text into v.
func decodeText(t *testing.T, out *mcp.CallToolResult, v any) {
	t.Helper()
	if out.IsError {
		t.Fatalf("tool error: %+v", out.Content)
	}
	if err := json.Unmarshal([]byte(out.Content[0].(*mcp.TextContent).Text), v); err != nil {
		t.Fatal(err)
	}
}

// TestSaveRestoreState: save_state returns the plain globals of every
// agent's interpreter and names the rest (a function, a generator, a
// module); restore_state in another runtime puts them back, into a
// running interpreter at once and into an agent's first one when it
// starts; the interpreters that were saved keep running with their
// state.
func TestSaveRestoreState(t *testing.T) {
	cs, secret, _ := startRuntime(t)
	tok, _ := rtproto.Mint(secret, testUser, testSession, "", time.Minute)
	if r := stateful(t, cs, tok, "default", "x = 41\nd = {'a': [1, 2.5], 'b': (None, 'é')}\ndef f():\n    return 1\ng = (i for i in range(2))\nimport json\nreturn x"); !r.Success {
		t.Fatalf("define: %+v", r)
	}
	if r := stateful(t, cs, tok, "other", "y = b'\\x00bytes'\nreturn 0"); !r.Success {
		t.Fatalf("define: %+v", r)
	}
	var st rtproto.SavedState
	decodeText(t, callTool(t, cs, rtproto.ToolSaveState, tok, map[string]any{}), &st)
	if want := []string{"default/d", "default/x", "other/y"}; !slices.Equal(st.Kept, want) {
		t.Errorf("kept %v, want %v", st.Kept, want)
	}
	if want := []string{"default/f", "default/g", "default/json"}; !slices.Equal(st.NotKept, want) {
		t.Errorf("not kept %v, want %v", st.NotKept, want)
	}
	// The session is unchanged by a save.
	if r := stateful(t, cs, tok, "default", "return [x, f()]"); !r.Success || string(r.Output) != "[41,1]" || r.StateLost {
		t.Errorf("after save: %+v", r)
	}

	cs2, secret2, _ := startRuntime(t)
	tok2, _ := rtproto.Mint(secret2, testUser, testSession, "", time.Minute)
	// The default agent's interpreter runs already; "other" has none yet.
	if r := stateful(t, cs2, tok2, "default", "return 0"); !r.Success {
		t.Fatalf("start: %+v", r)
	}
	var rr rtproto.RestoreStateResult
	decodeText(t, callTool(t, cs2, rtproto.ToolRestoreState, tok2, rtproto.SavedState{Agents: st.Agents}), &rr)
	if !slices.Equal(rr.Kept, []string{"default/d", "default/x"}) || !slices.Equal(rr.Pending, []string{"other"}) || len(rr.NotKept) != 0 {
		t.Errorf("restore: %+v", rr)
	}
	if r := stateful(t, cs2, tok2, "default", "try:\n    f\n    had = True\nexcept NameError:\n    had = False\nreturn [x, d['a'], d['b'], had]"); !r.Success || string(r.Output) != `[41,[1,2.5],[null,"é"],false]` {
		t.Errorf("restored default: %+v", r)
	}
	if r := stateful(t, cs2, tok2, "other", "return y == b'\\x00bytes'"); !r.Success || string(r.Output) != "true" || r.Stderr != "" {
		t.Errorf("restored other: %+v", r)
	}
	// Loaded once: a second save of the new runtime has them again.
	var st2 rtproto.SavedState
	decodeText(t, callTool(t, cs2, rtproto.ToolSaveState, tok2, map[string]any{}), &st2)
	if want := []string{"default/d", "default/had", "default/x", "other/y"}; !slices.Equal(st2.Kept, want) {
		t.Errorf("second save kept %v, want %v", st2.Kept, want)
	}
}

// TestRestoreStateRefusals: restore_state refuses a bad agent id and
// unknown fields, and a node the encoding never writes (a pickle, a
// value of another type) is not loaded: named, with the other globals
// loaded.
func TestRestoreStateRefusals(t *testing.T) {
	cs, secret, _ := startRuntime(t)
	tok, _ := rtproto.Mint(secret, testUser, testSession, "", time.Minute)
	if out := callTool(t, cs, rtproto.ToolRestoreState, tok, map[string]any{"agents": map[string]any{"../x": map[string]any{}}}); !out.IsError || errClass(out) != classInvalidArgument {
		t.Errorf("bad agent id: %+v", out.Content)
	}
	if out := callTool(t, cs, rtproto.ToolRestoreState, tok, map[string]any{"agents": map[string]any{}, "pickle": "x"}); !out.IsError || errClass(out) != classInvalidArgument {
		t.Errorf("unknown field: %+v", out.Content)
	}
	if out := callTool(t, cs, rtproto.ToolRestoreState, "", map[string]any{"agents": map[string]any{}}); !out.IsError || errClass(out) != classUnauthorized {
		t.Errorf("no token: %+v", out.Content)
	}
	if r := stateful(t, cs, tok, "default", "return 0"); !r.Success {
		t.Fatalf("start: %+v", r)
	}
	bad := json.RawMessage(`{"ok": ["i", "29"], "pickled": ["p", "gASVAAAA"], "obj": ["o", "os.system"], "evil": ["a", "|O", [1], "AAAAAAAAAAA="]}`)
	var rr rtproto.RestoreStateResult
	decodeText(t, callTool(t, cs, rtproto.ToolRestoreState, tok, rtproto.SavedState{Agents: map[string]json.RawMessage{"default": bad}}), &rr)
	if !slices.Equal(rr.Kept, []string{"default/ok"}) || !slices.Equal(rr.NotKept, []string{"default/evil", "default/obj", "default/pickled"}) {
		t.Errorf("restore: %+v", rr)
	}
	if r := stateful(t, cs, tok, "default", "try:\n    pickled\n    had = True\nexcept NameError:\n    had = False\nreturn [ok, had]"); !r.Success || string(r.Output) != "[41,false]" {
		t.Errorf("after restore: %+v", r)
	}
}
