package plugin

import (
	"context"
	"errors"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin/internal/proto"
)

// classes names every error class that crosses the wire, with the gRPC code
// a status carries when it is the error's first class. The name travels in
// the status's ErrorDetail; the code is for gRPC tooling and for errors that
// carry no detail.
var classes = []struct {
	class error
	name  string
	code  codes.Code
}{
	{shared.ErrValidation, "validation", codes.InvalidArgument},
	{shared.ErrInvalidArgument, "invalid_argument", codes.InvalidArgument},
	{shared.ErrNotFound, "not_found", codes.NotFound},
	// After not_found: an error of both classes keeps not_found as its
	// first class (the outcome label of metrics) and codes.NotFound.
	{shared.ErrSessionNotFound, "session_not_found", codes.NotFound},
	{shared.ErrFailedPrecondition, "failed_precondition", codes.FailedPrecondition},
	// After failed_precondition, as session_not_found after not_found.
	{shared.ErrSessionBusy, "session_busy", codes.FailedPrecondition},
	{shared.ErrSessionPaused, "session_paused", codes.FailedPrecondition},
	{shared.ErrPermissionDenied, "permission_denied", codes.PermissionDenied},
	{shared.ErrNotSupported, "not_supported", codes.Unimplemented},
	{shared.ErrUnavailable, "unavailable", codes.Unavailable},
	{shared.ErrNotRun, "not_run", codes.Aborted},
	{shared.ErrPluginShutdown, "plugin_shutdown", codes.Aborted},
	{shared.ErrInternal, "internal", codes.Internal},
	{context.DeadlineExceeded, "deadline_exceeded", codes.DeadlineExceeded},
	{context.Canceled, "canceled", codes.Canceled},
}

// ErrorClasses returns the names of the classes err matches, as they
// travel on the wire ("invalid_argument", "unavailable", ...): for output a
// program reads (the CLI's JSON lines) without matching message text.
func ErrorClasses(err error) []string {
	var names []string
	for _, c := range classes {
		if errors.Is(err, c.class) {
			names = append(names, c.name)
		}
	}
	return names
}

// ClassNamed returns the error class a wire name (as ErrorClasses gives
// it) stands for, nil for a name it does not know: a client reading the
// classes a server reported matches them with errors.Is.
func ClassNamed(name string) error {
	for _, c := range classes {
		if c.name == name {
			return c.class
		}
	}
	return nil
}

// ToGRPC converts err into a gRPC status error whose ErrorDetail names every
// class err matches (and, for a *shared.ValidationError, its findings). The
// server adapters use it; plugin authors need not call it.
func ToGRPC(err error) error {
	if err == nil {
		return nil
	}
	detail := &proto.ErrorDetail{Classes: ErrorClasses(err)}
	code := codes.Unknown
	for _, c := range classes {
		if errors.Is(err, c.class) {
			code = c.code
			break
		}
	}
	if _, ok := status.FromError(err); ok && len(detail.Classes) == 0 {
		return err // a status from a call this backend made itself
	}
	var ve *shared.ValidationError
	if errors.As(err, &ve) {
		detail.Findings = findingsToProto(ve.Findings)
	}
	var fe *shared.FieldError
	if errors.As(err, &fe) {
		detail.Field, detail.Reason = fe.Field, fe.Reason
	}
	st := status.New(code, err.Error())
	if ds, derr := st.WithDetails(detail); derr == nil {
		st = ds
	}
	return st.Err()
}

// FromGRPC converts a status error from a plugin back into an error that
// matches the classes its ErrorDetail names, with the plugin's message. A
// status without a detail did not come from a plugin's adapter but from
// the transport: the plugin's connection failed, which is ErrPluginShutdown.
func FromGRPC(err error) error {
	return fromGRPC(err, false)
}

// fromGRPC is FromGRPC for a call whose request never reached a transport
// when notSent is true: a transport failure then also matches ErrNotRun.
func fromGRPC(err error, notSent bool) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	for _, d := range st.Details() {
		detail, ok := d.(*proto.ErrorDetail)
		if !ok {
			continue
		}
		out := &classedError{msg: msg}
		for _, name := range detail.GetClasses() {
			for _, c := range classes {
				if c.name == name {
					out.classes = append(out.classes, c.class)
				}
			}
		}
		for _, c := range out.classes {
			if c == shared.ErrValidation {
				out.classes = append(out.classes, &shared.ValidationError{Findings: findingsFromProto(detail.GetFindings())})
				break
			}
		}
		if f := detail.GetField(); f != "" {
			out.classes = append(out.classes, &shared.FieldError{Field: f, Reason: detail.GetReason()})
		}
		if len(out.classes) == 0 {
			out.classes = []error{shared.ErrInternal}
		}
		return out
	}
	switch st.Code() {
	case codes.Unimplemented:
		// gRPC's own answer for a service or method the plugin does not
		// serve: an optional feature that is absent.
		return &classedError{msg: msg, classes: []error{shared.ErrNotSupported}}
	case codes.DeadlineExceeded:
		return &classedError{msg: msg, classes: []error{context.DeadlineExceeded}}
	case codes.Canceled:
		return &classedError{msg: msg, classes: []error{context.Canceled}}
	case codes.Unavailable, codes.Aborted, codes.Internal, codes.Unknown:
		// The transport's own failure: the connection to the plugin broke.
		out := &classedError{msg: msg, classes: []error{shared.ErrPluginShutdown}}
		if notSent {
			out.classes = append(out.classes, shared.ErrNotRun)
		}
		return out
	}
	return &classedError{msg: msg, classes: []error{shared.ErrInternal}}
}

// classedError is an error from a plugin: its message, matching each class.
type classedError struct {
	msg     string
	classes []error
}

func (e *classedError) Error() string   { return e.msg }
func (e *classedError) Unwrap() []error { return e.classes }

// sentKey marks a call's context for the delivery tracker.
type sentKey struct{}

// sendState is what the delivery tracker learns of one call.
type sendState struct {
	tracked atomic.Bool // the tracker saw the call begin
	sent    atomic.Bool // its headers went out on a live transport
}

// delivery is a stats.Handler that records whether a call's request went
// out on a live connection (its headers were written to a transport). A call
// that failed before that never reached the plugin: it can be sent again.
type delivery struct{}

func (delivery) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	if st, ok := ctx.Value(sentKey{}).(*sendState); ok {
		st.tracked.Store(true)
	}
	return ctx
}

func (delivery) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutHeader); ok {
		if st, ok := ctx.Value(sentKey{}).(*sendState); ok {
			st.sent.Store(true)
		}
	}
}

func (delivery) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (delivery) HandleConn(context.Context, stats.ConnStats)                       {}

// DialOptions returns the gRPC dial options a host passes to go-plugin
// (ClientConfig.GRPCDialOptions) so that a call whose request never left
// the host fails with an error matching shared.ErrNotRun. Without them no
// failure is ever taken for one that was not sent. They also propagate the
// caller's trace context to the plugin (W3C trace context in the gRPC
// metadata) and make a client span per call with the tracer provider of
// WithDialTracerProvider (otel's global one by default).
func DialOptions(opts ...DialOption) []grpc.DialOption {
	var c dialConfig
	for _, o := range opts {
		o(&c)
	}
	return []grpc.DialOption{grpc.WithStatsHandler(delivery{}), grpc.WithStatsHandler(clientTraceHandler(c))}
}

// tracked returns ctx marked for the delivery tracker and a function that
// converts the call's error, knowing whether the request went out.
func tracked(ctx context.Context) (context.Context, func(error) error) {
	st := new(sendState)
	return context.WithValue(ctx, sentKey{}, st), func(err error) error {
		return fromGRPC(err, st.tracked.Load() && !st.sent.Load())
	}
}
