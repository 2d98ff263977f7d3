package plugin

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// cancelAfterKey is the gRPC metadata key of a call's cancel-after: how
// long, in milliseconds from its arrival, the plugin may work on it.
const cancelAfterKey = "orqest-cancel-after-ms"

// cancelAfterCtx marks a host-side context with the cancel-after of the
// plugin calls made with it.
type cancelAfterCtx struct{}

// WithCancelAfter returns ctx for plugin calls that the plugin must end d
// after it received them: a plugin served by Serve (or with ServerOptions)
// has its handler's context cancelled then, while the host's own deadline
// for the call may be later. The host can thus tell a plugin that ended
// the call when told to (it returned) from one that did not, and need not
// trust the plugin's own clock. It is how the host owns the wall clock of
// an execution (host.Sandbox.Execute). d <= 0 leaves ctx as it is.
func WithCancelAfter(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, cancelAfterCtx{}, d)
}

// outgoingCancelAfter adds ctx's cancel-after, if any, to the call's
// metadata.
func outgoingCancelAfter(ctx context.Context) context.Context {
	d, ok := ctx.Value(cancelAfterCtx{}).(time.Duration)
	if !ok {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, cancelAfterKey, strconv.FormatInt(max(d.Milliseconds(), 1), 10))
}

// incomingCancelAfter bounds a served call's context by the cancel-after
// its metadata carries (none: ctx as it is).
func incomingCancelAfter(ctx context.Context) (context.Context, context.CancelFunc) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(cancelAfterKey)
	if len(vals) == 0 {
		return ctx, func() {}
	}
	ms, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil || ms <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}

func cancelAfterUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, cancel := incomingCancelAfter(ctx)
	defer cancel()
	return handler(ctx, req)
}

func cancelAfterStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, cancel := incomingCancelAfter(ss.Context())
	defer cancel()
	return handler(srv, boundStream{ServerStream: ss, ctx: ctx})
}

// boundStream is a server stream whose context is bounded.
type boundStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s boundStream) Context() context.Context { return s.ctx }
