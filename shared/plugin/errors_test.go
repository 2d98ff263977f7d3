package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/orqest/sandbox/shared"
)

func TestErrorClassesSurviveGRPC(t *testing.T) {
	for _, class := range []error{
		shared.ErrInvalidArgument, shared.ErrNotFound, shared.ErrFailedPrecondition, shared.ErrPermissionDenied,
		shared.ErrNotSupported, shared.ErrUnavailable, shared.ErrPluginShutdown, shared.ErrNotRun,
		shared.ErrInternal, context.DeadlineExceeded, context.Canceled,
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

// The class travels as a status detail, not in the text: a backend's
// ErrUnavailable whose message never says "unavailable" stays that class,
// and a message that says it does not make another class one.
func TestClassIsNotReadFromTheMessage(t *testing.T) {
	err := FromGRPC(ToGRPC(fmt.Errorf("the docker engine is down: %w", &onlyClass{shared.ErrUnavailable})))
	if !errors.Is(err, shared.ErrUnavailable) || errors.Is(err, shared.ErrPluginShutdown) {
		t.Fatalf("want ErrUnavailable only, got %v", err)
	}
	err = FromGRPC(ToGRPC(fmt.Errorf("service unavailable, request not run: %w", shared.ErrInternal)))
	if errors.Is(err, shared.ErrUnavailable) || errors.Is(err, shared.ErrNotRun) || !errors.Is(err, shared.ErrInternal) {
		t.Fatalf("want ErrInternal only, got %v", err)
	}
}

// onlyClass hides the class's own text from the message.
type onlyClass struct{ class error }

func (o *onlyClass) Error() string { return "x" }
func (o *onlyClass) Unwrap() error { return o.class }

func TestSeveralClassesSurviveGRPC(t *testing.T) {
	err := FromGRPC(ToGRPC(fmt.Errorf("restarting: %w: %w", shared.ErrNotRun, shared.ErrPluginShutdown)))
	if !errors.Is(err, shared.ErrNotRun) || !errors.Is(err, shared.ErrPluginShutdown) {
		t.Fatalf("want ErrNotRun and ErrPluginShutdown, got %v", err)
	}
}

func TestValidationFindingsSurviveGRPC(t *testing.T) {
	in := shared.ValidateResponse{Findings: []shared.Finding{{Rule: "forbidden-builtin", Message: "m", Line: 2, Column: 3, Snippet: "eval"}}}.Err()
	back := FromGRPC(ToGRPC(fmt.Errorf("execute: %w", in)))
	var ve *shared.ValidationError
	if !errors.Is(back, shared.ErrValidation) || !errors.As(back, &ve) {
		t.Fatalf("want a *ValidationError, got %v", back)
	}
	if len(ve.Findings) != 1 || ve.Findings[0].Rule != "forbidden-builtin" || ve.Findings[0].Line != 2 {
		t.Fatalf("findings: %+v", ve.Findings)
	}
}

func TestTransportUnavailableIsPluginShutdown(t *testing.T) {
	err := FromGRPC(status.Error(codes.Unavailable, "connection error: desc = transport is closing"))
	if !errors.Is(err, shared.ErrPluginShutdown) {
		t.Fatalf("want ErrPluginShutdown, got %v", err)
	}
	if errors.Is(err, shared.ErrNotRun) {
		t.Fatal("a transport failure of a call that may have been sent must not be ErrNotRun")
	}
}

func TestUnclassedErrorBecomesUnknownThenInternal(t *testing.T) {
	st, _ := status.FromError(ToGRPC(errors.New("boom")))
	if st.Code() != codes.Unknown {
		t.Fatalf("code %v", st.Code())
	}
	if !errors.Is(FromGRPC(ToGRPC(errors.New("boom"))), shared.ErrInternal) {
		t.Fatal("unknown should map to ErrInternal on the host")
	}
}

// A call on a connection whose plugin is gone never leaves the host: with
// DialOptions it fails as ErrNotRun (safe to send again).
func TestCallOnDeadPluginIsNotRun(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "gone.sock")
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}
	opts := append(DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
	conn, err := grpc.NewClient("passthrough:///plugin", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := NewGRPCClient(conn, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Validate(ctx, shared.ValidateRequest{Code: "return 1"})
	if !errors.Is(err, shared.ErrNotRun) || !errors.Is(err, shared.ErrPluginShutdown) {
		t.Fatalf("want ErrNotRun and ErrPluginShutdown, got %v", err)
	}

	// Without the tracker nothing is ever taken for unsent.
	plain, err := grpc.NewClient("passthrough:///plugin", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, err = NewGRPCClient(plain, nil).Validate(ctx, shared.ValidateRequest{Code: "return 1"})
	if !errors.Is(err, shared.ErrPluginShutdown) || errors.Is(err, shared.ErrNotRun) {
		t.Fatalf("untracked: want ErrPluginShutdown only, got %v", err)
	}

	// A client whose plugin-exit context is done refuses before sending.
	exited, stop := context.WithCancel(context.Background())
	stop()
	_, err = NewGRPCClient(plain, exited).Validate(ctx, shared.ValidateRequest{Code: "return 1"})
	if !errors.Is(err, shared.ErrNotRun) {
		t.Fatalf("exited: want ErrNotRun, got %v", err)
	}
}

// A FieldError keeps its field across the wire, so the host can point at
// the config attribute or request field at fault.
func TestFieldErrorSurvivesGRPC(t *testing.T) {
	in := fmt.Errorf("docker config: %w", &shared.FieldError{Field: "promotion.threshold", Reason: "want 1 to 1000000"})
	back := FromGRPC(ToGRPC(in))
	var fe *shared.FieldError
	if !errors.Is(back, shared.ErrInvalidArgument) || !errors.As(back, &fe) || fe.Field != "promotion.threshold" || fe.Reason != "want 1 to 1000000" {
		t.Fatalf("want the FieldError back, got %v (%+v)", back, fe)
	}
}

// An error that wraps its cause as well as its class (fmt.Errorf("...: %w:
// %w", err, shared.ErrUnavailable)) can match two classes when the cause is
// a context error. The class the backend named decides the gRPC code and
// comes first in ErrorClasses, on both sides of the wire, whichever order the
// two were wrapped in; the cause's class travels too, and in the plugin the
// cause itself stays checkable.
func TestNamedClassWinsOverAWrappedCause(t *testing.T) {
	pathErr := &fs.PathError{Op: "open", Path: "/nowhere", Err: syscall.ENOENT}
	for _, c := range []struct {
		err   error
		cause error // what errors.Is still finds in the plugin
		class error
		code  codes.Code
		names []string
	}{
		{fmt.Errorf("execute: start python3: %w: %w", context.DeadlineExceeded, shared.ErrUnavailable),
			context.DeadlineExceeded, shared.ErrUnavailable, codes.Unavailable, []string{"unavailable", "deadline_exceeded"}},
		{fmt.Errorf("execute: %w: %w", shared.ErrUnavailable, context.DeadlineExceeded),
			context.DeadlineExceeded, shared.ErrUnavailable, codes.Unavailable, []string{"unavailable", "deadline_exceeded"}},
		{fmt.Errorf("fork-server: core: %w: %w", context.Canceled, shared.ErrInternal),
			context.Canceled, shared.ErrInternal, codes.Internal, []string{"internal", "canceled"}},
		{fmt.Errorf("python not found: %w: %w", pathErr, shared.ErrUnavailable),
			fs.ErrNotExist, shared.ErrUnavailable, codes.Unavailable, []string{"unavailable"}},
	} {
		if !errors.Is(c.err, c.cause) || !errors.Is(c.err, c.class) {
			t.Errorf("%v: the cause or the class is lost before the wire", c.err)
		}
		if got := ErrorClasses(c.err); !slices.Equal(got, c.names) {
			t.Errorf("%v: classes %v, want %v", c.err, got, c.names)
		}
		st, _ := status.FromError(ToGRPC(c.err))
		if st.Code() != c.code {
			t.Errorf("%v: gRPC code %v, want %v", c.err, st.Code(), c.code)
		}
		back := FromGRPC(ToGRPC(c.err))
		if got := ErrorClasses(back); !slices.Equal(got, c.names) {
			t.Errorf("%v: classes after the wire %v, want %v", c.err, got, c.names)
		}
		if !errors.Is(back, c.class) || back.Error() != c.err.Error() {
			t.Errorf("%v: round trip gave %v", c.err, back)
		}
	}
}

// A backend's unknown session crosses the wire as both session_not_found
// and not_found: a host tells it from a missing file without reading the
// message, and a host that knows only ErrNotFound still sees that.
func TestSessionNotFoundSurvivesGRPC(t *testing.T) {
	back := FromGRPC(ToGRPC(fmt.Errorf("no open session %q: %w", "s-1", shared.ErrSessionNotFound)))
	if !errors.Is(back, shared.ErrSessionNotFound) || !errors.Is(back, shared.ErrNotFound) {
		t.Fatalf("want ErrSessionNotFound and ErrNotFound, got %v", back)
	}
	if st, _ := status.FromError(ToGRPC(shared.ErrSessionNotFound)); st.Code() != codes.NotFound {
		t.Errorf("code %v, want NotFound", st.Code())
	}
	if cls := ErrorClasses(back); len(cls) != 2 || cls[0] != "not_found" || cls[1] != "session_not_found" {
		t.Errorf("classes %v, want [not_found session_not_found]", cls)
	}
	file := FromGRPC(ToGRPC(fmt.Errorf("get_file nothere.txt: %w", shared.ErrNotFound)))
	if !errors.Is(file, shared.ErrNotFound) || errors.Is(file, shared.ErrSessionNotFound) {
		t.Fatalf("a missing file: want ErrNotFound only, got %v", file)
	}
}
