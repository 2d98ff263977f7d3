package inprocess

import (
	"context"
	"strings"
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

// TestHeldOutBenignTier0 runs the held-out benign corpus on tier 0 with
// its defaults (classes on, as the host sends them): the share that runs to
// a result is logged, with each failure's last line, and may not fall
// below what it was measured at.
func TestHeldOutBenignTier0(t *testing.T) {
	b := NewBackend(hclog.NewNullLogger())
	if _, err := b.Configure(context.Background(), shared.ConfigureRequest{Unsafe: true, Classes: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	bodies, allow, err := heldout.Load("benign")
	if err != nil {
		t.Fatalf("held-out corpus: %v", err)
	}
	ok := 0
	for _, bd := range bodies {
		res := execute(t, b, shared.ExecuteRequest{Code: bd.Code, AllowedImports: allow, Timeout: 10 * time.Second})
		if res.Success {
			ok++
			continue
		}
		msg := strings.TrimSpace(res.Error)
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		t.Logf("benign %s: %s: %s", bd.Name, res.ErrorKind, msg)
	}
	rate := 100 * float64(ok) / float64(len(bodies))
	t.Logf("held-out benign corpus on tier 0: %d of %d ran to a result (%.1f %%)", ok, len(bodies), rate)
	if rate < heldOutTier0Floor {
		t.Errorf("held-out benign success on tier 0 %.1f %% is below %.0f %%", rate, heldOutTier0Floor)
	}
}

// heldOutTier0Floor is the share of the held-out benign corpus tier 0 ran
// to a result with its defaults when it was measured (67 % with classes
// off, the default before).
const heldOutTier0Floor = 100.0
