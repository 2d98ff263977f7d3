package plugin

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin/internal/proto"
)

// waiting is a backend whose Execute and ExecuteStream wait for their
// context to end and report how long that took.
type waiting struct {
	recorder
	took chan time.Duration
}

func (w *waiting) Execute(ctx context.Context, _ shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	start := time.Now()
	<-ctx.Done()
	w.took <- time.Since(start)
	return shared.ExecuteResponse{}, ctx.Err()
}

func (w *waiting) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, _ func(shared.OutputChunk) error) (shared.ExecuteResponse, error) {
	return w.Execute(ctx, req)
}

// TestCancelAfterReachesPlugin: a call made with WithCancelAfter has its
// handler's context ended that long after it arrived, on the plugin's
// side, though the caller's context has no deadline; unary and streaming
// alike.
func TestCancelAfterReachesPlugin(t *testing.T) {
	w := &waiting{took: make(chan time.Duration, 1)}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(ServerOptions()...)
	proto.RegisterSandboxServer(srv, &GRPCServer{Impl: w})
	proto.RegisterStreamingServer(srv, &GRPCStreamServer{Impl: w})
	go srv.Serve(lis)
	defer srv.Stop()
	opts := append(DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	conn, err := grpc.NewClient("passthrough:///plugin", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := NewGRPCClient(conn, nil)

	const after = 200 * time.Millisecond
	ctx := WithCancelAfter(context.Background(), after)
	for name, call := range map[string]func() error{
		"unary": func() error {
			_, err := c.Execute(ctx, shared.ExecuteRequest{Code: "x"})
			return err
		},
		"stream": func() error {
			_, err := c.ExecuteStream(ctx, shared.ExecuteRequest{Code: "x"}, func(shared.OutputChunk) error { return nil })
			return err
		},
	} {
		errc := make(chan error, 1)
		go func() { errc <- call() }()
		select {
		case took := <-w.took:
			// The server starts the clock when the request reaches its
			// transport, a little before the handler runs, so the handler
			// sees slightly less than the whole span; far less means the
			// deadline was not the one given.
			if took < after*9/10 {
				t.Errorf("%s: the plugin's context ended after %s, well before the %s it was given", name, took, after)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the plugin's context did not end", name)
		}
		if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want the plugin's DeadlineExceeded", name, err)
		}
	}
}
