package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/internal/httpauth"
)

const mcpPolicy = `
policy "default" {
  allowed_imports = ["re", "math", "time"]
  timeout         = "3s"
}
sandbox "tier1" {
  plugin = "subprocess"
}
`

// newTestMCPServer loads mcpPolicy with the plugin built by TestMain and
// returns the MCP server of its sandbox, and the host's bus.
func newTestMCPServer(t *testing.T) (*mcpServer, *host.Bus) {
	t.Helper()
	s, h := newTestMCPServerHost(t)
	return s, h.Bus()
}

// newTestMCPServerHost is newTestMCPServer that also returns the host.
func newTestMCPServerHost(t *testing.T) (*mcpServer, *host.Host) {
	t.Helper()
	needPlugin(t)
	cfg, diags := host.ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(mcpPolicy))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h, err := host.Load(context.Background(), cfg, host.WithPluginDirs(binDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sb, err := h.Sandbox(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return newMCPServer(sb, h.Bus()), h
}

// connect connects an SDK client over in-memory transports; listChanged
// receives a value on every notifications/tools/list_changed.
func connect(t *testing.T, s *mcpServer) (*mcp.ClientSession, chan struct{}) {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	listChanged := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
	})
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, listChanged
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: protocol error %v", name, err)
	}
	return res
}

func text(r *mcp.CallToolResult) string {
	if len(r.Content) == 0 {
		return ""
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

var doiArgs = map[string]any{
	"name":            "extract_dois",
	"description":     "Extract DOIs from a text blob.",
	"parameters":      map[string]any{"text": map[string]any{"type": "string"}},
	"implementation":  "import re\nreturn {'dois': re.findall(r'10\\.\\d{4,}/[\\w.\\-/]+', args['text'])}\n",
	"allowed_imports": []string{"re"},
	"timeout_s":       2.0,
}

func TestMCPSpawnListCall(t *testing.T) {
	s, bus := newTestMCPServer(t)
	events := bus.Subscribe(64)
	cs, listChanged := connect(t, s)

	if names := toolNames(t, cs); !slices.Equal(names, []string{"run_python", "spawn_tool"}) {
		t.Fatalf("tools at connect: %v", names)
	}

	r := call(t, cs, "spawn_tool", doiArgs)
	if r.IsError {
		t.Fatalf("spawn_tool: %s", text(r))
	}
	select {
	case <-listChanged:
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/tools/list_changed after spawn_tool")
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var spawned *mcp.Tool
	for _, tl := range list.Tools {
		if tl.Name == "extract_dois" {
			spawned = tl
		}
	}
	if spawned == nil || spawned.Description != "Extract DOIs from a text blob." {
		t.Fatalf("extract_dois not listed: %+v", list.Tools)
	}
	schema, _ := json.Marshal(spawned.InputSchema)
	if !strings.Contains(string(schema), `"required":["text"]`) || !strings.Contains(string(schema), `"type":"object"`) {
		t.Fatalf("input schema %s", schema)
	}

	r = call(t, cs, "extract_dois", map[string]any{"text": "see 10.1000/xyz123 and 10.5555/abc.def"})
	if r.IsError || text(r) != `{"dois":["10.1000/xyz123","10.5555/abc.def"]}` {
		t.Fatalf("call: isError=%v %q", r.IsError, text(r))
	}
	sc, _ := json.Marshal(r.StructuredContent)
	if !strings.Contains(string(sc), `"success":true`) || !strings.Contains(string(sc), `"output":{"dois":`) {
		t.Fatalf("structured content %s", sc)
	}

	// Bad arguments: an error result naming the field, nothing run.
	r = call(t, cs, "extract_dois", map[string]any{"text": 42})
	if !r.IsError || !strings.Contains(text(r), `argument "text"`) || !strings.Contains(text(r), `want "string"`) {
		t.Fatalf("bad args: isError=%v %q", r.IsError, text(r))
	}
	r = call(t, cs, "extract_dois", map[string]any{"body": "x"})
	if !r.IsError || !strings.Contains(text(r), `argument "text": missing`) {
		t.Fatalf("missing arg: %q", text(r))
	}

	// A rejected implementation: an error result naming the rule, and no
	// new tool.
	bad := map[string]any{"name": "evil", "implementation": "return eval(args['x'])", "parameters": map[string]any{"x": "string"}}
	r = call(t, cs, "spawn_tool", bad)
	if !r.IsError || !strings.Contains(text(r), "forbidden-builtin") || !strings.Contains(text(r), `"evil"`) {
		t.Fatalf("rejected implementation: isError=%v %q", r.IsError, text(r))
	}
	if names := toolNames(t, cs); slices.Contains(names, "evil") {
		t.Fatalf("rejected tool listed: %v", names)
	}

	// The events of all that, in order.
	var types []string
	for len(events.C) > 0 {
		ev := <-events.C
		types = append(types, ev.Type+":"+ev.ToolName())
	}
	want := []string{
		"tool.spawned:extract_dois", "tool.invocation_completed:extract_dois",
		"tool.invocation_failed:extract_dois", "tool.invocation_failed:extract_dois",
		"tool.spawn_failed:evil", "sandbox.validation_rejected:evil",
	}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v\nwant %v", types, want)
	}
}

func TestMCPBadInputs(t *testing.T) {
	s, _ := newTestMCPServer(t)
	cs, _ := connect(t, s)
	for _, c := range []struct {
		tool  string
		args  any
		want  string
		stage string // run_python's structured stage
	}{
		{"spawn_tool", map[string]any{"name": "x", "implementation": "return 1", "timeout": 3}, `argument "timeout": unknown argument; spawn_tool takes allowed_imports, description, implementation, name, parameters, timeout_s`, ""},
		{"spawn_tool", map[string]any{"implementation": "return 1"}, `argument "name": missing`, ""},
		{"spawn_tool", map[string]any{"name": "x-y", "implementation": "return 1"}, `name "x-y" is not valid`, ""},
		{"spawn_tool", map[string]any{"name": "run_python", "implementation": "return 1"}, `reserved`, ""},
		{"spawn_tool", map[string]any{"name": "x", "implementation": "return 1", "timeout_s": "soon"}, `argument "timeout_s": want a number`, ""},
		{"spawn_tool", map[string]any{"name": "x", "implementation": "return 1", "timeout_s": -1}, `argument "timeout_s": must be a positive`, ""},
		{"spawn_tool", map[string]any{"name": "x", "implementation": "import os\nreturn 1", "allowed_imports": []string{"os"}}, `module "os" is not allowed by policy "default"`, ""},
		{"spawn_tool", map[string]any{"name": "x", "implementation": "return 1", "parameters": map[string]any{"type": "array"}}, `want "object"`, ""},
		{"run_python", map[string]any{"code": "import os\nreturn 1", "allowed_imports": []string{"os"}}, `argument "allowed_imports": module "os"`, host.StagePolicy},
		{"run_python", map[string]any{"code": "import json\nreturn 1"}, "import-not-allowed", host.StageValidation},
		{"run_python", map[string]any{"code": "return 1 / 0"}, "ZeroDivisionError", host.StageExecution},
		{"run_python", map[string]any{"code": "return 1", "args": []int{1}}, "args must be a JSON object", host.StageValidation},
		{"run_python", map[string]any{}, `argument "code": missing`, host.StageValidation},
		// Above the policy's ceiling (its 3 s timeout): refused, naming the
		// ceiling, never cut to fit without a word.
		{"run_python", map[string]any{"code": "return 1", "timeout_s": 100}, "timeout 1m40s is above", host.StagePolicy},
		{"run_python", map[string]any{"code": " \n\t"}, `argument "code": empty`, host.StageValidation},
	} {
		r := call(t, cs, c.tool, c.args)
		if !r.IsError || !strings.Contains(text(r), c.want) {
			t.Errorf("%s %v: isError=%v %q; want %q", c.tool, c.args, r.IsError, text(r), c.want)
		}
		if c.tool != "run_python" {
			continue
		}
		// The structured content says at which stage the call failed
		// (host.StageOf) and, for a refused request, its classes: a
		// client decides from them, never from the text.
		var st struct {
			Stage   string   `json:"stage"`
			Classes []string `json:"error_classes"`
		}
		if err := decodeStructured(r, &st); err != nil || st.Stage != c.stage {
			t.Errorf("%v: stage %q (%v), want %q", c.args, st.Stage, err, c.stage)
		}
		if c.stage != host.StageExecution && c.stage != "" && len(st.Classes) == 0 && !strings.Contains(text(r), "import-not-allowed") {
			t.Errorf("%v: no error classes", c.args)
		}
	}
	r := call(t, cs, "run_python", map[string]any{"code": "import math\nprint('hi')\nreturn {'r': math.floor(args['x'])}", "args": map[string]any{"x": 2.7}, "allowed_imports": []string{"math"}})
	if r.IsError || text(r) != `{"r":2}` || len(r.Content) != 2 || r.Content[1].(*mcp.TextContent).Text != "stdout:\nhi\n" {
		t.Fatalf("run_python: isError=%v %+v", r.IsError, r.Content)
	}
	// A module the policy allows needs no allowed_imports in the call.
	if r := call(t, cs, "run_python", map[string]any{"code": "import math\nreturn math.floor(2.5)"}); r.IsError || text(r) != "2" {
		t.Errorf("a module of the policy's allowed_imports, not listed in the call: isError=%v %q", r.IsError, text(r))
	}
	// An unknown tool is a protocol error, as the spec says.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope"}); err == nil {
		t.Fatal("unknown tool accepted")
	}
}

// Respawning a name replaces the tool in place.
func TestMCPRespawn(t *testing.T) {
	s, _ := newTestMCPServer(t)
	cs, _ := connect(t, s)
	for i, impl := range []string{"return 1", "return 2"} {
		if r := call(t, cs, "spawn_tool", map[string]any{"name": "v", "implementation": impl}); r.IsError {
			t.Fatal(text(r))
		}
		if r := call(t, cs, "v", map[string]any{}); r.IsError || text(r) != []string{"1", "2"}[i] {
			t.Fatalf("v: %q", text(r))
		}
	}
	if n := len(toolNames(t, cs)); n != 3 {
		t.Fatalf("%d tools", n)
	}
}

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// postInit sends an MCP initialize request to url with the Authorization
// header auth ("" for none) and returns the response (body closed).
func postInit(t *testing.T, client *http.Client, url, auth string) *http.Response {
	t.Helper()
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(initBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// httpClientSession connects an SDK client to url with token.
func httpClientSession(t *testing.T, url, token string, listChanged chan struct{}) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "http-agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			if listChanged != nil {
				listChanged <- struct{}{}
			}
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestMCPHTTPAuth(t *testing.T) {
	s, bus := newTestMCPServer(t)
	const aliceTok, bobTok = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	tokens, err := httpauth.ParseTokenFile([]byte("# clients\nalice " + aliceTok + "\nbob   " + bobTok + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("an-hmac-secret-of-at-least-32-bytes!!")
	clients, err := newMCPClients(context.Background(), s.sb, bus)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(clients.httpHandler(httpauth.NewVerifier(tokens, &httpauth.JWTKey{Key: secret, Methods: []string{"HS256"}, Audience: "orqest"}), http.NotFoundHandler()))
	t.Cleanup(ts.Close) // after the client sessions close (cleanups run last first)
	url := ts.URL + "/mcp"

	mint := func(sub, aud string, exp time.Time) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: sub, Audience: jwt.ClaimStrings{aud}, ExpiresAt: jwt.NewNumericDate(exp)}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, auth := range []string{"", "Bearer wrong-token-wrong-token", "Bearer " + aliceTok + "x", "Basic " + aliceTok,
		"Bearer " + mint("carol", "orqest", time.Now().Add(-time.Hour)), // expired
		"Bearer " + mint("carol", "other", time.Now().Add(time.Hour)),   // another audience
	} {
		resp := postInit(t, http.DefaultClient, url, auth)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %.40q: status %d, want 401", auth, resp.StatusCode)
		}
		// RFC 6750: a 401 names the realm, and says invalid_token when a
		// token was sent.
		ch := resp.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(ch, `Bearer realm="orqest-sandbox"`) || strings.Contains(ch, "invalid_token") != (auth != "") {
			t.Errorf("Authorization %.40q: WWW-Authenticate %q", auth, ch)
		}
	}
	// DNS-rebinding protection stays on: a foreign Host header on a
	// localhost connection is refused even with the right token.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{}`))
	req.Host = "evil.example.com"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+aliceTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: status %d, want 403", resp.StatusCode)
	}

	// With a token, the SDK client works end to end, list_changed
	// included; the tool alice spawns is hers alone.
	listChanged := make(chan struct{}, 4)
	alice := httpClientSession(t, url, aliceTok, listChanged)
	if r := call(t, alice, "spawn_tool", doiArgs); r.IsError {
		t.Fatal(text(r))
	}
	select {
	case <-listChanged:
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed over HTTP")
	}
	if r := call(t, alice, "extract_dois", map[string]any{"text": "10.1234/x"}); r.IsError || text(r) != `{"dois":["10.1234/x"]}` {
		t.Fatalf("call over HTTP: %q", text(r))
	}
	bob := httpClientSession(t, url, bobTok, nil)
	if names := toolNames(t, bob); slices.Contains(names, "extract_dois") {
		t.Errorf("bob lists alice's tool: %v", names)
	}
	if _, err := bob.CallTool(context.Background(), &mcp.CallToolParams{Name: "extract_dois", Arguments: map[string]any{"text": "10.1/x"}}); err == nil {
		t.Error("bob called alice's tool")
	}
	// A second connection of alice's sees her tool.
	if names := toolNames(t, httpClientSession(t, url, aliceTok, nil)); !slices.Contains(names, "extract_dois") {
		t.Errorf("alice's second connection lacks her tool: %v", names)
	}
	// A JWT's subject is a client of its own (an e-mail address becomes a
	// stable identifier).
	carol := httpClientSession(t, url, mint("carol@example.com", "orqest", time.Now().Add(time.Hour)), nil)
	if r := call(t, carol, "run_python", map[string]any{"code": "return 6 * 7"}); r.IsError || text(r) != "42" {
		t.Errorf("carol's run_python: %q", text(r))
	}
	if names := toolNames(t, carol); slices.Contains(names, "extract_dois") {
		t.Errorf("carol lists alice's tool: %v", names)
	}
	clients.mu.Lock()
	var ids []string
	for id := range clients.byID {
		ids = append(ids, id)
	}
	clients.mu.Unlock()
	slices.Sort(ids)
	if want := []string{"alice", "bob", httpauth.ClientID("carol@example.com")}; !slices.Equal(ids, want) {
		t.Errorf("clients %v, want %v", ids, want)
	}
}

// `mcp serve --http` over TLS with the real binary: a client that trusts
// the certificate connects; one that does not, cannot.
func TestMCPServeTLS(t *testing.T) {
	needPlugin(t)
	dir := t.TempDir()
	certFile, keyFile, pool := selfSignedCert(t, dir)
	tokFile := filepath.Join(dir, "tokens")
	const tok = "0123456789abcdef0123456789abcdef"
	os.WriteFile(tokFile, []byte("alice "+tok+"\n"), 0o600)
	url := startServer(t, dir, "--token-file", tokFile, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("not an https URL: %q", url)
	}
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp := postInit(t, trusting, url, "Bearer "+tok); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize over TLS: status %d", resp.StatusCode)
	}
	if resp := postInit(t, trusting, url, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("initialize over TLS without a token: status %d", resp.StatusCode)
	}
	if _, err := http.Post(url, "application/json", strings.NewReader("{}")); err == nil {
		t.Error("a client that does not trust the certificate connected")
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key into dir.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestMCPServeRefusesHTTPWithoutToken(t *testing.T) {
	t.Setenv(mcpTokenEnv, "")
	r := runCLI(t, "", "", "mcp", "serve", "--http", "127.0.0.1:0")
	if r.code != exitError || !strings.Contains(r.stderr, "requires authentication") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	short := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	r = runCLI(t, "", "", "mcp", "serve", "--http", "127.0.0.1:0", "--token-file", short)
	if r.code != exitError || !strings.Contains(r.stderr, "at least 16") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if r = runCLI(t, "", "", "mcp"); r.code != exitError || !strings.Contains(r.stderr, "mcp serve") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if r = runCLI(t, "", "", "mcp", "serve", "--max-conns-per-ip", "8"); r.code != exitError || !strings.Contains(r.stderr, "only apply with --http") {
		t.Fatalf("--max-conns-per-ip without --http: exit %d stderr %q", r.code, r.stderr)
	}
	good := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(good, []byte("alice 0123456789abcdef0123456789abcdef\n"), 0o600)
	if r = runCLI(t, "", "", "mcp", "serve", "--http", "127.0.0.1:0", "--token-file", good, "--max-conns-per-ip", "-1"); r.code != exitError || !strings.Contains(r.stderr, "--max-conns-per-ip") {
		t.Fatalf("--max-conns-per-ip -1: exit %d stderr %q", r.code, r.stderr)
	}
}

// The real binary over stdio, as an MCP client configuration runs it: the
// embedded default policy, the plugin next to the executable.
func TestMCPServeStdio(t *testing.T) {
	needPlugin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(cli, "mcp", "serve")
	cmd.Dir = t.TempDir()
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	init := cs.InitializeResult()
	if init == nil || init.ServerInfo.Name != "orqest-sandbox" {
		t.Fatalf("initialize %+v", init)
	}
	if r := call(t, cs, "spawn_tool", map[string]any{
		"name": "word_count", "parameters": map[string]any{"text": "string"},
		"implementation": "return len(args['text'].split())",
	}); r.IsError {
		t.Fatal(text(r))
	}
	if r := call(t, cs, "word_count", map[string]any{"text": "a b c"}); r.IsError || text(r) != "3" {
		t.Fatalf("word_count: %q", text(r))
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Exited() {
		t.Fatalf("server did not exit after the client closed: %v", cmd.ProcessState)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("server exit code %d", code)
	}
}
