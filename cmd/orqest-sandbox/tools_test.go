package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared/toollib"
)

// TestToolsCLIOperatorApproval drives the per-user tool library through the
// CLI, the host, the docker plugin over gRPC, a real container and a real
// volume: `run --tool` makes a tool pending (tool.promotion_pending reaches
// the host bus and the audit log), `tools promote` needs and gets an operator
// token, `tools list` shows the governance fields, `tools forget` removes it.
func TestToolsCLIOperatorApproval(t *testing.T) {
	needDockerPlugin(t)
	user := "orqtest-cli-" + randomID()
	t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", "orqest-user-"+user).Run() })
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	cfg := fmt.Sprintf(`
plugin_dir = %q
audit_log  = "audit.jsonl"
policy "p" {
  timeout = "5s"
}
sandbox "docker" {
  plugin = "docker"
  policy = "p"
  config {
    image = "orqest/agent-runtime:0.1.0"
    promotion { policy = "operator_approval" }
  }
}
`, binDir)
	if err := os.WriteFile(filepath.Join(dir, "config.hcl"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, dir, "", "run", "--sandbox", "docker", "--user", user, "--tool", "add", "--args", `{"a":2,"b":3}`, "--json", "-e", "return args['a'] + args['b']")
	if r.code != 0 || decodeResult(t, r).Output == nil || string(decodeResult(t, r).Output) != "5" {
		t.Fatalf("run: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "tool.promotion_pending") || !strings.Contains(r.stderr, "tools promote --user "+user+" add") {
		t.Fatalf("run did not report the pending promotion:\n%s", r.stderr)
	}
	r = runCLI(t, dir, "", "tools", "list", "--user", user, "--json")
	var lib toollib.ListResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &lib) != nil || len(lib.Tools) != 1 || lib.Tools[0].Status != "pending" || lib.Tools[0].Successes != 1 || lib.Policy.Policy != "operator_approval" {
		t.Fatalf("tools list: code %d %+v\n%s\n%s", r.code, lib, r.stdout, r.stderr)
	}
	r = runCLI(t, dir, "", "tools", "promote", "--user", user, "--by", "ci-operator", "add")
	if r.code != 0 || !strings.Contains(r.stdout, "promoted add") || !strings.Contains(r.stdout, "ci-operator") {
		t.Fatalf("tools promote: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, dir, "", "tools", "list", "--user", user)
	if r.code != 0 || !strings.Contains(r.stdout, "promoted") || !strings.Contains(r.stdout, "ci-operator") {
		t.Fatalf("tools list (table): code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, dir, "", "tools", "forget", "--user", user, "add", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"changed":1`) {
		t.Fatalf("tools forget: code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, dir, "", "tools", "promote", "--user", user, "add")
	if r.code != 3 || !strings.Contains(r.stderr, "no library entry") {
		t.Fatalf("promote after forget: code %d\n%s", r.code, r.stderr)
	}
	// The events reached the host bus: the audit log is a bus subscriber.
	f, err := os.Open(audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var seen []string
	var executions int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev host.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue
		}
		if ev.Type == host.EventExecution || ev.Type == host.EventSessionToolCall {
			// The host's records of the calls themselves, not library events.
			if ev.Type == host.EventExecution && ev.ToolName() == "add" && ev.Payload["user"] == user {
				executions++
			}
			continue
		}
		if ev.ToolName() == "add" {
			seen = append(seen, ev.Type)
			if ev.Sandbox != "docker" || ev.Payload["user"] != user {
				t.Errorf("event %s: sandbox %q payload %v", ev.Type, ev.Sandbox, ev.Payload)
			}
		}
	}
	want := []string{toollib.EventPromotionPending, toollib.EventPromoted, toollib.EventForgotten}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("audit log events: %v, want %v", seen, want)
	}
	if executions != 1 {
		t.Fatalf("%d execution records of tool add, want 1", executions)
	}
	// Usage errors.
	if r := runCLI(t, dir, "", "tools", "list"); r.code != 3 || !strings.Contains(r.stderr, "--user") {
		t.Fatalf("tools list without --user: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, dir, "", "tools", "promote", "--user", user); r.code != 3 {
		t.Fatalf("promote without a name: %d %s", r.code, r.stderr)
	}
}
