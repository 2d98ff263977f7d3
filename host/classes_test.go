package host

import (
	"context"
	"testing"
)

// TestSandboxClasses: class statements are on by default, for an `unsafe`
// (tier-0) sandbox too, and `classes` overrides that; the host's own check
// follows the sandbox's setting.
func TestSandboxClasses(t *testing.T) {
	src := `sandbox "t1" {
  plugin = "subprocess"
}
sandbox "t1off" {
  plugin  = "subprocess"
  classes = false
}
sandbox "t0" {
  plugin = "inprocess"
  unsafe = true
}
sandbox "t0off" {
  plugin  = "inprocess"
  unsafe  = true
  classes = false
}
`
	cfg, diags := ParseConfig("/x/config.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	code := "class Point:\n    def __init__(self, x):\n        self.x = x\nreturn Point(1).x"
	for name, want := range map[string]bool{"t1": true, "t1off": false, "t0": true, "t0off": false} {
		sb, ok := cfg.SandboxConfigNamed(name)
		if !ok {
			t.Fatalf("no sandbox %q", name)
		}
		p := cfg.SandboxPolicy(sb)
		if p.Classes != want {
			t.Errorf("sandbox %q: Classes = %v, want %v", name, p.Classes, want)
		}
		fs := CheckCode(context.Background(), nil, p, code)
		if accepted := len(fs) == 0; accepted != want {
			t.Errorf("sandbox %q: class code accepted = %v, want %v (%v)", name, accepted, want, fs)
		}
	}
}
