package plugin

import (
	"context"
	"encoding/json"
	"net"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin/internal/proto"
)

// spanning is a backend whose Execute starts a span of its own from the
// context the gRPC server hands it.
type spanning struct {
	recorder
	tracer oteltrace.Tracer
}

func (s *spanning) Execute(ctx context.Context, _ shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	_, sp := s.tracer.Start(ctx, "backend.execute")
	sp.End()
	return shared.ExecuteResponse{Result: shared.ExecutionResult{Success: true, Output: json.RawMessage("1")}}, nil
}

// TestTraceContextReachesPlugin: a span the backend starts inside Execute
// belongs to the caller's trace, its parent the client span of the call,
// itself a child of the caller's span. The context travels in the gRPC
// metadata (the server's context is not the client's).
func TestTraceContextReachesPlugin(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := trace.NewTracerProvider(trace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(ServerOptions()...)
	proto.RegisterSandboxServer(srv, &GRPCServer{Impl: &spanning{tracer: tp.Tracer("backend")}})
	go srv.Serve(lis)
	defer srv.Stop()
	opts := append(DialOptions(WithDialTracerProvider(tp)),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	conn, err := grpc.NewClient("passthrough:///plugin", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, host := tp.Tracer("host").Start(context.Background(), "host.execute")
	if _, err := NewGRPCClient(conn, nil).Execute(ctx, shared.ExecuteRequest{Code: "return 1"}); err != nil {
		t.Fatal(err)
	}
	host.End()

	spans := map[string]trace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	hs, be := spans["host.execute"], spans["backend.execute"]
	if hs == nil || be == nil {
		t.Fatalf("spans %v", keys(spans))
	}
	if be.SpanContext().TraceID() != hs.SpanContext().TraceID() {
		t.Fatalf("backend span in trace %s, host span in %s", be.SpanContext().TraceID(), hs.SpanContext().TraceID())
	}
	// backend.execute -> client span of the call -> host.execute
	var client trace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() == be.Parent().SpanID() {
			client = s
		}
	}
	if client == nil || client.SpanKind() != oteltrace.SpanKindClient || client.Parent().SpanID() != hs.SpanContext().SpanID() {
		t.Fatalf("backend span's parent %v is not the client span under the host span (spans %v)", be.Parent().SpanID(), keys(spans))
	}
}

func keys(m map[string]trace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
