package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/orqest/sandbox/internal/httpauth"
)

const httpTestToken = "0123456789abcdef0123456789abcdef"

// mcpPost sends body to url as a Streamable HTTP POST with the test token
// and session (none when ""), and returns the response and its body.
func mcpPost(t *testing.T, url, session, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+httpTestToken)
	if session != "" {
		req.Header.Set(mcpSessionHeader, session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A request other than initialize without an Mcp-Session-Id is refused
// with HTTP 400 and a JSON-RPC Invalid Request error (not 200 with an
// error of code 0); initialize opens a session whose id then works, and the
// SDK's client still connects.
func TestMCPHTTPRequiresSession(t *testing.T) {
	s, bus := newTestMCPServer(t)
	clients, err := newMCPClients(context.Background(), s.sb, bus)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(clients.httpHandler(httpauth.NewVerifier(map[string]string{httpTestToken: "alice"}, nil), http.NotFoundHandler()))
	t.Cleanup(ts.Close)
	url := ts.URL + "/mcp"

	for _, c := range []struct{ body, id string }{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "7"},
		{`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"run_python","arguments":{"code":"return 1"}}}`, `"call-1"`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "null"},
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, "null"},
	} {
		resp, body := mcpPost(t, url, "", c.body)
		var r jsonrpcErrorResponse
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal([]byte(body), &r) != nil || r.JSONRPC != "2.0" || string(r.ID) != c.id ||
			r.Error.Code != jsonrpcInvalidRequest || !strings.Contains(r.Error.Message, mcpSessionHeader) {
			t.Errorf("%s without a session: %d %s %q, want 400 with a JSON-RPC error -32600 (id %s)", c.body, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.id)
		}
	}
	// A body that is no JSON-RPC is the SDK's to refuse: still a 400.
	if resp, body := mcpPost(t, url, "", `{"jsonrpc":`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed body without a session: %d %q, want 400", resp.StatusCode, body)
	}

	// What the SDK refuses before it looks at sessions keeps its answer.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+httpTestToken)
	plain, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	plain.Body.Close()
	if plain.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain without a session: %s, want 415", plain.Status)
	}

	resp, body := mcpPost(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get(mcpSessionHeader)
	if resp.StatusCode != http.StatusOK || sid == "" || !strings.Contains(body, `"protocolVersion"`) {
		t.Fatalf("initialize: %d session %q %q", resp.StatusCode, sid, body)
	}
	if resp, body := mcpPost(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %q", resp.StatusCode, body)
	}
	if resp, body := mcpPost(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"run_python"`) {
		t.Errorf("tools/list in the session: %d %q", resp.StatusCode, body)
	}
	if names := toolNames(t, httpClientSession(t, url, httpTestToken, nil)); !slices.Contains(names, "run_python") {
		t.Errorf("the SDK client lists %v", names)
	}
}
