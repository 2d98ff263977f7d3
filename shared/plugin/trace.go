package plugin

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// Propagator returns how trace context travels between host and plugin:
// W3C trace context and baggage in the gRPC metadata. It is fixed rather
// than otel's global propagator (a no-op unless a program sets one), so a
// plugin sees the host's trace whatever either program configured globally.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// DialOption adjusts DialOptions.
type DialOption func(*dialConfig)

type dialConfig struct {
	tp trace.TracerProvider
}

// WithDialTracerProvider sets the tracer provider of the client span each
// plugin call makes (nil: otel's global provider).
func WithDialTracerProvider(tp trace.TracerProvider) DialOption {
	return func(c *dialConfig) { c.tp = tp }
}

func clientTraceHandler(c dialConfig) stats.Handler {
	opts := []otelgrpc.Option{otelgrpc.WithPropagators(Propagator())}
	if c.tp != nil {
		opts = append(opts, otelgrpc.WithTracerProvider(c.tp))
	}
	return otelgrpc.NewClientHandler(opts...)
}

// ServerOptions returns the gRPC server options of a plugin: a server span
// per call (otel's global tracer provider, a no-op unless the plugin's main
// installs one) whose parent is the host's span, taken from the call's
// metadata, and the host's cancel-after (WithCancelAfter) applied to the
// call's context. A backend's Execute receives that context, so spans it
// starts belong to the host's trace. Serve uses them; a test serving a
// backend on its own gRPC server passes them to grpc.NewServer.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithPropagators(Propagator()))),
		grpc.ChainUnaryInterceptor(cancelAfterUnary),
		grpc.ChainStreamInterceptor(cancelAfterStream),
	}
}

// grpcServer is go-plugin's GRPCServer factory with ServerOptions added.
func grpcServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts, ServerOptions()...)...)
}
