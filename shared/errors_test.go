package shared

import (
	"errors"
	"strings"
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

func TestRejected(t *testing.T) {
	fs := []Finding{{Rule: "forbidden-builtin", Message: "eval is not allowed", Line: 1, Column: 8}}
	r := Rejected(fs, Limits{TimeoutMS: 500})
	if r.Success || r.ErrorKind != KindValidation || string(r.Output) != "null" || len(r.Findings) != 1 ||
		r.Limits.TimeoutMS != 500 || !strings.Contains(r.Error, "eval is not allowed") {
		t.Fatalf("Rejected = %+v", r)
	}
	if !errors.Is(&ValidationError{Findings: r.Findings}, ErrValidation) {
		t.Fatal("its findings do not make a ValidationError")
	}
}
