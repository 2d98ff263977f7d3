package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// policy check explains what each sandbox's network block lets its
// sessions reach: every entry in words, the limits, and "none" for a
// sandbox without one.
func TestPolicyCheckExplainsNetwork(t *testing.T) {
	needDockerPlugin(t)
	cfg := writeConfig(t, fmt.Sprintf(`plugin_dir = %q
sandbox "tier1" {
  plugin = "subprocess"
}
sandbox "agents" {
  plugin = "docker"
  config { image = %q }
  network {
    allow        = ["api.example.com:443", "*.internal.example", "10.0.0.0/8:5432"]
    deny         = ["secret.internal.example"]
    budget_bytes = 1048576
  }
}
`, binDir, runtimeImage()))
	r := runCLI(t, "", "", "policy", "check", cfg)
	if r.code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"network:\n  sandbox tier1: none (no network block)\n",
		"  sandbox agents: through the egress proxy only (budget_bytes 1048576, max_connections 32 per session); deny wins over allow\n" +
			"    allow name api.example.com, port 443\n" +
			"    allow names under internal.example, any port\n" +
			"    allow addresses 10.0.0.0/8, port 5432\n" +
			"    deny  name secret.internal.example, any port\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, "", "", "policy", "check", "--json", cfg)
	var rep policyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	n, ok := rep.Network["agents"]
	if _, has := rep.Network["tier1"]; has || !ok || len(n.Allow) != 3 || len(n.Deny) != 1 || n.BudgetBytes != 1048576 || n.MaxConnections != 32 {
		t.Errorf("--json network: %+v", rep.Network)
	}
}
