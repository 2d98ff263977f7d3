package validator

import (
	"context"
	"testing"

	"github.com/orqest/sandbox/internal/heldout"
)

// TestHeldOutBenign: tool bodies written without looking at the checker
// (testdata/heldout/benign: JSON munging with keys like 'type' and 'os',
// builtins as local names, templating, classes and dataclasses, getattr
// with defaults, long generated code) pass with classes on, at 97 % or
// better. Each rejection is logged with its finding.
func TestHeldOutBenign(t *testing.T) {
	bodies, allow, err := heldout.Load("benign")
	if err != nil {
		t.Fatalf("held-out corpus: %v", err)
	}
	v := New()
	rejected := 0
	for _, b := range bodies {
		if fs := v.CheckWith(context.Background(), b.Code, allow, Features{Classes: true}); len(fs) > 0 {
			rejected++
			t.Logf("%s rejected: %v", b.Name, fs[0])
		}
	}
	rate := 100 * float64(len(bodies)-rejected) / float64(len(bodies))
	t.Logf("held-out benign corpus: %d of %d accepted (%.1f %%)", len(bodies)-rejected, len(bodies), rate)
	if rate < 97 {
		t.Errorf("held-out benign acceptance %.1f %% is below 97 %%", rate)
	}
}
