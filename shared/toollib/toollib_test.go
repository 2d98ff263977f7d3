package toollib_test

import (
	"errors"
	"testing"

	"github.com/orqest/sandbox/shared"
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
		{toollib.Promotion{Policy: toollib.PolicyEager}, toollib.Promotion{Policy: toollib.PolicyEager, Threshold: 1}},
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
		{Policy: toollib.PolicyEager, Threshold: 7}, // eager promotes on every success: a threshold contradicts it
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

// Normalize names the attribute at fault, so the host can point at it in
// the policy file.
func TestNormalizeNamesTheField(t *testing.T) {
	for _, c := range []struct {
		p     toollib.Promotion
		field string
	}{
		{toollib.Promotion{Policy: "sometimes"}, "policy"},
		{toollib.Promotion{Threshold: -1}, "threshold"},
		{toollib.Promotion{Policy: toollib.PolicyEager, Threshold: 3}, "threshold"},
		{toollib.Promotion{DemoteAfterFailures: -1}, "demote_after_failures"},
	} {
		_, err := c.p.Normalize()
		var fe *shared.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want a FieldError on %q", c.p, err, c.field)
		}
	}
	if p, err := (toollib.Promotion{Policy: toollib.PolicyEager}).Normalize(); err != nil || p.Threshold != 1 {
		t.Errorf("eager: %+v %v", p, err)
	}
}
