package docker

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
)

// dsAllowed is the data-science session's allowlist in these tests.
var dsAllowed = []string{"pandas", "numpy", "matplotlib"}

// dsBackend is a backend on the data-science image configured as a host
// would for a policy allowing allowed (ConfigureRequest.AllowedImports)
// with the sandbox's stateful, its containers limited to memMB; it skips
// (or fails) without Docker or the image.
func dsBackend(t testing.TB, memMB int, allowed []string, stateful bool, extra map[string]any) *Backend {
	t.Helper()
	return dsBackendLog(t, memMB, allowed, stateful, extra, nil)
}

// dsBackendLog is dsBackend with its log (from level Info) written to
// logOut; nil: stderr, from Warn (Debug with -v).
func dsBackendLog(t testing.TB, memMB int, allowed []string, stateful bool, extra map[string]any, logOut io.Writer) *Backend {
	t.Helper()
	dc := requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := dc.ImageInspect(ctx, dataScienceImage()); err != nil {
		if os.Getenv("ORQEST_REQUIRE_DOCKER") == "1" {
			t.Fatalf("ORQEST_REQUIRE_DOCKER=1 and the data-science image %s is missing (make image-datascience): %v", dataScienceImage(), err)
		}
		t.Skipf("SKIPPING: the data-science image %s is missing (make image-datascience): %v", dataScienceImage(), err)
	}
	level := hclog.Warn
	if testing.Verbose() {
		level = hclog.Debug
	}
	var out io.Writer = os.Stderr
	if logOut != nil {
		level, out = hclog.Info, logOut
	}
	b := NewBackend(hclog.New(&hclog.LoggerOptions{Name: "docker-ds", Level: level, Output: out}))
	cfg := map[string]any{"image": dataScienceImage(), "memory_mb": memMB}
	for k, v := range extra {
		cfg[k] = v
	}
	raw, _ := json.Marshal(cfg)
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: raw, AllowedImports: allowed, Stateful: stateful}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b
}

// dsRun runs code in session sid (stateful or not) under allowed.
func dsRun(t testing.TB, b *Backend, sid, code string, stateful bool, memMB int, allowed ...string) shared.ExecutionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: sid, Code: code, AllowedImports: allowed, Stateful: stateful,
		MemoryMB: memMB, Timeout: 60 * time.Second})
	if err != nil {
		t.Fatalf("Execute %q: %v", code, err)
	}
	return resp.Result
}

// TestDataScienceStatefulSession is the data-science session as a user
// meets it: a stateful session of the data-science image allowing pandas,
// numpy and matplotlib in a 256 MB container. A DataFrame built in call 1
// is grouped in calls 2-20 with its state kept throughout (no native
// thread pool ends the interpreter); a body allocating past 256 MB
// resident is killed with a memory error and the next call runs in a new
// interpreter; a chart made with only matplotlib listed comes back as a
// PNG artifact (pyplot hands out no module that is not allowed itself:
// not its numpy), and the workspace lists only the user's files.
func TestDataScienceStatefulSession(t *testing.T) {
	const mem = 256
	user := testUser(t) // first: its check of leftovers runs after the backend's shutdown
	b := dsBackend(t, mem, dsAllowed, true, nil)
	sid := openSession(t, b, user)

	r := dsRun(t, b, sid, "import pandas as pd\ndf = pd.DataFrame({'k': ['a', 'b', 'a'] * 1000, 'v': list(range(3000))})\nreturn len(df)", true, mem, dsAllowed...)
	if !r.Success || string(r.Output) != "3000" || r.StateLost {
		t.Fatalf("call 1: success=%v state_lost=%v %s %s %s stderr=%s", r.Success, r.StateLost, r.ErrorKind, r.Error, r.Output, r.Stderr)
	}
	for i := 2; i <= 20; i++ {
		r = dsRun(t, b, sid, "return {k: int(v) for k, v in df.groupby('k')['v'].sum().items()}", true, mem, dsAllowed...)
		if !r.Success || r.StateLost || string(r.Output) != `{"a":2999000,"b":1499500}` {
			t.Fatalf("call %d: success=%v state_lost=%v %s %s %s stderr=%s", i, r.Success, r.StateLost, r.ErrorKind, r.Error, r.Output, r.Stderr)
		}
	}

	// Past the session's memory, resident: the kernel's cgroup kills it.
	r = dsRun(t, b, sid, "x = bytearray(400 * 1024 * 1024)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\nreturn len(x)", true, mem, dsAllowed...)
	if r.Success || r.ErrorKind != shared.KindMemory || !r.StateLost {
		t.Fatalf("allocation past %d MB: success=%v kind=%s state_lost=%v %s", mem, r.Success, r.ErrorKind, r.StateLost, r.Error)
	}
	t.Logf("allocation past %d MB: %s: %s", mem, r.ErrorKind, r.Error)
	r = dsRun(t, b, sid, "import pandas as pd\nreturn int(pd.Series([1, 2, 3]).sum())", true, mem, dsAllowed...)
	if !r.Success || string(r.Output) != "6" || r.StateLost {
		t.Fatalf("after the memory kill: success=%v state_lost=%v %s %s %s", r.Success, r.StateLost, r.ErrorKind, r.Error, r.Output)
	}

	// A chart with only matplotlib listed (pyplot is its reviewed submodule).
	r = dsRun(t, b, sid, "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2, 3], [3, 1, 2])\nfig.savefig(workspace.path('chart.png'))\nplt.close(fig)\nreturn hasattr(plt, 'np')", true, mem, "matplotlib")
	if !r.Success || string(r.Output) != "false" { // numpy, re-exported by pyplot, is not listed
		t.Fatalf("chart: %s %s stderr=%s", r.ErrorKind, r.Error, r.Stderr)
	}
	var png *shared.Artifact
	for i := range r.Artifacts {
		if r.Artifacts[i].Name == "chart.png" {
			png = &r.Artifacts[i]
		}
	}
	if png == nil || !strings.HasPrefix(string(png.Data), "\x89PNG") {
		t.Fatalf("chart: want chart.png as a PNG artifact, got %+v", r.Artifacts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ls, err := b.ListFiles(ctx, shared.ListFilesRequest{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range ls.Files {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"chart.png"}) {
		t.Fatalf("files ls: %q, want only the user's chart.png (no library cache)", names)
	}
}

// TestStatefulUserThreadStillEnds: a thread the user's code starts and
// leaves running still ends the stateful interpreter, with its message,
// in a data-science session whose libraries are loaded.
func TestStatefulUserThreadStillEnds(t *testing.T) {
	user := testUser(t)
	b := dsBackend(t, 512, []string{"pandas", "threading", "time"}, true, nil)
	sid := openSession(t, b, user)
	r := dsRun(t, b, sid, "n = 1\nreturn n", true, 512, "pandas", "threading", "time")
	if !r.Success || r.StateLost {
		t.Fatalf("call 1: %+v", r)
	}
	r = dsRun(t, b, sid, "import threading, time\nthreading.Thread(target=time.sleep, args=(30,)).start()\nreturn 1", true, 512, "pandas", "threading", "time")
	if !r.Success || !r.StateLost || !strings.Contains(r.Stderr, "join your threads") {
		t.Fatalf("a thread left running: success=%v state_lost=%v stderr=%q", r.Success, r.StateLost, r.Stderr)
	}
	r = dsRun(t, b, sid, "return n", true, 512, "pandas", "threading", "time")
	if r.Success || !strings.Contains(r.Error, "NameError") {
		t.Fatalf("after the thread: want a NameError (a new interpreter), got %+v", r)
	}
}

// BenchmarkDataSciencePandas: a data-science session's first pandas body
// against a warm one, stateful and stateless. The session is bound from
// the warm pool once its runtime logged "session prepared" (the policy's
// pandas and numpy imported in the zygote and, stateful, the
// interpreter); the first body then imports nothing. Reported: the medians first-ms and warm-ms (10 warm bodies per
// session) and first/warm; stateful-unprepared is the same session
// without the preparation (its first body imports pandas), the cost it
// saves.
func BenchmarkDataSciencePandas(b *testing.B) {
	allowed := []string{"pandas", "numpy"}
	const body = "import pandas as pd\ndf = pd.DataFrame(args['rows'])\nreturn df.groupby('k')['v'].sum().to_dict()"
	args := json.RawMessage(`{"rows": [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}]}`)
	for _, c := range []struct {
		name               string
		stateful, prepared bool
	}{{"stateful", true, true}, {"stateless", false, true}, {"stateful-unprepared", true, false}} {
		stateful := c.stateful
		b.Run(c.name, func(b *testing.B) {
			user := testUser(b)
			var prepare []string // unprepared: the host sent no allowed_imports (a plugin called directly)
			if c.prepared {
				prepare = allowed
			}
			prepared := &lineCounter{substr: "session prepared"}
			be := dsBackendLog(b, 512, prepare, stateful, map[string]any{"pool": map[string]any{"size": 1}}, prepared)
			ctx := context.Background()
			cold := openSession(b, be, user)
			for deadline := time.Now().Add(90 * time.Second); prepared.count() < 1; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatal("the cold session was not prepared within 90s")
				}
			}
			if _, err := be.Close(ctx, shared.CloseRequest{SessionID: cold}); err != nil {
				b.Fatal(err)
			}
			want := 1 // the cold session's runtime said so; each warm container's adds one
			call := func(sid string) time.Duration {
				t0 := time.Now()
				resp, err := be.Execute(ctx, shared.ExecuteRequest{SessionID: sid, Code: body, Args: args, AllowedImports: allowed,
					Stateful: stateful, MemoryMB: 512, Timeout: 60 * time.Second})
				d := time.Since(t0)
				if err != nil || !resp.Result.Success || string(resp.Result.Output) != `{"a":4,"b":2}` {
					b.Fatalf("pandas body: %+v %v", resp.Result, err)
				}
				return d
			}
			var firsts, warms []time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				deadline := time.Now().Add(90 * time.Second)
				want++
				for !func() bool { be.mu.Lock(); defer be.mu.Unlock(); return be.Warm(user) }() || prepared.count() < want {
					if time.Now().After(deadline) {
						b.Fatal("no prepared warm container within 90s")
					}
					time.Sleep(20 * time.Millisecond)
				}
				sid := openSession(b, be, user)
				b.StartTimer()
				firsts = append(firsts, call(sid))
				for range 10 {
					warms = append(warms, call(sid))
				}
				b.StopTimer()
				if _, err := be.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
					b.Fatal(err)
				}
			}
			first, warm := median(firsts), median(warms)
			b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
			b.ReportMetric(float64(warm.Microseconds())/1000, "warm-ms")
			b.ReportMetric(float64(first)/float64(warm), "first/warm")
		})
	}
}

// lineCounter counts the log lines written to it that contain substr.
type lineCounter struct {
	substr string
	mu     sync.Mutex
	n      int
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += strings.Count(string(p), c.substr)
	return len(p), nil
}

func (c *lineCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// median returns the median of ds (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
