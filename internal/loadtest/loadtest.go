// Package loadtest runs a whole-system load (host → plugin → child) and a
// naive one-python-per-call baseline, and summarises latency percentiles and
// throughput. `orqest-sandbox bench` and `make bench` print its results.
package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Result summarises one load run. The JSON names are the CLI contract of
// `orqest-sandbox bench --json`.
type Result struct {
	Name           string  `json:"name"`
	P50MS          float64 `json:"p50_ms"`
	P99MS          float64 `json:"p99_ms"`
	ThroughputPerS float64 `json:"throughput_per_s"`
	N              int     `json:"n"`
	Concurrency    int     `json:"concurrency"`
	OpenMS         float64 `json:"open_ms,omitempty"`
	// CPUMSPerCall is the whole machine's busy CPU time (every process:
	// host, plugin, zygote, children, kernel) during the run, divided by
	// the calls: on a quiet machine, what one call really costs, and so
	// the throughput ceiling (cores × 1000 / CPUMSPerCall). 0: unknown.
	CPUMSPerCall float64 `json:"cpu_ms_per_call,omitempty"`
	Errors       int     `json:"errors"`
	FirstError   string  `json:"first_error,omitempty"`
}

// Call is one unit of work; it returns an error when the call failed.
type Call func(ctx context.Context) error

// Run performs n calls with the given concurrency and summarises them.
// Latencies are wall-clock per call; throughput is n over the total time.
func Run(ctx context.Context, name string, n, concurrency int, call Call) Result {
	if concurrency < 1 {
		concurrency = 1
	}
	if n < 1 {
		n = 1
	}
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	busy0, cpuOK := MachineBusy()
	start := time.Now()
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				errs[i] = call(ctx)
				lat[i] = time.Since(t0)
			}
		}()
	}
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			n = i
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	total := time.Since(start)
	busy1, cpuOK1 := MachineBusy()
	res := Result{Name: name, N: n, Concurrency: concurrency}
	if cpuOK && cpuOK1 && n > 0 && busy1 > busy0 {
		res.CPUMSPerCall = round2(float64(busy1-busy0) / float64(time.Millisecond) / float64(n))
	}
	lat = lat[:n]
	for _, e := range errs[:n] {
		if e != nil {
			if res.Errors == 0 {
				res.FirstError = e.Error()
			}
			res.Errors++
		}
	}
	res.P50MS = Percentile(lat, 50)
	res.P99MS = Percentile(lat, 99)
	if total > 0 {
		res.ThroughputPerS = round2(float64(n) / total.Seconds())
	}
	return res
}

// Percentile returns the p-th percentile (nearest rank) of ds in milliseconds.
func Percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	if rank < 0 {
		rank = 0
	}
	if rank >= len(s) {
		rank = len(s) - 1
	}
	return round2(float64(s[rank]) / float64(time.Millisecond))
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// MachineBusy reads the busy CPU time of every core since boot from
// /proc/stat (user, nice, system, irq, softirq, steal); ok is false where
// there is no /proc/stat. The difference of two readings is what every
// process (and the kernel) used in between: the CPU a run of calls cost.
func MachineBusy() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // idle (4) and iowait (5) are not busy
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux ABI
// Go supports.
const clockTicks = 100

// naiveWrapper is the naive sandbox's work per call: start python, read JSON args
// from stdin, exec the body as a function, print the JSON result. No
// validation, no limits: it is the cost floor of "one python3 per call".
const naiveWrapper = `import json, sys
a = json.load(sys.stdin)
src = "def f(args):\n" + "\n".join("    " + l for l in a["code"].splitlines())
ns = {}
exec(src, ns)
print(json.dumps(ns["f"](a["args"])))
`

// NaiveBaseline returns a Call that starts `python -c wrapper` for every call,
// as a naive one-process-per-call sandbox does, and checks the printed result.
func NaiveBaseline(python, code string, args map[string]any, want string) Call {
	payload, _ := json.Marshal(map[string]any{"code": code, "args": args})
	return func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, python, "-c", naiveWrapper)
		cmd.Stdin = bytes.NewReader(payload)
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("naive baseline: %w", err)
		}
		if got := string(bytes.TrimSpace(out)); want != "" && got != want {
			return fmt.Errorf("naive baseline: got %s, want %s", got, want)
		}
		return nil
	}
}

// Table renders results side by side with two ratios per row: vs_naive, how
// many times faster than the naive baseline row (its p50 over the row's), and
// x_floor, how many times the fork+exit+wait floor row the row's p50 costs;
// cpu_ms is the machine's busy CPU per call during the row's run.
func Table(rs []Result, naive, floor string) string {
	var base, fl float64
	for _, r := range rs {
		switch r.Name {
		case naive:
			base = r.P50MS
		case floor:
			fl = r.P50MS
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-28s %6s %5s %9s %9s %10s %9s %8s %9s %7s %9s\n", "name", "n", "conc", "p50_ms", "p99_ms", "calls/s", "vs_naive", "x_floor", "cpu_ms", "errors", "open_ms")
	for _, r := range rs {
		ratio, xf, open, cpu := "-", "-", "-", "-"
		if r.CPUMSPerCall > 0 {
			cpu = fmt.Sprintf("%.2f", r.CPUMSPerCall)
		}
		if base > 0 && r.P50MS > 0 {
			ratio = fmt.Sprintf("%.2fx", base/r.P50MS)
		}
		if fl > 0 && r.P50MS > 0 {
			xf = fmt.Sprintf("%.1fx", r.P50MS/fl)
		}
		if r.OpenMS > 0 {
			open = fmt.Sprintf("%.1f", r.OpenMS)
		}
		fmt.Fprintf(&b, "%-28s %6d %5d %9.2f %9.2f %10.1f %9s %8s %9s %7d %9s\n", r.Name, r.N, r.Concurrency, r.P50MS, r.P99MS, r.ThroughputPerS, ratio, xf, cpu, r.Errors, open)
	}
	return b.String()
}

// forkFloorScript measures, inside one warm interpreter, what a fork-server
// cannot go below: os.fork, the child's immediate os._exit, and waitpid.
const forkFloorScript = `import os, sys, time, json
n = int(sys.argv[1])
lat = []
t = time.perf_counter()
for _ in range(n):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    lat.append(time.perf_counter() - t0)
total = time.perf_counter() - t
print(json.dumps({"lat": lat, "total": total}))
`

// ForkFloor runs n fork+exit+wait cycles in one python process and returns
// them as a Result named "python-fork-floor": the lower bound of a
// fresh-process-per-call design, printed beside the tiers for scale.
func ForkFloor(ctx context.Context, python string, n int) (Result, error) {
	busy0, ok0 := MachineBusy()
	out, err := exec.CommandContext(ctx, python, "-I", "-S", "-c", forkFloorScript, fmt.Sprint(n)).Output()
	busy1, ok1 := MachineBusy()
	if err != nil {
		return Result{}, fmt.Errorf("fork floor: %w", err)
	}
	var m struct {
		Lat   []float64 `json:"lat"`
		Total float64   `json:"total"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return Result{}, fmt.Errorf("fork floor: %w", err)
	}
	ds := make([]time.Duration, len(m.Lat))
	for i, s := range m.Lat {
		ds[i] = time.Duration(s * float64(time.Second))
	}
	r := Result{Name: "python-fork-floor", N: len(ds), Concurrency: 1, P50MS: Percentile(ds, 50), P99MS: Percentile(ds, 99)}
	if m.Total > 0 {
		r.ThroughputPerS = round2(float64(len(ds)) / m.Total)
	}
	if ok0 && ok1 && len(ds) > 0 && busy1 > busy0 {
		// Includes the interpreter's start (~20 ms): negligible over n.
		r.CPUMSPerCall = round2(float64(busy1-busy0) / float64(time.Millisecond) / float64(len(ds)))
	}
	return r, nil
}
