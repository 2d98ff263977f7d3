package loadtest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := Percentile(ds, 50); got != 50 {
		t.Fatalf("p50 = %v", got)
	}
	if got := Percentile(ds, 99); got != 99 {
		t.Fatalf("p99 = %v", got)
	}
	if Percentile(nil, 50) != 0 {
		t.Fatal("empty must be 0")
	}
}

func TestRunCountsCallsAndErrors(t *testing.T) {
	var calls, inflight, maxInflight atomic.Int64
	r := Run(context.Background(), "x", 40, 4, func(context.Context) error {
		n := calls.Add(1)
		cur := inflight.Add(1)
		for {
			m := maxInflight.Load()
			if cur <= m || maxInflight.CompareAndSwap(m, cur) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		inflight.Add(-1)
		if n%10 == 0 {
			return errors.New("tenth")
		}
		return nil
	})
	if calls.Load() != 40 || r.N != 40 || r.Errors != 4 || r.FirstError != "tenth" {
		t.Fatalf("calls=%d result=%+v", calls.Load(), r)
	}
	if maxInflight.Load() > 4 {
		t.Fatalf("concurrency exceeded: %d", maxInflight.Load())
	}
	if r.ThroughputPerS <= 0 || r.P50MS < 1 {
		t.Fatalf("bad summary %+v", r)
	}
}

func TestNaiveBaselineRunsRealPython(t *testing.T) {
	call := NaiveBaseline("/usr/bin/python3", "return args['a'] + 1", map[string]any{"a": 41}, "42")
	if err := call(context.Background()); err != nil {
		t.Fatal(err)
	}
	bad := NaiveBaseline("/usr/bin/python3", "return 1", nil, "2")
	if err := bad(context.Background()); err == nil || !strings.Contains(err.Error(), "want 2") {
		t.Fatalf("mismatch not reported: %v", err)
	}
}

func TestTableShowsRatio(t *testing.T) {
	out := Table([]Result{{Name: "naive", P50MS: 40}, {Name: "tier1", P50MS: 20}, {Name: "floor", P50MS: 0.5}}, "naive", "floor")
	if !strings.Contains(out, "2.00x") || !strings.Contains(out, "40.0x") {
		t.Fatalf("ratio missing:\n%s", out)
	}
}

func TestForkFloorRealPython(t *testing.T) {
	r, err := ForkFloor(context.Background(), "/usr/bin/python3", 20)
	if err != nil {
		t.Fatal(err)
	}
	if r.N != 20 || r.P50MS <= 0 || r.P99MS < r.P50MS || r.ThroughputPerS <= 0 {
		t.Fatalf("implausible floor %+v", r)
	}
}

func TestMachineBusyCountsCPU(t *testing.T) {
	b0, ok := MachineBusy()
	if !ok {
		t.Skip("SKIP: no /proc/stat here: cpu_ms_per_call stays unknown")
	}
	// Burn 200 ms of CPU on this goroutine: the machine's busy time must
	// grow by at least most of it (USER_HZ ticks are 10 ms).
	deadline := time.Now().Add(200 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	b1, _ := MachineBusy()
	if d := b1 - b0; d < 120*time.Millisecond {
		t.Fatalf("busy grew by %v after 200 ms of spinning (x=%d)", d, x)
	}
}

func TestRunReportsCPUPerCall(t *testing.T) {
	if _, ok := MachineBusy(); !ok {
		t.Skip("SKIP: no /proc/stat here")
	}
	r := Run(context.Background(), "spin", 10, 1, func(context.Context) error {
		deadline := time.Now().Add(20 * time.Millisecond)
		for time.Now().Before(deadline) {
		}
		return nil
	})
	if r.CPUMSPerCall < 10 {
		t.Fatalf("cpu per call %.2f ms for calls that each spin 20 ms", r.CPUMSPerCall)
	}
}
