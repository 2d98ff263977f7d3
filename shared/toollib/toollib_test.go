package toollib_test

import (
	"testing"

	"github.com/orqest/sandbox/shared/toollib"
)

// TestPromotionNormalize: the defaults a backend applies to a sandbox's
// promotion block, and the values it refuses.
func TestPromotionNormalize(t *testing.T) {
	for _, c := range []struct {
		in   toollib.Promotion
		want toollib.Promotion
	}{
		{toollib.Promotion{}, toollib.Promotion{Policy: toollib.PolicyThreshold, Threshold: toollib.DefaultThreshold}},
		{toollib.Promotion{Policy: toollib.PolicyOperatorApproval}, toollib.Promotion{Policy: toollib.PolicyOperatorApproval, Threshold: 1}},
		{toollib.Promotion{Policy: toollib.PolicyEager, Threshold: 7}, toollib.Promotion{Policy: toollib.PolicyEager, Threshold: 1}},
		{toollib.Promotion{Threshold: 5, DemoteAfterFailures: 2}, toollib.Promotion{Policy: toollib.PolicyThreshold, Threshold: 5, DemoteAfterFailures: 2}},
	} {
		got, err := c.in.Normalize()
		if err != nil || got != c.want {
			t.Errorf("Normalize(%+v) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []toollib.Promotion{
		{Policy: "sometimes"},
		{Threshold: -1},
		{Threshold: 1_000_001},
		{DemoteAfterFailures: -3},
	} {
		if got, err := bad.Normalize(); err == nil {
			t.Errorf("Normalize(%+v) = %+v, want an error", bad, got)
		}
	}
}

// TestCodeHash: a tool is identified by the SHA-256 of its code, so one
// changed byte is another tool.
func TestCodeHash(t *testing.T) {
	const empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if h := toollib.CodeHash(""); h != empty {
		t.Errorf("CodeHash(\"\") = %s", h)
	}
	if toollib.CodeHash("return 1") == toollib.CodeHash("return 2") {
		t.Error("different code, same hash")
	}
}
