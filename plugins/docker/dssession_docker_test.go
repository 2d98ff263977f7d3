package docker

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
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
func dsBackend(t *testing.T, memMB int, allowed []string, stateful bool, extra map[string]any) *Backend {
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
	b := NewBackend(hclog.New(&hclog.LoggerOptions{Name: "docker-ds", Level: level, Output: os.Stderr}))
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
func dsRun(t *testing.T, b *Backend, sid, code string, stateful bool, memMB int, allowed ...string) shared.ExecutionResult {
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
// PNG artifact, and the workspace lists only the user's files.
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
	r = dsRun(t, b, sid, "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2, 3], [3, 1, 2])\nfig.savefig(workspace.path('chart.png'))\nplt.close(fig)\nreturn 'ok'", true, mem, "matplotlib")
	if !r.Success {
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
