package inprocess

import (
	"context"
	"sort"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

const benchCode = "return args.get('x', 0) + 1"

// benchLoop runs Execute b.N times and reports the p50 and p99 latency.
func benchLoop(b *testing.B, exec func(context.Context, shared.ExecuteRequest) (shared.ExecutionResult, error)) {
	ctx := context.Background()
	req := shared.ExecuteRequest{Code: benchCode, Args: []byte(`{"x": 41}`), Timeout: 5 * time.Second}
	for i := 0; i < 20; i++ { // warm up
		if _, err := exec(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := exec(ctx, req)
		lat = append(lat, time.Since(start))
		if err != nil || !res.Success || string(res.Output) != "42" {
			b.Fatalf("%+v %v", res, err)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkExecute: one execution on the embedded interpreter, called
// directly (Go validator + runner's checker, compile, exec, JSON).
func BenchmarkExecute(b *testing.B) {
	be := newConfigured(b, "")
	benchLoop(b, func(ctx context.Context, req shared.ExecuteRequest) (shared.ExecutionResult, error) {
		resp, err := be.Execute(ctx, req)
		return resp.Result, err
	})
}

// BenchmarkExecuteGRPC: the same through go-plugin's gRPC adapters.
func BenchmarkExecuteGRPC(b *testing.B) {
	be := newConfigured(b, "")
	client, server := goplugin.TestPluginGRPCConn(b, false, map[string]goplugin.Plugin{
		plugin.PluginName: &plugin.SandboxPlugin{Impl: be},
	})
	defer server.Stop()
	defer client.Close()
	raw, err := client.Dispense(plugin.PluginName)
	if err != nil {
		b.Fatal(err)
	}
	sb := raw.(shared.Sandbox)
	benchLoop(b, func(ctx context.Context, req shared.ExecuteRequest) (shared.ExecutionResult, error) {
		resp, err := sb.Execute(ctx, req)
		return resp.Result, err
	})
}

// BenchmarkExecuteHost: the whole path a host app sees: host policy and
// validator, go-plugin over a unix socket with mTLS, the plugin process.
func BenchmarkExecuteHost(b *testing.B) {
	_, sb, _ := loadHost(b, "  unsafe = true\n")
	if err := sb.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	benchLoop(b, sb.Execute)
}

// BenchmarkTimeoutOvershoot: how long after its deadline a busy loop's call
// returns (the watchdog's interrupt plus the runner's traceback).
func BenchmarkTimeoutOvershoot(b *testing.B) {
	be := newConfigured(b, "")
	const timeout = 20 * time.Millisecond
	over := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		resp, err := be.Execute(context.Background(), shared.ExecuteRequest{Code: "while True:\n    pass", Timeout: timeout})
		over = append(over, time.Since(start)-timeout)
		if err != nil || resp.Result.ErrorKind != shared.KindTimeout {
			b.Fatalf("%+v %v", resp.Result, err)
		}
	}
	sort.Slice(over, func(i, j int) bool { return over[i] < over[j] })
	b.ReportMetric(float64(over[len(over)/2].Microseconds())/1000, "p50-over-ms")
	b.ReportMetric(float64(over[len(over)*99/100].Microseconds())/1000, "p99-over-ms")
}
