package pyproc_test

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// BenchmarkForkServerRun measures ForkServer.Run alone (no plugin, no
// host): the bench body of `orqest-sandbox bench`, every layer the probe
// finds in force, one caller.
func BenchmarkForkServerRun(b *testing.B) {
	if _, err := os.Stat(python); err != nil {
		b.Skip(err)
	}
	ctx := context.Background()
	rules := json.RawMessage(validator.RulesJSON())
	s, err := pyproc.Probe(ctx, runner.Argv(python), nil, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	fs, err := pyproc.StartForkServer(runner.ForkServerArgv(python), runner.ForkServerConfig{Seal: s.Seal(nil), Rules: rules, Pool: 4}, pyproc.ForkServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer fs.Close()
	job := pyproc.Job{Request: runner.Request{Code: "return sum(x * x for x in args['xs'])", Args: json.RawMessage(`{"xs":[1,2,3]}`), Rules: rules},
		Limits: shared.Resolved{Timeout: 5 * time.Second, MemoryMB: 128, MaxOutputBytes: 1 << 20}}
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := fs.Run(ctx, job)
		if err != nil || !res.Success {
			b.Fatal(err, res)
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
