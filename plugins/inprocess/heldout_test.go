package inprocess

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/heldout"
	"github.com/orqest/sandbox/shared"
)

// TestHeldOutAttacksTier0 runs the held-out attack corpus
// (validator/testdata/heldout/attacks, written without looking at the
// checkers) on tier 0 with classes on — the sandbox whose Python layers are
// the only wall, in its most permissive setting: no attack succeeds, and
// the interpreter still serves a call afterwards.
func TestHeldOutAttacksTier0(t *testing.T) {
	b := NewBackend(hclog.NewNullLogger())
	if _, err := b.Configure(context.Background(), shared.ConfigureRequest{Unsafe: true, Classes: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	attacks, allow, err := heldout.Load("attacks")
	if err != nil {
		t.Fatalf("held-out corpus: %v", err)
	}
	for _, a := range attacks {
		res := execute(t, b, shared.ExecuteRequest{Code: a.Code, AllowedImports: allow, Timeout: 5 * time.Second})
		if res.Success {
			t.Errorf("attack %s succeeded on tier 0: %s", a.Name, res.Output)
		}
	}
	if res := execute(t, b, shared.ExecuteRequest{Code: "import json\nreturn json.dumps({'a': 1})", AllowedImports: []string{"json"}}); !res.Success || string(res.Output) != `"{\"a\": 1}"` {
		t.Fatalf("after the attacks: %s %s: %s", res.Output, res.ErrorKind, res.Error)
	}
}
