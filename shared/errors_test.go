package shared

import (
	"errors"
	"testing"
)

func TestValidationErrorIs(t *testing.T) {
	err := ValidateResponse{Findings: []Finding{{Rule: "r", Message: "m", Line: 1, Column: 2}, {Rule: "x"}}}.Err()
	if !errors.Is(err, ErrValidation) {
		t.Fatal("ValidationError must match ErrValidation")
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Findings) != 2 {
		t.Fatal("errors.As must expose findings")
	}
	if got := err.Error(); got != `validation failed: 1:2: r: m (and 1 more)` {
		t.Fatalf("message %q", got)
	}
	if (ValidateResponse{}).Err() != nil {
		t.Fatal("no findings must be nil")
	}
}
