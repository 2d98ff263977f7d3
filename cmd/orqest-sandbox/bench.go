package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/internal/loadtest"
	"github.com/orqest/sandbox/shared"
)

// benchBody is the representative call of the whole-system load: a small
// pure-Python body with args, the shape of an LLM-written tool.
const benchBody = "return sum(x * x for x in args['xs'])"

var benchArgs = map[string]any{"xs": []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}

const benchWant = "385"

// cmdBench runs the whole-system load (host → plugin → child) for each named
// sandbox and a naive one-python3-per-call baseline in the same run.
func cmdBench(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "bench", "bench [--config F] [--sandbox NAME …] [-n N] [--concurrency C] [--new-bodies] [--python P] [--json]")
	var (
		config      string
		sandboxes   multiFlag
		n, conc     int
		python      string
		asJSON      bool
		noBaseline  bool
		newBodies   bool
		warmupCalls int
	)
	fs.StringVar(&config, "config", "", "policy file (default ./config.hcl, else the embedded default)")
	fs.Var(&sandboxes, "sandbox", "sandbox to measure; repeatable or comma-separated (default: the policy's default sandbox)")
	fs.IntVar(&n, "n", 200, "calls per sandbox")
	fs.IntVar(&conc, "concurrency", 1, "concurrent callers")
	fs.StringVar(&python, "python", "/usr/bin/python3", "interpreter of the naive baseline")
	fs.BoolVar(&asJSON, "json", false, `print {"results": [...]} as JSON`)
	fs.BoolVar(&noBaseline, "no-baseline", false, "skip the naive one-python3-per-call baseline")
	fs.IntVar(&warmupCalls, "warmup", 5, "unmeasured calls per sandbox before measuring")
	fs.BoolVar(&newBodies, "new-bodies", false, "also measure, per sandbox, a row of distinct generated ~1.3 KB bodies importing 8 stdlib modules (every call a body never seen before)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 || n < 1 || conc < 1 {
		fs.Usage()
		return exitError
	}
	h, err := host.LoadFile(ctx, config)
	if err != nil {
		return reportErr(e, err)
	}
	defer h.Close()
	if len(sandboxes) == 0 {
		sandboxes = multiFlag{""}
	}
	argsJSON, _ := json.Marshal(benchArgs)
	var results []loadtest.Result
	for _, name := range sandboxes {
		sb, err := h.Sandbox(ctx, name)
		if err != nil {
			return reportErr(e, err)
		}
		info, err := sb.Info(ctx) // launches the plugin
		if err != nil {
			return reportErr(e, fmt.Errorf("sandbox %q: %w", name, err))
		}
		// A session tier (tier 2) runs the load inside one open session and
		// reports what opening it cost.
		var sessionID string
		var openMS float64
		if info.Has(shared.CapSessions) {
			t0 := time.Now()
			o, err := sb.Open(ctx, shared.OpenRequest{UserID: "bench", SessionID: fmt.Sprintf("bench-%d", time.Now().UnixNano())})
			if err != nil {
				return reportErr(e, fmt.Errorf("sandbox %q: open session: %w", name, err))
			}
			openMS = float64(time.Since(t0).Microseconds()) / 1000
			sessionID = o.SessionID
			defer sb.CloseSession(context.WithoutCancel(ctx), sessionID)
		}
		call := func(ctx context.Context) error {
			res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: benchBody, Args: argsJSON, SessionID: sessionID, UserID: "bench"})
			if err != nil {
				return err
			}
			if !res.Success {
				return fmt.Errorf("%s: %s", res.ErrorKind, res.Error)
			}
			if got := strings.TrimSpace(string(res.Output)); got != benchWant {
				return fmt.Errorf("got %s, want %s", got, benchWant)
			}
			return nil
		}
		for i := 0; i < warmupCalls; i++ {
			if err := call(ctx); err != nil {
				return reportErr(e, fmt.Errorf("sandbox %q warm-up: %w", name, err))
			}
		}
		label := fmt.Sprintf("tier%d/%s", info.Tier, info.Name)
		if name != "" {
			label = fmt.Sprintf("tier%d/%s", info.Tier, name)
		}
		r := loadtest.Run(ctx, label, n, conc, call)
		r.OpenMS = openMS
		results = append(results, r)
		if newBodies {
			// Every call a body never seen before: the warm-up bodies and
			// the measured ones never repeat.
			newArgs, _ := json.Marshal(newBodyArgs)
			var next atomic.Int64
			fresh := func(ctx context.Context) error {
				res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: newBody(int(next.Add(1))), Args: newArgs,
					AllowedImports: newBodyImports, SessionID: sessionID, UserID: "bench"})
				if err != nil {
					return err
				}
				if !res.Success {
					return fmt.Errorf("%s: %s", res.ErrorKind, res.Error)
				}
				return nil
			}
			for i := 0; i < warmupCalls; i++ {
				if err := fresh(ctx); err != nil {
					return reportErr(e, fmt.Errorf("sandbox %q new-bodies warm-up: %w", name, err))
				}
			}
			results = append(results, loadtest.Run(ctx, label+"/new-bodies", n, conc, fresh))
		}
	}
	if !noBaseline {
		base := loadtest.NaiveBaseline(python, benchBody, benchArgs, benchWant)
		results = append(results, loadtest.Run(ctx, "naive-python3-per-call", n, conc, base))
		floor, err := loadtest.ForkFloor(ctx, python, n)
		if err != nil {
			return reportErr(e, err)
		}
		floor.Concurrency = conc
		results = append(results, floor)
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"results": results})
	} else {
		fmt.Fprint(e.stdout, loadtest.Table(results, "naive-python3-per-call", "python-fork-floor"))
	}
	for _, r := range results {
		if r.Errors > 0 {
			fmt.Fprintf(e.stderr, "orqest-sandbox: bench %s: %d of %d calls failed, first: %s\n", r.Name, r.Errors, r.N, r.FirstError)
			return exitFailed
		}
	}
	return exitOK
}
