package gvisor

import (
	"context"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// BenchmarkRunawayFirstCall: b.N times, a session is opened and its first
// call, sent at once (the runtime may still be starting its zygote), is a
// runaway with a 1 s wall clock. Reported, as medians: the open (open-ms),
// how long past its timeout the runaway returned (after-timeout-ms: the
// wait for the zygote counts against the call's clock) and the call after
// it (next-ms).
func BenchmarkRunawayFirstCall(b *testing.B) {
	be, _ := newSessionBackend(b, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const wall = time.Second
	var opens, afters, nexts []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		open, err := be.Open(ctx, shared.OpenRequest{UserID: "bench"})
		if err != nil {
			b.Fatalf("Open: %v", err)
		}
		opens = append(opens, time.Since(t0))
		t0 = time.Now()
		resp, err := be.Execute(ctx, shared.ExecuteRequest{SessionID: open.SessionID, Code: "while True:\n    pass", Timeout: wall})
		if err != nil || resp.Result.ErrorKind != shared.KindTimeout {
			b.Fatalf("runaway first call: %+v %v", resp.Result, err)
		}
		afters = append(afters, time.Since(t0)-wall)
		t0 = time.Now()
		resp, err = be.Execute(ctx, shared.ExecuteRequest{SessionID: open.SessionID, Code: "return 6 * 7", Timeout: 30 * time.Second})
		if err != nil || string(resp.Result.Output) != "42" {
			b.Fatalf("the call after the runaway: %+v %v", resp.Result, err)
		}
		nexts = append(nexts, time.Since(t0))
		if _, err := be.Close(ctx, shared.CloseRequest{SessionID: open.SessionID}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(medianMS(opens), "open-ms")
	b.ReportMetric(medianMS(afters), "after-timeout-ms")
	b.ReportMetric(medianMS(nexts), "next-ms")
}
