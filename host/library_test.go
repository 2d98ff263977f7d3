package host

import (
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// promotionSchema is the docker plugin's config schema, as far as these
// tests need it: an attribute and the nested promotion block.
var promotionSchema = []shared.ConfigAttribute{
	{Name: "image", Type: "string"},
	{Name: "promotion", Type: shared.ConfigBlock, Attributes: []shared.ConfigAttribute{
		{Name: "policy", Type: "string"},
		{Name: "threshold", Type: "number"},
		{Name: "demote_after_failures", Type: "number"},
	}},
}

// The promotion block lives in the backend's config block, decoded against
// the nested block the plugin declares; at the sandbox level (its old
// place) it is refused with a diagnostic that says where it went.
func TestPromotionBlockInConfig(t *testing.T) {
	old := "sandbox \"docker\" {\n  plugin = \"docker\"\n  promotion { policy = \"eager\" }\n}\n"
	if _, diags := ParseConfig("config.hcl", []byte(old)); !strings.Contains(diagText(diags), "config.hcl:3,3-12: The promotion block moved into config") {
		t.Errorf("sandbox-level promotion: %s", diagText(diags))
	}

	src := "sandbox \"docker\" {\n  plugin = \"docker\"\n  config {\n    image = \"i\"\n    promotion {\n      policy = \"threshold\"\n      threshold = 5\n      demote_after_failures = 2\n    }\n  }\n}\n"
	cfg, diags := ParseConfig("config.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sb := cfg.Sandboxes[0]
	out, d := decodeBackendConfig(sb, "docker", promotionSchema)
	if d.HasErrors() || string(out) != `{"image":"i","promotion":{"demote_after_failures":2,"policy":"threshold","threshold":5}}` {
		t.Fatalf("decode: %s %v", out, d)
	}
	// A refusal the plugin names by field points at the attribute.
	if r, ok := configRange(sb, "promotion.threshold"); !ok || r.Start.Line != 7 || r.Start.Column != 19 {
		t.Errorf("configRange(promotion.threshold) = %v %v, want line 7 col 19", r, ok)
	}
	if r, ok := configRange(sb, "promotion"); !ok || r.Start.Line != 5 {
		t.Errorf("configRange(promotion) = %v %v, want line 5", r, ok)
	}
	if _, ok := configRange(sb, "promotion.nothing"); ok {
		t.Error("configRange found an attribute the block does not write")
	}

	for _, tc := range []struct{ block, want string }{
		{"promotion {\n treshold = 3\n }", "Unsupported argument"},
		{"promotion { threshold = \"many\" }", "Incorrect attribute value type"},
		{"promotion {}\npromotion {}", "Duplicate promotion block"},
	} {
		src := "sandbox \"docker\" {\n  plugin = \"docker\"\n  config {\n" + tc.block + "\n}\n}\n"
		cfg, diags := ParseConfig("config.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if _, d := decodeBackendConfig(cfg.Sandboxes[0], "docker", promotionSchema); !strings.Contains(diagText(d), tc.want) {
			t.Errorf("%s: want %q, got %s", tc.block, tc.want, diagText(d))
		}
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
