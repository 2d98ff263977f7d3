package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// A stateful call without a session is refused before the plugin with
// ErrInvalidArgument that tells the caller to open one; on a plugin without
// the "stateful_sessions" capability (tier 1) it is ErrNotSupported, never
// run statelessly behind the caller's back.
func TestStatefulRefusals(t *testing.T) {
	h := newHost(t, depsPolicy)
	sb, err := h.Sandbox(context.Background(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	_, err = sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", Stateful: true})
	if !errors.Is(err, shared.ErrInvalidArgument) || !strings.Contains(err.Error(), "open a session") {
		t.Fatalf("no session: want ErrInvalidArgument telling to open a session, got %v", err)
	}
	if n := sb.Launches(); n != 0 {
		t.Fatalf("the plugin was launched %d times for a refused stateful call", n)
	}
	_, err = sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", Stateful: true, SessionID: "s1", UserID: "u1"})
	if !errors.Is(err, shared.ErrNotSupported) || !strings.Contains(err.Error(), string(shared.CapStatefulSessions)) {
		t.Fatalf("tier 1: want ErrNotSupported naming %q, got %v", shared.CapStatefulSessions, err)
	}
}
