package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// `stateful = true` on a sandbox whose plugin keeps no session
// interpreters is refused when the plugin starts, with a diagnostic at the
// sandbox block; a wrong type is a parse diagnostic; asking for stateful
// and stateless at once is a FieldError, before the plugin is called.
func TestStatefulDefaultDiagnostics(t *testing.T) {
	h := newHost(t, `sandbox "a" {
  plugin   = "subprocess"
  stateful = true
}`)
	sb := defaultSandbox(t, h)
	err := sb.Start(context.Background())
	var de *DiagnosticsError
	if !errors.As(err, &de) || !strings.Contains(de.Error(), "stateful = true") || de.Diagnostics[0].Subject.Start.Line != 1 {
		t.Fatalf("stateful on tier 1: %v, want a diagnostic at the sandbox block", err)
	}

	if _, diags := ParseConfig("/x/config.hcl", []byte("sandbox \"a\" {\n  plugin = \"subprocess\"\n  stateful = \"yes\"\n}\n")); !diags.HasErrors() || diags[0].Subject.Start.Line != 3 {
		t.Errorf("stateful = \"yes\": %v, want an error on line 3", diags)
	}

	sb = defaultSandbox(t, newHost(t, `sandbox "b" { plugin = "subprocess" }`))
	var fe *shared.FieldError
	if _, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", SessionID: "s", Stateful: true, Stateless: true}); !errors.As(err, &fe) || fe.Field != "stateful" {
		t.Errorf("stateful and stateless: %v, want a FieldError on stateful", err)
	}
}
