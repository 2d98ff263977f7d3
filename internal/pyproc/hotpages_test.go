package pyproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/internal/runnertest"
	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// faultRecordingSetup skips the test without python, and returns the C
// loop and the interpreter's seal for a fork-server running
// runnertest.FaultRecordingProgram.
func faultRecordingSetup(t *testing.T) ([]byte, *pyproc.SealInfo) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skip(err)
	}
	core := forkCore(t)
	s, err := pyproc.Probe(context.Background(), runner.Argv(python), nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return core, s
}

// A child of the C loop copies the zygote's hot pages while idle, so its
// execution takes far fewer page faults than a child that faults them in:
// the zygote reports how many pages it learned, and the body returns the
// minor faults its process took from the start of serving to the return.
func TestHotPagesCutAnExecutionsFaults(t *testing.T) {
	core, s := faultRecordingSetup(t)
	rules := json.RawMessage(`{"safe_builtins":["len","list","set","sum","True","False","None"]}`)
	body := "import resource, sys\nxs = [x * x for x in args['xs']]\nreturn resource.getrusage(resource.RUSAGE_SELF).ru_minflt - sys.orq_flt0"
	faults := func(t *testing.T, noHot bool) (hot int, median int) {
		fs, err := pyproc.StartForkServer(runner.ArgvFor(python, runnertest.FaultRecordingProgram(), runner.ForkServerArg),
			runner.ForkServerConfig{Seal: s.Seal(nil), Rules: rules, Pool: 2, NoHotPages: noHot}, pyproc.ForkServerOptions{Core: core, NoWarm: true})
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		if inC, why := fs.Core(); !inC {
			t.Fatalf("zygote does not run the C loop: %s", why)
		}
		var n []int
		for range 9 {
			res, err := fs.Run(context.Background(), pyproc.Job{
				Request: runner.Request{Code: body, Args: json.RawMessage(`{"xs":[1,2,3,4,5]}`), AllowedImports: []string{"resource", "sys"}, Rules: rules},
				Limits:  shared.Resolved{Timeout: 10 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Success {
				t.Fatalf("execution failed: %s %s", res.ErrorKind, res.Error)
			}
			v, err := strconv.Atoi(string(res.Output))
			if err != nil {
				t.Fatalf("output %q: %v", res.Output, err)
			}
			n = append(n, v)
		}
		slices.Sort(n)
		return fs.HotPages(), n[len(n)/2]
	}
	hotOn, withHot := faults(t, false)
	hotOff, without := faults(t, true)
	t.Logf("hot pages learned: %d; faults per execution (median of 9): %d with them, %d without", hotOn, withHot, without)
	if hotOff != 0 {
		t.Errorf("NoHotPages: zygote still reports %d hot pages", hotOff)
	}
	if hotOn < 50 {
		t.Errorf("zygote learned only %d hot pages", hotOn)
	}
	if withHot*2 > without {
		t.Errorf("an execution took %d faults with hot pages and %d without: want at most half", withHot, without)
	}
}

// The training child learns the pages of the whole way of a new body only
// if the default rules accept its body and it runs: a rules change that
// refuses it would quietly shrink what every child copies ahead.
func TestHotTrainingBodyRuns(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip(err)
	}
	f := t.TempDir() + "/program.py"
	if err := os.WriteFile(f, []byte(runner.Program()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, "-I", "-S", "-B", "-c",
		"import sys\nns = {'__name__': 'x'}\nexec(open(sys.argv[1]).read(), ns)\nsys.stdout.write(ns['_orq_hot_body'])", f).Output()
	if err != nil || len(out) < 100 {
		t.Fatalf("no _orq_hot_body in the runner: %v %q", err, out)
	}
	body := string(out)
	if f := validator.New().Check(context.Background(), body, nil); len(f) > 0 {
		t.Fatalf("the validator refuses the training body: %+v", f)
	}
	res, err := pyproc.Spawn(context.Background(), runner.Argv(python), pyproc.Job{
		Request: runner.Request{Code: body, Args: json.RawMessage(`{"xs":[1,2,3,4,5,6,7,8,9,10]}`), Rules: rules.JSON()},
		Limits:  shared.Resolved{Timeout: 10 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
	}, nil)
	if err != nil || !res.Success {
		t.Fatalf("the training body does not run: %v %s %s", err, res.ErrorKind, res.Error)
	}
	if !strings.Contains(string(res.Output), `"total": 385`) {
		t.Fatalf("output %s", res.Output)
	}
}

// The pages a new body writes on top are copied ahead only while most
// executions have a new body: a child forked after a run of warm bodies
// leaves them to faults, one forked after a run of new bodies copies them.
// The body reports the minor faults its process took from the start of
// serving to the return.
func TestHotPagesForNewBodiesFollowTheMix(t *testing.T) {
	core, s := faultRecordingSetup(t)
	fs, err := pyproc.StartForkServer(runner.ArgvFor(python, runnertest.FaultRecordingProgram(), runner.ForkServerArg),
		runner.ForkServerConfig{Seal: s.Seal(nil), Rules: rules.JSON(), Pool: 2}, pyproc.ForkServerOptions{Core: core})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if inC, why := fs.Core(); !inC {
		t.Fatalf("zygote does not run the C loop: %s", why)
	}
	if fs.HotPagesNew() < 20 {
		t.Fatalf("the zygote learned %d pages of a new body (common: %d)", fs.HotPages(), fs.HotPagesNew())
	}
	faults := func(code string) int {
		t.Helper()
		res, err := fs.Run(context.Background(), pyproc.Job{
			Request: runner.Request{Code: code, Args: json.RawMessage(`{"xs":[3,1,2]}`), AllowedImports: []string{"resource", "sys"},
				Rules: runner.RulesFromServer},
			Limits: shared.Resolved{Timeout: 10 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
		})
		if err != nil || !res.Success {
			t.Fatalf("%v %s %s", err, res.ErrorKind, res.Error)
		}
		n, err := strconv.Atoi(string(res.Output))
		if err != nil {
			t.Fatalf("output %q", res.Output)
		}
		return n
	}
	const tail = "\nreturn resource.getrusage(resource.RUSAGE_SELF).ru_minflt - sys.orq_flt0"
	warm := "import resource, sys" + tail
	newBody := func(i int) string {
		return fmt.Sprintf("import resource, sys\ndef rank_%d(xs):\n    return sorted(xs, key=lambda x: (-x, str(x)))\n"+
			"top = {str(k): v for k, v in enumerate(rank_%d(args['xs']))}\nlabel = f'{len(top)} items'"+tail, i, i)
	}
	var afterWarm, afterNew []int
	for round := range 3 {
		for range 6 {
			faults(warm)
		}
		afterWarm = append(afterWarm, faults(newBody(100*round)))
		for i := range 6 {
			faults(newBody(100*round + 1 + i))
		}
		afterNew = append(afterNew, faults(newBody(100*round+50)))
	}
	slices.Sort(afterWarm)
	slices.Sort(afterNew)
	t.Logf("pages copied ahead: %d, %d more for a new body; a new body's faults after warm ones %v, after new ones %v",
		fs.HotPages(), fs.HotPagesNew(), afterWarm, afterNew)
	if afterNew[1]*10 > afterWarm[1]*8 {
		t.Errorf("a new body after new ones took %d faults, after warm ones %d: want at least 20 %% fewer", afterNew[1], afterWarm[1])
	}
}
