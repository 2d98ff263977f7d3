package shared

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestErrorClassesSurviveGRPC(t *testing.T) {
	for _, class := range []error{
		ErrInvalidArgument, ErrNotFound, ErrFailedPrecondition, ErrPermissionDenied, ErrNotSupported,
		ErrUnavailable, ErrPluginShutdown, ErrInternal, context.DeadlineExceeded, context.Canceled,
	} {
		wrapped := fmt.Errorf("backend said: %w", class)
		back := FromGRPC(ToGRPC(wrapped))
		if !errors.Is(back, class) {
			t.Errorf("%v: round trip lost the class: got %v", class, back)
		}
		if back.Error() != wrapped.Error() {
			t.Errorf("%v: message changed: %q", class, back.Error())
		}
	}
}

func TestTransportUnavailableIsPluginShutdown(t *testing.T) {
	err := FromGRPC(status.Error(codes.Unavailable, "connection error: desc = transport is closing"))
	if !errors.Is(err, ErrPluginShutdown) {
		t.Fatalf("want ErrPluginShutdown, got %v", err)
	}
}

func TestUnclassedErrorBecomesUnknownThenInternal(t *testing.T) {
	st, _ := status.FromError(ToGRPC(errors.New("boom")))
	if st.Code() != codes.Unknown {
		t.Fatalf("code %v", st.Code())
	}
	if !errors.Is(FromGRPC(ToGRPC(errors.New("boom"))), ErrInternal) {
		t.Fatal("unknown should map to ErrInternal on the host")
	}
}

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
