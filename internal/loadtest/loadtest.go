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
	"os/exec"
	"sort"
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
	Errors         int     `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
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
	res := Result{Name: name, N: n, Concurrency: concurrency}
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

// naiveWrapper is what the original did per call: start python, read JSON args
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
// as the original's SubprocessSandbox did, and checks the printed result.
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

// Table renders results side by side, with each row's p50 as a ratio of the
// baseline row's (the row named baseline).
func Table(rs []Result, baseline string) string {
	var base float64
	for _, r := range rs {
		if r.Name == baseline {
			base = r.P50MS
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-28s %6s %5s %9s %9s %11s %10s %7s\n", "name", "n", "conc", "p50_ms", "p99_ms", "calls/s", "vs_naive", "errors")
	for _, r := range rs {
		ratio := "-"
		if base > 0 && r.P50MS > 0 {
			ratio = fmt.Sprintf("%.2fx", base/r.P50MS)
		}
		fmt.Fprintf(&b, "%-28s %6d %5d %9.2f %9.2f %11.1f %10s %7d\n", r.Name, r.N, r.Concurrency, r.P50MS, r.P99MS, r.ThroughputPerS, ratio, r.Errors)
		if r.OpenMS > 0 {
			fmt.Fprintf(&b, "%-28s open_ms=%.1f\n", "", r.OpenMS)
		}
	}
	return b.String()
}
