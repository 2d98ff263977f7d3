package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/internal/httpauth"
)

// The MCP fuzz targets drive `mcp serve --http`'s handler in-process
// (httptest, no network) with a valid bearer token. The sandbox behind it
// is host/testdata/sessionplugin: a real plugin process with sessions and
// files that runs no Python, launched once per fuzzing process, so a
// request that reaches the backend costs a gRPC round trip, not an
// interpreter.

// fuzzPluginEnv carries the directory of the session plugin TestMain
// built to the fuzzing workers, which inherit the environment.
const fuzzPluginEnv = "ORQEST_TEST_FUZZ_PLUGIN_DIR"

const fuzzToken = "fuzz-token-0123456789abcdef0123456789"

const fuzzPolicy = `
sessions {
  max_sessions_per_user = 4
}
policy "default" {
  allowed_imports = ["re", "math", "json"]
  timeout         = "2s"
  max_code_bytes  = 8192
}
sandbox "fuzz" {
  plugin = "sessions"
}
`

// onlyFuzzing reports whether this run executes a fuzz target and no
// test: a fuzzing worker, or -fuzz with -run '^$'.
func onlyFuzzing() bool {
	flag.Parse()
	get := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return get("test.fuzzworker") == "true" || (get("test.fuzz") != "" && get("test.run") == "^$")
}

// fuzzEnv is the host, its plugin and the MCP handler the fuzz targets
// share: started by the first target that asks (start), closed by
// TestMain once the targets ran (stop), so the plugin's process and its
// socket directory do not outlive the test binary.
type fuzzEnv struct {
	once sync.Once
	h    *host.Host
	hd   http.Handler
	err  error
}

// fuzzShared is the test binary's one fuzzEnv.
var fuzzShared fuzzEnv

// fuzzServer starts the shared fuzz environment once and returns its
// handler.
func fuzzServer() (http.Handler, error) {
	e := &fuzzShared
	e.once.Do(func() { e.h, e.hd, e.err = startFuzzServer() })
	return e.hd, e.err
}

// stopFuzzServer closes the shared host, if a target started it.
func stopFuzzServer() {
	e := &fuzzShared
	e.once.Do(func() {}) // none started: none will be
	if e.h != nil {
		_ = e.h.Close()
	}
}

func startFuzzServer() (*host.Host, http.Handler, error) {
	dir := os.Getenv(fuzzPluginEnv)
	if dir == "" {
		return nil, nil, fmt.Errorf("$%s is not set: TestMain builds the session plugin", fuzzPluginEnv)
	}
	cfg, diags := host.ParseConfig(filepath.Join(dir, "config.hcl"), []byte(fuzzPolicy))
	if diags.HasErrors() {
		return nil, nil, diags
	}
	ctx := context.Background()
	h, err := host.Load(ctx, cfg, host.WithPluginDirs(dir))
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*host.Host, http.Handler, error) {
		_ = h.Close()
		return nil, nil, err
	}
	sb, err := h.Sandbox(ctx, "")
	if err != nil {
		return fail(err)
	}
	clients, err := newMCPClients(ctx, sb, h.Bus())
	if err != nil {
		return fail(err)
	}
	// The host and its plugin live until TestMain's stopFuzzServer.
	hd := clients.httpHandler(httpauth.NewVerifier(map[string]string{fuzzToken: "fuzzer"}, nil), http.NotFoundHandler())
	// The client's spawned tool, whose arguments FuzzMCPToolArgs fuzzes
	// too.
	w := fuzzPost(hd, "", []byte(fuzzInit))
	sid := w.Header().Get("Mcp-Session-Id")
	fuzzPost(hd, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	spawn, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": mcpSpawnTool, "arguments": map[string]any{"name": fuzzSpawned, "implementation": "return args", "parameters": fuzzSpawnedParams}}})
	if w := fuzzPost(hd, sid, spawn); w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"isError":true`) {
		return fail(fmt.Errorf("spawn_tool %s: %d %s", fuzzSpawned, w.Code, w.Body))
	}
	end := httptest.NewRequest("DELETE", "/mcp", nil)
	end.Header.Set("Authorization", "Bearer "+fuzzToken)
	end.Header.Set("Mcp-Session-Id", sid)
	hd.ServeHTTP(httptest.NewRecorder(), end)
	return h, hd, nil
}

// fuzzSpawned is a tool the fuzzing client spawned, with parameters of
// every JSON type.
const fuzzSpawned = "typed"

var fuzzSpawnedParams = json.RawMessage(`{"type":"object","properties":{
  "text":  {"type":"string","maxLength":64},
  "n":     {"type":"integer","minimum":0},
  "x":     {"type":"number"},
  "flag":  {"type":"boolean"},
  "items": {"type":"array","items":{"type":"string"}},
  "opts":  {"type":"object","properties":{"k":{"type":"string","enum":["a","b"]}}}
},"required":["text"],"additionalProperties":false}`)

func fuzzHandler(t testing.TB) http.Handler {
	h, err := fuzzServer()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// fuzzPost posts body to /mcp on h, in session sid when not "".
func fuzzPost(h http.Handler, sid string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+fuzzToken)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

const fuzzInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`

// mcpSession opens an MCP session on h and returns its id and a func
// that ends it.
func mcpSession(t *testing.T, h http.Handler) (string, func()) {
	t.Helper()
	w := fuzzPost(h, "", []byte(fuzzInit))
	sid := w.Header().Get("Mcp-Session-Id")
	if w.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q", w.Code, w.Body)
	}
	if w := fuzzPost(h, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); w.Code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %q", w.Code, w.Body)
	}
	return sid, func() {
		req := httptest.NewRequest("DELETE", "/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+fuzzToken)
		req.Header.Set("Mcp-Session-Id", sid)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

// rpcMessage is a JSON-RPC 2.0 message as the server may send one.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    *int64  `json:"code"`
		Message *string `json:"message"`
	} `json:"error"`
}

func (m rpcMessage) isResponse() bool { return m.Method == "" }

// rpcRequest is the part of a fuzzed body that decides what the server
// owes it: one request (method and id) is owed one response with that id.
type rpcRequest struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      *json.RawMessage `json:"id"`
	Method  *string          `json:"method"`
}

// checkHTTPAnswer fails unless w is an HTTP error below 500 or a stream of
// well-formed JSON-RPC messages, and returns the messages.
func checkHTTPAnswer(t *testing.T, body []byte, w *httptest.ResponseRecorder) []rpcMessage {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("status %d for %q: %q", w.Code, body, w.Body)
	}
	if w.Code != http.StatusOK {
		return nil
	}
	var raw [][]byte
	switch ct := w.Header().Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		raw = append(raw, w.Body.Bytes())
	case strings.HasPrefix(ct, "text/event-stream"):
		sc := bufio.NewScanner(bytes.NewReader(w.Body.Bytes()))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				raw = append(raw, []byte(data))
			}
		}
	default:
		t.Fatalf("200 with Content-Type %q for %q: %q", ct, body, w.Body)
	}
	var msgs []rpcMessage
	for _, b := range raw {
		var m rpcMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("a message that is not JSON-RPC (%v) for %q: %q", err, body, b)
		}
		if m.JSONRPC != "2.0" {
			t.Fatalf("jsonrpc %q in %q", m.JSONRPC, b)
		}
		if m.isResponse() {
			if (m.Result == nil) == (m.Error == nil) {
				t.Fatalf("a response needs exactly one of result and error: %q", b)
			}
			if m.Error != nil && (m.Error.Code == nil || m.Error.Message == nil) {
				t.Fatalf("an error without code or message: %q", b)
			}
			if m.Error != nil && *m.Error.Code == -32603 {
				t.Fatalf("an internal error for %q: %q", body, b)
			}
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// responseTo returns the one response of msgs, failing unless there is
// exactly one and it carries id.
func responseTo(t *testing.T, body []byte, id json.RawMessage, msgs []rpcMessage) rpcMessage {
	t.Helper()
	var resp []rpcMessage
	for _, m := range msgs {
		if m.isResponse() {
			resp = append(resp, m)
		}
	}
	if len(resp) != 1 {
		t.Fatalf("%d responses to %q: %+v", len(resp), body, resp)
	}
	if !sameJSON(resp[0].ID, id) {
		t.Fatalf("response id %s to request id %s (%q)", resp[0].ID, id, body)
	}
	return resp[0]
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// FuzzMCPHTTP: any body posted to /mcp with a valid token, first as a
// client's first request, then inside an initialized session, is answered
// with an HTTP error below 500 or well-formed JSON-RPC; a request (a
// method and an id) it accepts gets exactly one response, with its id, and
// never an internal error.
func FuzzMCPHTTP(f *testing.F) {
	for _, s := range []string{
		fuzzInit,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"run_python","arguments":{"code":"return 1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"import math\nreturn math.pi","allowed_imports":["math"],"timeout_s":1,"session":"s1","args":{"x":1}}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"spawn_tool","arguments":{"name":"double","implementation":"return args['x'] * 2","parameters":{"x":{"type":"number"}}}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"put_file","arguments":{"path":"a.txt","text":"hi","session":"s1"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_file","arguments":{"path":"a.txt","session":"s1"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"list_files","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"close_session","arguments":{"session":"s1"}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"list_sessions"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"nope","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"run_python","arguments":"return 1"}}`,
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"return 1"},"_meta":{"progressToken":"p"}}}`,
		`{"jsonrpc":"2.0","id":12,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":13,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":14,"result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"id":1,"method":"ping"}`,
		`{}`, `[]`, `null`, `"x"`, ``, `{`, "\x00",
	} {
		f.Add([]byte(s))
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		// As a client's first request.
		w := fuzzPost(h, "", body)
		checkHTTPAnswer(t, body, w)
		if sid := w.Header().Get("Mcp-Session-Id"); sid != "" {
			req := httptest.NewRequest("DELETE", "/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+fuzzToken)
			req.Header.Set("Mcp-Session-Id", sid)
			h.ServeHTTP(httptest.NewRecorder(), req)
		}

		// In a session.
		sid, end := mcpSession(t, h)
		defer end()
		w = fuzzPost(h, sid, body)
		msgs := checkHTTPAnswer(t, body, w)
		var req rpcRequest
		if json.Unmarshal(body, &req) != nil || req.JSONRPC != "2.0" || req.Method == nil || req.ID == nil || w.Code != http.StatusOK {
			return
		}
		var id any
		if json.Unmarshal(*req.ID, &id) != nil || id == nil {
			return
		}
		responseTo(t, body, *req.ID, msgs)
	})
}

// fuzzTools are the tools of a client of `mcp serve --http` on a session
// tier with files, and the tool it spawned.
var fuzzTools = []string{mcpRunPython, mcpSpawnTool, mcpPutFile, mcpGetFile, mcpListFiles, mcpCloseSession, mcpListSessions, fuzzSpawned}

// FuzzMCPToolArgs: arbitrary arguments to a built-in tool (which picks
// one of fuzzTools), in a
// well-formed tools/call, are answered with a tool result (an error
// result naming what is wrong when they are), or a JSON-RPC invalid-params
// error when they are not an object; never an internal error, an HTTP
// error or a second response. A result's structured content is an
// object, and an error result says something.
func FuzzMCPToolArgs(f *testing.F) {
	for i, s := range []string{
		`{"code":"return 1"}`,
		`{"code":"import re\nreturn re.findall(r'a+', args['s'])","args":{"s":"aaba"},"allowed_imports":["re"]}`,
		`{"code":"return 1","timeout_s":0.5,"stateful":true}`,
		`{"code":"return 1","stateful":false,"session":"named-1"}`,
		`{"code":"return eval('1')"}`,
		`{"code":"import os\nreturn 1","allowed_imports":["os"]}`,
		`{"code":"return 1","timeout_s":-1}`,
		`{"code":"return 1","timeout_s":1e308}`,
		`{"code":"return 1","args":[1]}`,
		`{"code":"return 1","args":"x"}`,
		`{"code":"return 1","session":"../x"}`,
		`{"code":"return 1","session":"` + strings.Repeat("s", 65) + `"}`,
		`{"code":"","extra":1}`,
		`{"name":"t1","implementation":"return args['x']","parameters":{"x":{"type":"string"}},"timeout_s":1}`,
		`{"name":"t2","implementation":"return 1","parameters":{"type":"object","properties":{"y":{"type":"integer"}}}}`,
		`{"name":"run_python","implementation":"return 1"}`,
		`{"name":"x-y","implementation":"return 1"}`,
		`{"name":"t3","implementation":"return 1","parameters":{"type":"array"}}`,
		`{"name":"t4","implementation":"return 1","parameters":"nope"}`,
		`{"path":"data.csv","text":"a,b\n1,2\n"}`,
		`{"path":"bin","base64":"AAEC/w=="}`,
		`{"path":"x","base64":"!!"}`,
		`{"path":"x","text":"a","base64":"YQ=="}`,
		`{"path":"../../etc/passwd","text":"x"}`,
		`{"path":"data.csv","session":"named-1"}`,
		`{"path":""}`,
		`{"session":"named-1"}`,
		`{"session":""}`,
		`{"all":true}`,
		`{"text":"hi","n":3,"x":1.5,"flag":true,"items":["a"],"opts":{"k":"a"}}`,
		`{"text":"` + strings.Repeat("t", 65) + `"}`,
		`{"text":"hi","n":-1}`,
		`{"text":"hi","n":1.5}`,
		`{"text":"hi","opts":{"k":"c"}}`,
		`{"text":"hi","extra":null}`,
		`{"n":1}`,
		`{}`, `null`, `[]`, `"x"`, `1`, `{"code":1}`, `{"code":null}`, `{"code":"return 1"} {}`,
	} {
		f.Add(uint8(i), []byte(s))
		f.Add(uint8(i+1), []byte(s))
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		tool := fuzzTools[int(which)%len(fuzzTools)]
		params := map[string]any{"name": tool}
		if len(args) > 0 {
			if json.Valid(args) {
				params["arguments"] = json.RawMessage(args)
			} else {
				params["arguments"] = string(args)
			}
		}
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		if err != nil {
			return // arguments json.Valid accepts but Marshal does not re-encode
		}
		sid, end := mcpSession(t, h)
		defer end()
		w := fuzzPost(h, sid, body)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d for %s: %q", w.Code, body, w.Body)
		}
		resp := responseTo(t, body, json.RawMessage("1"), checkHTTPAnswer(t, body, w))
		if resp.Error != nil {
			if *resp.Error.Code != -32602 {
				t.Fatalf("error %d %q for %s", *resp.Error.Code, *resp.Error.Message, body)
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(args, &obj) == nil && obj != nil {
				t.Fatalf("invalid params for object arguments %s: %q", args, *resp.Error.Message)
			}
			return
		}
		var res struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			t.Fatalf("result %s: %v", resp.Result, err)
		}
		if len(res.Content) == 0 || (res.IsError && res.Content[0].Text == "") {
			t.Fatalf("result without a message for %s: %s", body, resp.Result)
		}
		if res.StructuredContent != nil {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(res.StructuredContent, &obj); err != nil || obj == nil {
				t.Fatalf("structured content is not an object for %s: %s", body, res.StructuredContent)
			}
		}
	})
}
