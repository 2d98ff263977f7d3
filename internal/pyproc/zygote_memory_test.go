package pyproc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// The zygote does not grow per body: bodies it warms are kept in a bounded
// cache (the oldest out first), and a one-off body, run once, is never
// sent to it. After a first batch of warmed bodies (more than the cache
// holds) its anonymous memory grew by what a full cache takes; a second
// batch twice as large must add far less than that again, and 30 one-off
// bodies run in children add nothing measurable.
func TestZygoteMemoryBoundedAfterManyBodies(t *testing.T) {
	rules := json.RawMessage(validator.RulesJSON())
	zygoteLoops(t, runner.Program(), rules, func(t *testing.T, fs *pyproc.ForkServer) {
		n := 0
		// A distinct ~7 KB body (under the 16 KB the zygote keeps) each
		// time: a hundred small functions, so its code object is large.
		body := func() string {
			n++
			var b strings.Builder
			for j := range 100 {
				fmt.Fprintf(&b, "def f%d_%d(x):\n    y = x * %d + %d\n    return [y + k for k in range(3)]\n", n, j, j, n)
			}
			b.WriteString("return 1\n")
			return b.String()
		}
		warm := func(count int) {
			for range count {
				code := body()
				fs.Warm(code, nil) // the first acceptance: remembered
				fs.Warm(code, nil) // the second: sent to the zygote
			}
		}
		run := func(code string) {
			res, err := fs.Run(context.Background(), pyproc.Job{
				Request: runner.Request{Code: code, Rules: rules},
				Limits:  shared.Resolved{Timeout: 20 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
			})
			if err != nil || !res.Success {
				t.Fatalf("run: %+v %v", res, err)
			}
		}
		for range 3 {
			run("return 1")
		}
		base := stableRssAnon(t, fs.PID())
		warm(140) // more than the zygote's cache holds
		full := stableRssAnon(t, fs.PID())
		grew := full - base
		if grew < 1<<20 {
			t.Fatalf("a full cache of warmed bodies took %d KB of the zygote's memory: too little for this test to tell a bound", grew>>10)
		}
		warm(280)
		after := stableRssAnon(t, fs.PID())
		if more := after - full; more > grew/2 {
			t.Errorf("280 more warmed bodies grew the zygote by %d KB after a full cache took %d KB: the cache is not bounded", more>>10, grew>>10)
		}
		for range 30 {
			run(body())
		}
		if oneOff := stableRssAnon(t, fs.PID()) - after; oneOff > 1<<20 {
			t.Errorf("30 one-off bodies grew the zygote by %d KB; they are never sent to it", oneOff>>10)
		}
		t.Logf("zygote RssAnon: %d KB at rest, +%d KB with a full cache, %d KB after 280 more warmed and 30 one-off bodies", base>>10, grew>>10, after>>10)
	})
}

// stableRssAnon returns pid's resident anonymous memory in bytes once two
// readings 200 ms apart agree (the zygote handles warm messages
// asynchronously), or after 10 s.
func stableRssAnon(t *testing.T, pid int) int64 {
	t.Helper()
	last := rssAnon(t, pid)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		cur := rssAnon(t, pid)
		if cur == last {
			return cur
		}
		last = cur
	}
	return last
}

// rssAnon reads RssAnon from /proc/<pid>/status, in bytes.
func rssAnon(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no RssAnon in /proc/%d/status", pid)
	return 0
}
