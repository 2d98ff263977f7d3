package plugin

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// pauseBackend is a session backend with shared.SessionPauser: session
// "busy" has a call in flight, "paused" is paused, "s1" pauses without its
// memory.
type pauseBackend struct {
	toolsBackend
	paused []string
}

func (b *pauseBackend) Pause(_ context.Context, req shared.PauseRequest) (shared.PauseResponse, error) {
	switch req.SessionID {
	case "busy":
		return shared.PauseResponse{}, fmt.Errorf("session %q has a call in flight: %w", req.SessionID, shared.ErrSessionBusy)
	case "gone":
		return shared.PauseResponse{}, fmt.Errorf("no open session %q: %w", req.SessionID, shared.ErrSessionNotFound)
	}
	b.paused = append(b.paused, req.SessionID)
	return shared.PauseResponse{Kept: []string{"default/df"}, NotKept: []string{"default/gen"}, Bytes: 4096}, nil
}

func (b *pauseBackend) Resume(_ context.Context, req shared.ResumeRequest) (shared.ResumeResponse, error) {
	if req.SessionID != "s1" {
		return shared.ResumeResponse{}, fmt.Errorf("session %q is not paused: %w", req.SessionID, shared.ErrSessionNotFound)
	}
	return shared.ResumeResponse{SessionID: "s1", UserID: "alice", StateLost: true, Kept: []string{"default/df"}, NotKept: []string{"default/gen"}}, nil
}

// TestSessionPauseRoundTripGRPC: the optional shared.SessionPauser service
// crosses gRPC field by field, and its refusals keep their classes (busy,
// not found) as status details.
func TestSessionPauseRoundTripGRPC(t *testing.T) {
	impl := &pauseBackend{}
	sp := dispenseTools(t, impl).(shared.SessionPauser)
	ctx := context.Background()
	p, err := sp.Pause(ctx, shared.PauseRequest{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (shared.PauseResponse{Kept: []string{"default/df"}, NotKept: []string{"default/gen"}, Bytes: 4096}); !reflect.DeepEqual(p, want) || !reflect.DeepEqual(impl.paused, []string{"s1"}) {
		t.Errorf("pause: got %+v (plugin saw %v)", p, impl.paused)
	}
	_, err = sp.Pause(ctx, shared.PauseRequest{SessionID: "busy"})
	if !errors.Is(err, shared.ErrSessionBusy) || !errors.Is(err, shared.ErrFailedPrecondition) || errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("busy: want ErrSessionBusy (a failed precondition), got %v", err)
	}
	if _, err := sp.Pause(ctx, shared.PauseRequest{SessionID: "gone"}); !errors.Is(err, shared.ErrSessionNotFound) {
		t.Errorf("gone: want ErrSessionNotFound, got %v", err)
	}
	r, err := sp.Resume(ctx, shared.ResumeRequest{SessionID: "s1"})
	if want := (shared.ResumeResponse{SessionID: "s1", UserID: "alice", StateLost: true, Kept: []string{"default/df"}, NotKept: []string{"default/gen"}}); err != nil || !reflect.DeepEqual(r, want) {
		t.Errorf("resume: got %+v, %v", r, err)
	}
	if _, err := sp.Resume(ctx, shared.ResumeRequest{SessionID: "nope"}); !errors.Is(err, shared.ErrSessionNotFound) {
		t.Errorf("resume of a session never paused: want ErrSessionNotFound, got %v", err)
	}
}

// TestSessionPauseUnsupportedGRPC: against a backend without
// shared.SessionPauser, Pause and Resume are ErrNotSupported, decided by
// the status (codes.Unimplemented of a service not registered), with
// nothing sent to the backend.
func TestSessionPauseUnsupportedGRPC(t *testing.T) {
	sp := dispenseTools(t, &toolsBackend{}).(shared.SessionPauser)
	if _, err := sp.Pause(context.Background(), shared.PauseRequest{SessionID: "s1"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Errorf("pause: want ErrNotSupported, got %v", err)
	}
	if _, err := sp.Resume(context.Background(), shared.ResumeRequest{SessionID: "s1"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Errorf("resume: want ErrNotSupported, got %v", err)
	}
}

// TestPauseClassesTravelAsDetails: session_busy and session_paused cross
// the wire by name in the status's detail, not by message: a message that
// names another class does not change them.
func TestPauseClassesTravelAsDetails(t *testing.T) {
	for _, class := range []error{shared.ErrSessionBusy, shared.ErrSessionPaused} {
		err := FromGRPC(ToGRPC(fmt.Errorf("not supported, really: %w", class)))
		if !errors.Is(err, class) || !errors.Is(err, shared.ErrFailedPrecondition) || errors.Is(err, shared.ErrNotSupported) {
			t.Errorf("%v: round trip gave %v (classes %v)", class, err, ErrorClasses(err))
		}
	}
}
