package host

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

func TestPromotionBlockDiagnostics(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{`promotion { policy = "sometimes" }`, "config.hcl:5,24-35: Unknown promotion policy"},
		{`promotion { threshold = 0 }`, "config.hcl:5,27-28: Invalid promotion threshold"},
		{"promotion {\n policy = \"eager\"\n threshold = 3\n }", "Threshold with the eager policy"},
		{`promotion { demote_after_failures = -1 }`, "Invalid demote_after_failures"},
		{`promotion { treshold = 3 }`, "Unsupported argument"},
	} {
		src := "sandbox \"docker\" {\n  plugin = \"docker\"\n  config { image = \"x\" }\n\n  " + tc.block + "\n}\n"
		_, diags := ParseConfig("config.hcl", []byte(src))
		if !diags.HasErrors() || !strings.Contains(diagText(diags), tc.want) {
			t.Errorf("%s: want %q, got %s", tc.block, tc.want, diagText(diags))
		}
	}
	src := "sandbox \"docker\" {\n  plugin = \"docker\"\n  promotion {\n    policy = \"threshold\"\n    threshold = 5\n    demote_after_failures = 2\n  }\n}\n"
	cfg, diags := ParseConfig("config.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sb := cfg.Sandboxes[0]
	// A plugin with a tool library gets the block in its config JSON.
	out, d := addPromotion(sb, "docker", shared.InfoResponse{Capabilities: []shared.Capability{shared.CapToolLibrary}}, json.RawMessage(`{"image":"i"}`), nil)
	if d.HasErrors() || string(out) != `{"image":"i","promotion":{"policy":"threshold","threshold":5,"demote_after_failures":2}}` {
		t.Fatalf("addPromotion: %s %v", out, d)
	}
	// One without is told so, at the block.
	_, d = addPromotion(sb, "subprocess", shared.InfoResponse{}, nil, nil)
	if !d.HasErrors() || !strings.Contains(diagText(d), "config.hcl:3,3-12: Plugin keeps no tool library") {
		t.Fatalf("no tool_library: %s", diagText(d))
	}
}

func diagText(diags interface{ Errs() []error }) string {
	var b strings.Builder
	for _, e := range diags.Errs() {
		b.WriteString(e.Error())
		b.WriteString("\n")
	}
	return b.String()
}
