package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/rules"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtproto"
)

func newHTTPRuntime(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	py, err := findPython("")
	if err != nil {
		t.Skipf("SKIPPING: no python3: %v", err)
	}
	table := rules.JSON()
	secret := []byte(strings.Repeat("h", 32))
	rt := &runtime{
		hello:   rtproto.Hello{Secret: secret, User: testUser, Session: testSession},
		started: time.Now(),
		exec:    &executor{python: py, rules: table, workdir: t.TempDir()},
		log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	srv := httptest.NewServer(rt.httpHandler())
	t.Cleanup(srv.Close)
	return srv, secret
}

// bearer adds a header to every request.
type bearer struct {
	tok, origin string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.tok != "" {
		r.Header.Set("Authorization", "Bearer "+b.tok)
	}
	if b.origin != "" {
		r.Header.Set("Origin", b.origin)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func connectHTTP(url string, rt http.RoundTripper) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
}

func TestHTTPTokensAndOrigin(t *testing.T) {
	t.Setenv("ORQEST_ALLOWED_ORIGINS", defaultAllowedOrigins)
	srv, secret := newHTTPRuntime(t)
	good, _ := rtproto.Mint(secret, testUser, testSession, "", time.Minute)
	op, _ := rtproto.Mint(secret, testUser, testSession, rtproto.ScopeOperator, time.Minute)
	wrong, _ := rtproto.Mint([]byte(strings.Repeat("w", 32)), testUser, testSession, "", time.Minute)

	for name, b := range map[string]bearer{
		"no token":       {},
		"wrong key":      {tok: wrong},
		"foreign origin": {tok: good, origin: "http://evil.example"},
		"lookalike":      {tok: good, origin: "http://localhost.evil.example"},
	} {
		if cs, err := connectHTTP(srv.URL, b); err == nil {
			cs.Close()
			t.Errorf("%s: connected, want refusal", name)
		}
	}

	cs, err := connectHTTP(srv.URL, bearer{tok: good, origin: "http://localhost:5173"})
	if err != nil {
		t.Fatalf("good token + loopback origin: %v", err)
	}
	defer cs.Close()
	ctx := context.Background()
	out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: rtproto.ToolExecute, Arguments: rtproto.ExecuteArgs{Code: "return 1+1"}})
	if err != nil || out.IsError {
		t.Fatalf("execute over HTTP: %v %+v", err, out)
	}
	if out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: rtproto.ToolInfo, Arguments: map[string]any{}}); err != nil || !out.IsError || errClass(out) != classUnauthorized {
		t.Errorf("agent token reached runtime_info over HTTP: %v %+v", err, out)
	}
	ocs, err := connectHTTP(srv.URL, bearer{tok: op})
	if err != nil {
		t.Fatalf("operator token: %v", err)
	}
	defer ocs.Close()
	if out, err := ocs.CallTool(ctx, &mcp.CallToolParams{Name: rtproto.ToolInfo, Arguments: map[string]any{}}); err != nil || out.IsError {
		t.Errorf("operator runtime_info over HTTP: %v %+v", err, out)
	}
}

func TestOriginCheckConfig(t *testing.T) {
	t.Setenv("ORQEST_ALLOWED_ORIGINS", "")
	if _, on := allowedOrigins(); on {
		t.Error(`ORQEST_ALLOWED_ORIGINS="" should disable the check`)
	}
	t.Setenv("ORQEST_ALLOWED_ORIGINS", "https://app.example.com, http://127.0.0.1:8080")
	al, on := allowedOrigins()
	if !on || len(al) != 2 {
		t.Fatalf("allowed = %v %v", al, on)
	}
	for o, want := range map[string]bool{
		"https://app.example.com":      true,
		"https://app.example.com:8443": true,
		"http://app.example.com":       false,
		"http://127.0.0.1:8080":        true,
		"http://127.0.0.1:9090":        false,
		"null":                         false,
	} {
		if got := originAllowed(o, al); got != want {
			t.Errorf("originAllowed(%q) = %v, want %v", o, got, want)
		}
	}
	os.Unsetenv("ORQEST_ALLOWED_ORIGINS")
	if al, on := allowedOrigins(); !on || len(al) != 2 || al[0] != "http://127.0.0.1" {
		t.Errorf("default origins = %v %v", al, on)
	}
}

// A refused bearer token gets the RFC 6750 challenge: WWW-Authenticate
// with the realm, and error="invalid_token" when a token was sent. A good
// token is not challenged.
func TestHTTPUnauthorizedChallenge(t *testing.T) {
	t.Setenv("ORQEST_ALLOWED_ORIGINS", defaultAllowedOrigins)
	srv, secret := newHTTPRuntime(t)
	wrong, _ := rtproto.Mint([]byte(strings.Repeat("w", 32)), testUser, testSession, "", time.Minute)
	good, _ := rtproto.Mint(secret, testUser, testSession, "", time.Minute)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	for _, tc := range []struct {
		tok, want string
		code      int
	}{
		{"", `Bearer realm="orqest-agent-runtime"`, http.StatusUnauthorized},
		{wrong, `Bearer realm="orqest-agent-runtime", error="invalid_token"`, http.StatusUnauthorized},
		{good, "", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.tok != "" {
			req.Header.Set("Authorization", "Bearer "+tc.tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("WWW-Authenticate") != tc.want {
			t.Errorf("token %.10q: %d %q, want %d %q", tc.tok, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tc.code, tc.want)
		}
	}
}
