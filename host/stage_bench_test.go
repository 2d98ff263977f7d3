package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/loadtest"
	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// stageBudgetPython is the interpreter of the benchmark's own fork server
// and fork floor: the subprocess plugin's default.
const stageBudgetPython = "/usr/bin/python3"

// BenchmarkStageBudget measures the tier-1 call path stage by stage, all
// in one run, the stages taking turns in blocks of calls (each round in
// another order) so that load drifting over the run reaches every stage
// alike:
//
//   - host: the host's own work before the plugin call (policy, the
//     static check and its verdict), called in process;
//   - noop: a whole call through the host to a plugin that answers
//     Execute at once (host/testdata/noopplugin): the host and the
//     go-plugin gRPC round trip with nothing behind them;
//   - runner: internal/pyproc's ForkServer.Run in this process (no host,
//     no gRPC, no plugin): a pre-forked child takes the request, checks,
//     runs and answers, and is killed;
//   - tier1: a whole call through the host to the subprocess plugin's fork
//     server; its result's duration_ms is the plugin's own time (plugin).
//
// and the Python fork+exit+wait floor before and after. Each stage
// reports its p50 over all its calls and the machine's busy CPU per call
// over its blocks (every process: host, plugin, zygote, children,
// kernel, and whatever else runs); the derived ones are grpc (noop -
// host), plugin_extra (tier1's duration_ms - runner: the plugin's own work
// around the runner) and outside (tier1 - duration_ms, call by call: the
// host and the round trip of a real call). "trivial" is the `make bench` body; "1.3KB-new" a body no one
// has seen on every call (its host check is a miss, its child parses,
// checks and compiles it).
func BenchmarkStageBudget(b *testing.B) {
	if pluginDir == "" {
		b.Skip(pluginSkipMsg)
	}
	if _, err := os.Stat(stageBudgetPython); err != nil {
		b.Skipf("no %s: %v", stageBudgetPython, err)
	}
	ctx := context.Background()
	noopDir := buildTestPlugin(b, "noop", "noopplugin")
	var core []byte
	if fc := os.Getenv("ORQEST_FORKCORE"); fc != "" {
		var err error
		if core, err = os.ReadFile(fc); err != nil {
			b.Fatal(err)
		}
	}
	const src = `
policy "p" {
  timeout          = "5s"
  memory_mb        = 128
  max_output_bytes = 1048576
}
sandbox "tier1" {
  plugin = "subprocess"
  policy = "p"
  config { mode = "forkserver" }
}
sandbox "noop" {
  plugin = "noop"
  policy = "p"
}
`
	cfg, diags := ParseConfig(filepath.Join(b.TempDir(), "config.hcl"), []byte(src))
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	opts := []Option{WithPluginDirs(pluginDir, noopDir), WithLogger(hclog.NewNullLogger())}
	if fc := os.Getenv("ORQEST_FORKCORE"); fc != "" {
		opts = append(opts, WithPluginEnv("ORQEST_FORKCORE="+fc))
	}
	h, err := Load(ctx, cfg, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	tier1, err := h.Sandbox(ctx, "tier1")
	if err != nil {
		b.Fatal(err)
	}
	noop, err := h.Sandbox(ctx, "noop")
	if err != nil {
		b.Fatal(err)
	}

	rules := json.RawMessage(validator.RulesJSON())
	seal, err := pyproc.Probe(ctx, runner.Argv(stageBudgetPython), nil, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	fs, err := pyproc.StartForkServer(runner.ForkServerArgv(stageBudgetPython),
		runner.ForkServerConfig{Seal: seal.Seal(nil), Rules: rules}, pyproc.ForkServerOptions{Core: core})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fs.Close() })
	limits := shared.Resolved{Timeout: 5 * time.Second, MemoryMB: 128, MaxOutputBytes: 1 << 20}

	const rounds, blockSize = 5, 60
	for _, body := range []struct {
		name string
		code string
		new  bool
	}{
		{"trivial", "return sum(x * x for x in args['xs'])", false},
		{"1.3KB", validateOnceBody, false},
		{"1.3KB-new", validateOnceBody, true},
	} {
		b.Run(body.name, func(b *testing.B) {
			n := 0
			code := func() string {
				if !body.new {
					return body.code
				}
				n++ // a body neither the host's checker nor any zygote has seen
				return fmt.Sprintf("%s\n# %s call %d\n", body.code, b.Name(), n)
			}
			req := func() shared.ExecuteRequest {
				return shared.ExecuteRequest{Code: code(), Args: json.RawMessage(`{"xs":[1,2,3,4,5,6,7,8,9,10],"x":21}`)}
			}
			// A stage's call returns the plugin's own time when it has one
			// (tier1's duration_ms), else 0.
			stages := []struct {
				name string
				call func(ctx context.Context) (float64, error)
			}{
				{"host", func(ctx context.Context) (float64, error) {
					r, _, err := tier1.applyPolicy(req())
					if err != nil {
						return 0, err
					}
					if fs, v := tier1.host.check(ctx, r.Code, r.AllowedImports, validator.Features{Classes: tier1.policy.Classes}); len(fs) > 0 || v == nil {
						return 0, fmt.Errorf("host check: findings %v, verdict %v", fs, v)
					}
					return 0, nil
				}},
				{"noop", func(ctx context.Context) (float64, error) {
					return 0, succeeded(noop.Execute(ctx, req()))
				}},
				{"runner", func(ctx context.Context) (float64, error) {
					r := req()
					return 0, succeeded(fs.Run(ctx, pyproc.Job{Request: runner.Request{Code: r.Code, Args: r.Args, Rules: rules}, Limits: limits}))
				}},
				{"tier1", func(ctx context.Context) (float64, error) {
					res, err := tier1.Execute(ctx, req())
					return res.DurationMS, succeeded(res, err)
				}},
			}
			lat := map[string][]float64{} // ms per call
			cpu := map[string]float64{}   // the machine's busy CPU, ms
			calls := map[string]int{}
			var pluginMS, outsideMS []float64
			block := func(name string, call func(ctx context.Context) (float64, error), n int) {
				busy0, _ := loadtest.MachineBusy()
				for range n {
					t := time.Now()
					own, err := call(ctx)
					d := float64(time.Since(t).Nanoseconds()) / 1e6
					if err != nil {
						b.Fatalf("%s: %v", name, err)
					}
					lat[name] = append(lat[name], d)
					if own > 0 {
						pluginMS = append(pluginMS, own)
						outsideMS = append(outsideMS, d-own)
					}
				}
				busy1, _ := loadtest.MachineBusy()
				cpu[name] += float64(busy1-busy0) / float64(time.Millisecond)
				calls[name] += n
			}
			for _, s := range stages { // warm every path, its zygote and caches
				block(s.name, s.call, 20)
			}
			clear(lat)
			clear(cpu)
			clear(calls)
			pluginMS, outsideMS = pluginMS[:0], outsideMS[:0]
			floorBefore, err := loadtest.ForkFloor(ctx, stageBudgetPython, 300)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				for r := range rounds {
					for i := range stages {
						s := stages[(i+r)%len(stages)]
						block(s.name, s.call, blockSize)
					}
				}
			}
			floorAfter, err := loadtest.ForkFloor(ctx, stageBudgetPython, 300)
			if err != nil {
				b.Fatal(err)
			}
			floor := (floorBefore.P50MS + floorAfter.P50MS) / 2
			floorCPU := (floorBefore.CPUMSPerCall + floorAfter.CPUMSPerCall) / 2
			med := map[string]float64{"plugin": median(pluginMS), "outside": median(outsideMS), "floor": floor}
			perCall := map[string]float64{"floor": floorCPU}
			for name, v := range lat {
				med[name] = median(v)
				perCall[name] = cpu[name] / float64(calls[name])
			}
			med["grpc"] = med["noop"] - med["host"]
			med["plugin_extra"] = med["plugin"] - med["runner"]
			var t strings.Builder
			fmt.Fprintf(&t, "%-13s %8s %8s %9s %9s\n", "stage", "p50_ms", "x_floor", "cpu_ms", "x_fl_cpu")
			for _, name := range []string{"floor", "host", "grpc", "noop", "runner", "plugin_extra", "plugin", "outside", "tier1"} {
				c, xc := "-", "-"
				if v, ok := perCall[name]; ok && floorCPU > 0 {
					c, xc = fmt.Sprintf("%.3f", v), fmt.Sprintf("%.2f", v/floorCPU)
				}
				fmt.Fprintf(&t, "%-13s %8.3f %8.2f %9s %9s\n", name, med[name], med[name]/floor, c, xc)
				b.ReportMetric(med[name], name+"_p50_ms")
			}
			b.Logf("%s (fork floor %.3f ms before, %.3f after):\n%s", body.name, floorBefore.P50MS, floorAfter.P50MS, t.String())
			b.ReportMetric(med["tier1"]/floor, "tier1_x_floor")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// succeeded turns an unsuccessful result into an error.
func succeeded(res shared.ExecutionResult, err error) error {
	if err != nil {
		return err
	}
	if !res.Success {
		return fmt.Errorf("%s: %s", res.ErrorKind, res.Error)
	}
	return nil
}

// median returns the middle of vs (0 for none).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)/2]
}
