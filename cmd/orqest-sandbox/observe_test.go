package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/internal/httpauth"
)

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /healthz is open and answers from the plugin; /metrics needs the token
// and, after a run_python call over MCP, shows the execution counted with
// its sandbox, tier and outcome.
func TestMCPHTTPHealthAndMetrics(t *testing.T) {
	s, h := newTestMCPServerHost(t)
	const token = "0123456789abcdef0123456789abcdef"
	clients, err := newMCPClients(context.Background(), s.sb, h.Bus())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(clients.httpHandler(httpauth.NewVerifier(map[string]string{token: "alice"}, nil), h.MetricsHandler()))
	t.Cleanup(ts.Close) // after the client session closes

	if code, body := get(t, ts.URL+"/healthz", ""); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz without a token: %d %q", code, body)
	}
	if code, _ := get(t, ts.URL+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token: %d, want 401", code)
	}
	if code, _ := get(t, ts.URL+"/metrics", "wrong-token-wrong-token-wrong-token"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong token: %d, want 401", code)
	}

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "metrics-agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if r := call(t, cs, "run_python", map[string]any{"code": "return 6*7"}); r.IsError || text(r) != "42" {
		t.Fatalf("run_python: %q", text(r))
	}
	if r := call(t, cs, "run_python", map[string]any{"code": "import os\nreturn 1"}); !r.IsError {
		t.Fatalf("import os accepted: %q", text(r))
	}

	code, body := get(t, ts.URL+"/metrics", token)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`orqest_executions_total{outcome="success",sandbox="tier1",tier="1"} 1`,
		`orqest_executions_total{outcome="validation",sandbox="tier1",tier="1"} 1`,
		`orqest_validation_rejections_total{rule="import-not-allowed",sandbox="tier1"} 1`,
		`orqest_plugin_launches_total{plugin="subprocess",sandbox="tier1"} 1`,
		`orqest_in_flight{sandbox="tier1"} 0`,
		`orqest_execution_seconds_count{sandbox="tier1"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}

	// A host that can no longer reach its plugin is unhealthy.
	h.Close()
	if code, body := get(t, ts.URL+"/healthz", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz after the host closed: %d %q, want 503", code, body)
	}
}

// CLI run through a policy with audit_log: the record names the OS user as
// the caller, the code's sha256 and the outcome; a second run continues the
// sequence.
func TestRunAudited(t *testing.T) {
	needPlugin(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.hcl")
	src := "audit_log = \"audit.jsonl\"\nplugin_dir = \"" + binDir + "\"\nsandbox \"tier1\" {\n  plugin = \"subprocess\"\n}\n"
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	const code = "return 1+1"
	for i := 0; i < 2; i++ {
		if r := runCLI(t, dir, "", "run", "--config", cfg, "-e", code); r.code != 0 {
			t.Fatalf("run: %d %s", r.code, r.stderr)
		}
	}
	f, err := os.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []host.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev host.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, ev)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	p := recs[0].Payload
	if recs[0].Type != host.EventExecution || p["caller"] != "cli:"+u.Username || p["code_sha256"] != host.CodeSHA256(code) ||
		p["outcome"] != host.OutcomeSuccess || recs[0].Sandbox != "tier1" {
		t.Errorf("record %+v", recs[0])
	}
	if recs[0].Seq != 1 || recs[1].Seq != 2 {
		t.Errorf("seqs %d, %d: want 1, 2 across two processes", recs[0].Seq, recs[1].Seq)
	}
}
