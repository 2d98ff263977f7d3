package pyproc_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/internal/runnertest"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// zygoteLoops runs f against a zygote looping in C (forkcore, named by
// ORQEST_FORKCORE as `make test` sets it; skipped loudly without) and one
// looping in Python. prog is the program the zygote runs.
func zygoteLoops(t *testing.T, prog string, rules json.RawMessage, f func(t *testing.T, fs *pyproc.ForkServer)) {
	zygoteLoopsWith(t, prog, rules, pyproc.ForkServerOptions{}, f)
}

// zygoteLoopsWith is zygoteLoops with base as the zygotes' options (the
// C loop's Core set on top).
func zygoteLoopsWith(t *testing.T, prog string, rules json.RawMessage, base pyproc.ForkServerOptions, f func(t *testing.T, fs *pyproc.ForkServer)) {
	if _, err := os.Stat(python); err != nil {
		t.Skip(err)
	}
	s, err := pyproc.Probe(context.Background(), runner.Argv(python), nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, loop := range []string{"c", "python"} {
		t.Run(loop, func(t *testing.T) {
			opts := base
			if loop == "c" {
				opts.Core = forkCore(t)
			}
			fs, err := pyproc.StartForkServer(runner.ArgvFor(python, prog, runner.ForkServerArg), runner.ForkServerConfig{Seal: s.Seal(nil), Rules: rules, Pool: 2}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			if inC, why := fs.Core(); inC != (loop == "c") {
				t.Fatalf("zygote runs the C loop: %v (%s), want %v", inC, why, loop == "c")
			}
			f(t, fs)
		})
	}
}

// forkCore is the fork-server's C loop that ORQEST_FORKCORE names, as
// `make test` sets it; the test is skipped loudly without.
func forkCore(t *testing.T) []byte {
	t.Helper()
	path := os.Getenv("ORQEST_FORKCORE")
	if path == "" {
		t.Skip("SKIP: ORQEST_FORKCORE is not set (the fork-server's C loop, built by `make build`; `make test` sets it)")
	}
	core, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return core
}

// A body children accepted twice is warmed in the zygote: children forked
// afterwards run it without checking it themselves. The program records,
// in every process, which pids ran the in-interpreter checker; the body
// reports whether its own process did.
func TestWarmedBodySkipsTheChildsCheck(t *testing.T) {
	prog := runnertest.CheckRecordingProgram()
	// The body reads the list from sys (allowed here), under a rules table
	// without the usual forbidden names.
	rules := json.RawMessage(`{"safe_builtins":["len","list","set","True","False","None"]}`)
	body := "import sys, os\nc = sys.orq_checked_in\nreturn [os.getpid() in c, len(set(c))]"
	type result struct {
		ok       bool
		out, err string
	}
	run := func(t *testing.T, fs *pyproc.ForkServer, code string, allowed []string) result {
		t.Helper()
		res, err := fs.Run(context.Background(), pyproc.Job{
			Request: runner.Request{Code: code, AllowedImports: allowed, Rules: rules},
			Limits:  shared.Resolved{Timeout: 10 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
		})
		if err != nil {
			t.Fatal(err)
		}
		out := strings.ReplaceAll(string(res.Output), " ", "")
		return result{res.Success, out, string(res.ErrorKind) + " " + res.Error}
	}
	zygoteLoops(t, prog, rules, func(t *testing.T, fs *pyproc.ForkServer) {
		allowed := []string{"sys", "os"}
		first := run(t, fs, body, allowed)
		// Checked here, and before by the zygote (its own warm-up body).
		if !first.ok || first.out != "[true,2]" {
			t.Fatalf("first run: got %+v, want checked in the child", first)
		}
		// The children pre-forked before the warm check it themselves; a
		// child forked after it finds the zygote's verdict (checked by one
		// other pid, the zygote) and does not check.
		warmed := -1
		for n := 0; n < 30; n++ {
			r := run(t, fs, body, allowed)
			if !r.ok {
				t.Fatalf("run %d: %+v", n, r)
			}
			switch r.out {
			case "[false,1]":
				if warmed < 0 {
					warmed = n
				}
			case "[true,2]":
				if warmed >= 0 {
					t.Fatalf("run %d checked in the child again after run %d found the body warm", n, warmed)
				}
			default:
				t.Fatalf("run %d: %s", n, r.out)
			}
		}
		if warmed < 0 {
			t.Fatal("no child found the body warm in 30 runs")
		}
		// The verdict is per allowlist: the same body under another one is
		// checked in the child (then warmed in turn).
		if r := run(t, fs, body, []string{"os", "sys", "json"}); r.out != "[true,2]" {
			t.Errorf("another allowlist: %+v, want checked in the child", r)
		}
	})
}

// Warming a body the checker rejects caches nothing: every child still
// rejects it (only what a child accepted is ever sent, but the zygote runs
// the same checker and keeps only accepted bodies).
func TestWarmedRejectedBodyStaysRejected(t *testing.T) {
	rules := json.RawMessage(validator.RulesJSON())
	zygoteLoops(t, runner.Program(), rules, func(t *testing.T, fs *pyproc.ForkServer) {
		for _, code := range []string{"import os\nreturn os.getpid()", "return ().__class__.__mro__"} {
			fs.Warm(code, nil) // seen once
			fs.Warm(code, nil) // seen again: sent
			for n := 0; n < 8; n++ {
				res, err := fs.Run(context.Background(), pyproc.Job{
					Request: runner.Request{Code: code, Rules: rules},
					Limits:  shared.Resolved{Timeout: 10 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
				})
				if err != nil {
					t.Fatal(err)
				}
				if res.Success || res.ErrorKind != "validation" {
					t.Fatalf("%q run %d after a warm: %s %s, want a validation error", code, n, res.ErrorKind, res.Error)
				}
			}
		}
		// And the zygote still serves accepted bodies.
		res, err := fs.Run(context.Background(), pyproc.Job{
			Request: runner.Request{Code: "return " + strconv.Quote("ok"), Rules: rules},
			Limits:  shared.Resolved{Timeout: 10 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
		})
		if err != nil || !res.Success {
			t.Fatal(err, res)
		}
	})
}

// The first body children accept under an allowlist makes the zygote
// prepare that allowlist's environment (its modules imported), so children
// forked afterwards run a body never seen before without importing them;
// no body is sent, so it happens with NoWarm too. The body reads the
// runner's table of prepared environments, which a child fills only from
// its zygote.
func TestAllowlistEnvironmentPrepared(t *testing.T) {
	prog := runnertest.CheckRecordingProgram()
	rules := json.RawMessage(`{"safe_builtins":["len","list","set","True","False","None","sorted","str","vars"]}`)
	allowed := []string{"sys", "statistics"}
	zygoteLoops(t, prog, rules, func(t *testing.T, fs *pyproc.ForkServer) {
		prepared := -1
		for n := 0; n < 30; n++ {
			// A new body each time: only the allowlist repeats.
			body := "import sys\nenvs = vars(sys.modules['_' * 2 + 'main' + '_' * 2])['_orq_envs'][1]\n" +
				"return [sorted(k[0]) for k in envs if 'statistics' in k[0]]  # " + strconv.Itoa(n)
			res, err := fs.Run(context.Background(), pyproc.Job{
				Request: runner.Request{Code: body, AllowedImports: allowed, Rules: rules},
				Limits:  shared.Resolved{Timeout: 10 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
			})
			if err != nil || !res.Success {
				t.Fatalf("run %d: %v %s %s", n, err, res.ErrorKind, res.Error)
			}
			switch out := strings.ReplaceAll(string(res.Output), " ", ""); out {
			case "[]":
				if prepared >= 0 {
					t.Fatalf("run %d found no prepared environment after run %d did", n, prepared)
				}
			case `[["statistics","sys"]]`:
				if prepared < 0 {
					prepared = n
				}
			default:
				t.Fatalf("run %d: %s", n, out)
			}
		}
		if prepared < 1 {
			t.Fatalf("prepared at run %d: want a later child (not the first) to find the allowlist prepared", prepared)
		}
	})
}
