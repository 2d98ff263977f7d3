package kubernetes

import (
	"context"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// The kubernetes rows of `make bench` (the tier-2 rows are the docker
// package's benchmarks of the same names, run in the same invocation:
// `go test -bench . ./plugins/docker/ ./plugins/kubernetes/`).

// BenchmarkOpenClose measures a cold session open: claim check, pod
// create, scheduled, started, attached, MCP initialize; Close (pod
// deleted and gone) is reported separately as close-ms/op.
func BenchmarkOpenClose(b *testing.B) {
	cs := requireCluster(b)
	user := testUser(b, cs)
	be := newBackend(b, nil)
	ctx := context.Background()
	var closeTotal time.Duration
	for i := 0; i < b.N; i++ {
		sid := "bench-" + randomHex(4)
		if _, err := be.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		t0 := time.Now()
		if _, err := be.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		closeTotal += time.Since(t0)
		b.StartTimer()
	}
	b.ReportMetric(float64(closeTotal.Milliseconds())/float64(b.N), "close-ms/op")
}

// BenchmarkOpenFromPool measures Open when the user's warm pod waits:
// hello line and MCP initialize over the existing attach stream.
func BenchmarkOpenFromPool(b *testing.B) {
	cs := requireCluster(b)
	user := testUser(b, cs)
	be := newBackend(b, map[string]any{"pool": map[string]any{"size": 1}})
	ctx := context.Background()
	first := openSession(b, be, user)
	if _, err := be.Close(ctx, shared.CloseRequest{SessionID: first}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		deadline := time.Now().Add(90 * time.Second)
		for be.Warming() == 0 {
			if time.Now().After(deadline) {
				b.Fatal("no warm pod within 90s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		sid := "bench-" + randomHex(4)
		b.StartTimer()
		if _, err := be.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := be.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkExecuteWarm measures one call in an open session: MCP over the
// attach stream (plugin -> API server -> kubelet -> runtime) and the
// runtime's warm fork-server.
func BenchmarkExecuteWarm(b *testing.B) {
	cs := requireCluster(b)
	user := testUser(b, cs)
	be := newBackend(b, nil)
	sid := openSession(b, be, user)
	ctx := context.Background()
	req := shared.ExecuteRequest{Code: "return 1+1", SessionID: sid}
	if _, err := be.Execute(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := be.Execute(ctx, req)
		if err != nil || !resp.Result.Success {
			b.Fatalf("%v %+v", err, resp.Result)
		}
	}
}
