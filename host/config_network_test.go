package host

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

func TestNetworkBlockParses(t *testing.T) {
	src := `
sandbox "docker" {
  plugin = "docker"
  network {
    allow = [
      "api.example.com:443",
      "*.internal.example",
      "10.0.0.0/8:5432",
    ]
    deny            = ["secret.internal.example"]
    budget_bytes    = 1048576
    max_connections = 8
  }
}

sandbox "tier1" {
  plugin = "subprocess"
}
`
	cfg, diags := ParseConfig("config.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	d, _ := cfg.SandboxConfigNamed("docker")
	got := cfg.SandboxEgress(d)
	want := &shared.EgressPolicy{
		Name:  `sandbox "docker" network {}`,
		Allow: []string{"api.example.com:443", "*.internal.example", "10.0.0.0/8:5432"},
		Deny:  []string{"secret.internal.example"}, BudgetBytes: 1 << 20, MaxConnections: 8,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SandboxEgress = %+v, want %+v", got, want)
	}
	pol, ok := cfg.SandboxNetwork(d)
	if !ok || len(pol.Allow) != 3 || len(pol.Deny) != 1 || pol.Allow[2].String() != "addresses 10.0.0.0/8, port 5432" {
		t.Errorf("SandboxNetwork = %+v, %v", pol, ok)
	}
	// Without the block: no network, nothing for the backend.
	t1, _ := cfg.SandboxConfigNamed("tier1")
	if e := cfg.SandboxEgress(t1); e != nil {
		t.Errorf("tier1 without a network block: %+v", e)
	}
	if _, ok := cfg.SandboxNetwork(t1); ok {
		t.Error("tier1 without a network block has rules")
	}
}

// TestNetworkBlockDiagnostics: a malformed entry is an error at the entry
// itself (file:line:col of its string), every one reported.
func TestNetworkBlockDiagnostics(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		want        []string // "line:col: text" of each error, in order
	}{
		{"entries", `network {
    allow = ["ok.example", "*", "https://x.example"]
    deny  = ["10.0.0.1/8"]
  }`, []string{
			`5:28: Invalid network entry: allow: invalid egress entry "*": '*' is only allowed`,
			`5:33: Invalid network entry: allow: invalid egress entry "https://x.example": write a host, not a URL`,
			`6:14: Invalid network entry: deny: invalid egress entry "10.0.0.1/8": 10.0.0.1/8 has host bits set`,
		}},
		{"port", `network {
    allow = ["api.example.com:70000"]
  }`, []string{`5:14: Invalid network entry: allow: invalid egress entry "api.example.com:70000": port "70000" is not a number from 1 to 65535`}},
		{"not a list", `network {
    allow = "api.example.com"
  }`, []string{`5:13: Invalid network entries: allow must be a list of strings`}},
		{"not strings", `network {
    allow = [["a.example"]]
  }`, []string{`5:14: Invalid network entry: allow entries are strings`}},
		{"empty", `network {
    deny = ["a.example"]
  }`, []string{`4:3: Network block allows nothing`}},
		{"budget", `network {
    allow        = ["a.example"]
    budget_bytes = 0
  }`, []string{`6:20: Invalid limit: budget_bytes must be a positive number of bytes`}},
		{"connections", `network {
    allow           = ["a.example"]
    max_connections = -1
  }`, []string{`6:23: Invalid limit: max_connections must be a positive number`}},
		{"unknown attribute", `network {
    allow = ["a.example"]
    allow_all = true
  }`, []string{`6:5: Unsupported argument`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf("\nsandbox \"d\" {\n  plugin = \"docker\"\n  %s\n}\n", tc.block)
			_, diags := ParseConfig("config.hcl", []byte(src))
			var got []string
			for _, d := range diags {
				if d.Subject == nil {
					t.Errorf("diagnostic without a range: %s", d.Error())
					continue
				}
				got = append(got, fmt.Sprintf("%d:%d: %s: %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary, d.Detail))
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("diagnostic %d:\n got %s\nwant %s…", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// A network block on a backend that cannot enforce it (no egress
// capability) fails the sandbox's launch with a diagnostic at the block:
// its sessions would otherwise get no network or all of it.
func TestNetworkBlockNeedsCapability(t *testing.T) {
	sessionHost(t, "", "") // builds the plugin
	src := "sandbox \"s\" {\n  plugin = \"sessions\"\n  network {\n    allow = [\"api.example.com:443\"]\n  }\n}\n"
	err := startSandboxS(t, src)
	var de *DiagnosticsError
	if !errors.As(err, &de) || de.Diagnostics[0].Subject == nil || de.Diagnostics[0].Subject.Start.Line != 3 ||
		!strings.Contains(de.Error(), `cannot enforce egress rules (no "egress" capability)`) {
		t.Fatalf("want a diagnostic at the network block (line 3) naming the capability, got %v", err)
	}
}

// TestNetworkBlockAcknowledgesEgressModules: a sandbox's network {} block
// acknowledges urllib.request and urllib.error (the runner serves them
// through the egress proxy), for that sandbox only: the same policy on a
// sandbox without one is refused, and the lint says so unless every
// sandbox of the policy has a network block.
func TestNetworkBlockAcknowledgesEgressModules(t *testing.T) {
	src := `
policy "fetch" {
  allowed_imports = ["json", "urllib", "urllib.request", "urllib.error"]
}
policy "fetch-os" {
  allowed_imports = ["urllib.request", "socket"]
}
sandbox "net" {
  plugin = "docker"
  policy = "fetch"
  network {
    allow = ["api.example.com:443"]
  }
}
sandbox "net-os" {
  plugin = "docker"
  policy = "fetch-os"
  network {
    allow = ["api.example.com:443"]
  }
}
`
	cfg, diags := ParseConfig("config.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	net, _ := cfg.SandboxConfigNamed("net")
	if bad := cfg.SandboxPolicy(net).UnacknowledgedDangerous(); len(bad) != 0 {
		t.Errorf("with a network block: %v unacknowledged", bad)
	}
	netOS, _ := cfg.SandboxConfigNamed("net-os")
	if bad := cfg.SandboxPolicy(netOS).UnacknowledgedDangerous(); !reflect.DeepEqual(bad, []string{"socket"}) {
		t.Errorf("socket with a network block: %v unacknowledged, want [socket]", bad)
	}
	if d := LintPolicy(cfg); !d.HasErrors() || strings.Contains(d.Error(), `"fetch" lets`) {
		t.Errorf("lint: %v; want only fetch-os's socket refused", d)
	}
	cfg.Sandboxes = append(cfg.Sandboxes, &SandboxConfig{Name: "plain", Plugin: "docker", Policy: "fetch"})
	plain := cfg.Sandboxes[len(cfg.Sandboxes)-1]
	if bad := cfg.SandboxPolicy(plain).UnacknowledgedDangerous(); !reflect.DeepEqual(bad, []string{"urllib.error", "urllib.request"}) {
		t.Errorf("without a network block: %v unacknowledged, want urllib.error and urllib.request", bad)
	}
	if d := LintPolicy(cfg); !strings.Contains(d.Error(), `"fetch"`) {
		t.Errorf("lint with a sandbox of fetch without a network block: %v", d)
	}
}
