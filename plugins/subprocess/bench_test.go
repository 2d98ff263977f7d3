package subprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// Speed is measured here (go test -bench), never by timed unit tests. The
// whole-system numbers (host -> plugin -> child, p50/p99, throughput) come
// from `orqest-sandbox bench`.

func benchBackend(b *testing.B, mode string) *Backend {
	b.Helper()
	if _, err := os.Stat(DefaultPython); err != nil {
		b.Skip(err)
	}
	be := NewBackend(nil)
	b.Cleanup(be.Shutdown)
	if _, err := be.Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(`{"mode":"` + mode + `"}`)}); err != nil {
		b.Fatal(err)
	}
	return be
}

func benchExecute(b *testing.B, mode string, callers int) {
	be := benchBackend(b, mode)
	ctx := context.Background()
	req := shared.ExecuteRequest{Code: "return 1+1"}
	lat := make(chan time.Duration, 1<<16)
	b.SetParallelism(callers) // GOMAXPROCS * callers goroutines; see below
	b.ResetTimer()
	start := time.Now()
	if callers <= 1 {
		for b.Loop() {
			t0 := time.Now()
			resp, err := be.Execute(ctx, req)
			if err != nil || !resp.Result.Success {
				b.Fatalf("%v %+v", err, resp.Result)
			}
			select {
			case lat <- time.Since(t0):
			default:
			}
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				t0 := time.Now()
				resp, err := be.Execute(ctx, req)
				if err != nil || !resp.Result.Success {
					b.Errorf("%v %+v", err, resp.Result)
					return
				}
				select {
				case lat <- time.Since(t0):
				default:
				}
			}
		})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	close(lat)
	var ds []time.Duration
	for d := range lat {
		ds = append(ds, d)
	}
	if len(ds) > 0 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(len(ds))/elapsed.Seconds(), "exec/s")
	}
}

// BenchmarkExecuteForkServer: one caller, fork-server mode, every sealing
// layer the kernel offers, in-process (no gRPC).
func BenchmarkExecuteForkServer(b *testing.B) { benchExecute(b, ModeForkServer, 1) }

// BenchmarkExecuteForkServerParallel: GOMAXPROCS concurrent callers.
func BenchmarkExecuteForkServerParallel(b *testing.B) { benchExecute(b, ModeForkServer, 2) }

// BenchmarkExecuteSpawn: one caller, a fresh sealed interpreter per call.
func BenchmarkExecuteSpawn(b *testing.B) { benchExecute(b, ModeSpawn, 1) }

// BenchmarkPythonForkFloor is the raw floor under the fork-server: the same
// interpreter forking a child that exits at once, and waiting for it (no
// pipes, no sealing, no JSON, no Go). Reported per fork.
func BenchmarkPythonForkFloor(b *testing.B) {
	if _, err := os.Stat(DefaultPython); err != nil {
		b.Skip(err)
	}
	n := b.N
	script := fmt.Sprintf(`import os, time
t = time.perf_counter()
for _ in range(%d):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print(time.perf_counter() - t)`, n)
	out, err := exec.Command(DefaultPython, "-I", "-S", "-B", "-c", script).Output()
	if err != nil {
		b.Fatal(err)
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(secs/float64(n)*1e9, "ns/fork")
	b.ReportMetric(0, "ns/op")
}
