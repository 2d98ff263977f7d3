package pyproc_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/internal/runnertest"
	"github.com/orqest/sandbox/runner"
)

// A child of the C loop copies the zygote's hot pages while idle, so its
// execution takes far fewer page faults than a child that faults them in:
// the zygote reports how many pages it learned, and the body returns the
// minor faults its process took from the start of serving to the return.
func TestHotPagesCutAnExecutionsFaults(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip(err)
	}
	core := forkCore(t)
	s, err := pyproc.Probe(context.Background(), runner.Argv(python), nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
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
				Request: runner.Request{Code: body, Args: json.RawMessage(`{"xs":[1,2,3,4,5]}`), AllowedImports: []string{"resource", "sys"}, Rules: rules, MemoryMB: 256},
				Timeout: 10 * time.Second, MaxOutput: 1 << 16,
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
