package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/procfs"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// The chaos tests: many callers keep a sandbox busy while its parts are
// killed from outside — the plugin process, the fork server, a running
// child, a session's container. Every call must end, with a result or an
// error that says what happened; no call may run twice; when the chaos
// stops the sandbox serves again; and after Close nothing is left:
// processes, containers, socket directories, file descriptors.
// `go test ./host -run Chaos -count=10` is how "ten in a row" is checked.

// chaosCall is what one call of a chaos test got back.
type chaosCall struct {
	id  string
	res shared.ExecutionResult
	err error
	dur time.Duration
}

// checkEnded fails the test for a call that ended without saying what
// happened: a failed result with no kind or message, an error that carries
// no class on the wire or no message, a success with another call's
// output. It reports whether the call succeeded.
func checkEnded(t *testing.T, c chaosCall, wantOutput string) bool {
	t.Helper()
	if c.err != nil {
		if len(plugin.ErrorClasses(c.err)) == 0 || c.err.Error() == "" {
			t.Errorf("call %s: an error with no class: %v", c.id, c.err)
		}
		return false
	}
	if !c.res.Success {
		if c.res.ErrorKind == "" || c.res.Error == "" {
			t.Errorf("call %s: a failed result that says nothing: %+v", c.id, c.res)
		}
		return false
	}
	if wantOutput != "" && string(c.res.Output) != wantOutput {
		t.Errorf("call %s: output %s, want %s (another call's result?)", c.id, c.res.Output, wantOutput)
	}
	return true
}

// parents maps every live process to its parent, from /proc.
func parents() map[int]int {
	out := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procfs.ReadStat(p); err == nil && !st.Gone() {
			out[p] = st.PPID
		}
	}
	return out
}

// kids returns the live children of pid in the parent map pm.
func kids(pm map[int]int, pid int) []int {
	var out []int
	for p, pp := range pm {
		if pp == pid {
			out = append(out, p)
		}
	}
	return out
}

// procTree returns pid, if it lives, and its live descendants.
func procTree(pid int) []int {
	pm := parents()
	var out []int
	if _, ok := pm[pid]; ok {
		out = append(out, pid)
	}
	for next := []int{pid}; len(next) > 0; {
		var more []int
		for _, p := range next {
			more = append(more, kids(pm, p)...)
		}
		out = append(out, more...)
		next = more
	}
	return out
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settleFDs waits up to 5 s for this process's descriptors to be back at
// base (connections close asynchronously), then fails with what is open.
func settleFDs(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for openFDs(t) > base {
		if time.Now().After(deadline) {
			ents, _ := os.ReadDir("/proc/self/fd")
			var open []string
			for _, e := range ents {
				l, _ := os.Readlink("/proc/self/fd/" + e.Name())
				open = append(open, e.Name()+"->"+l)
			}
			t.Errorf("%d descriptors open after Close, %d before Load: %v", openFDs(t), base, open)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// emptyDir fails the test when dir holds anything (a socket directory or
// temp file the plugins or the host left behind).
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if len(left) > 0 {
		t.Errorf("left in the temp directory: %v", left)
	}
}

// chaosCallers runs callers goroutines of at least per calls each (call
// gets the caller's number and a call id unique in the run) while chaos
// runs every interval; the callers go on until chaos has run minRounds
// times too, however fast the machine. It fails the test if the calls have
// not all returned within bound.
func chaosCallers(t *testing.T, callers, per, minRounds int, interval, bound time.Duration, call func(caller int, id string) chaosCall, chaos func(round int)) []chaosCall {
	t.Helper()
	var (
		mu     sync.Mutex
		all    []chaosCall
		wg     sync.WaitGroup
		rounds atomic.Int64
	)
	for c := range callers {
		wg.Go(func() {
			for i := 0; i < per || rounds.Load() < int64(minRounds); i++ {
				r := call(c, fmt.Sprintf("c%d-%d", c, i))
				mu.Lock()
				all = append(all, r)
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	timeout := time.After(bound)
	for round := 0; ; round++ {
		select {
		case <-done:
			return all
		case <-timeout:
			t.Fatalf("the calls have not all returned after %s", bound)
		case <-tick.C:
			chaos(round)
			rounds.Add(1)
		}
	}
}

// The host side alone, exactly: the life plugin writes down every call it
// runs, and is SIGKILLed again and again under 12 callers. Every call ends
// with its result or a classed error; none runs twice (the host resends a
// call only when the plugin never got it); every successful call ran once;
// the relaunched plugin serves; nothing is left.
func TestChaosPluginKilledUnderLoad(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // go-plugin's socket directories go here: none may be left
	runs := filepath.Join(t.TempDir(), "runs")
	baseFDs := openFDs(t)
	h, sb, _ := lifeHost(t, "", "policy \"default\" {\n  timeout = \"5s\"\n}\n", "", WithPluginEnv("ORQEST_TEST_LIFE_RUNS="+runs))
	var pids []int
	work := func(_ int, id string) chaosCall {
		start := time.Now()
		res, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "work", Args: json.RawMessage(fmt.Sprintf(`{"id": %q, "ms": %d}`, id, 5+rand.IntN(40)))})
		return chaosCall{id: id, res: res, err: err, dur: time.Since(start)}
	}
	calls := chaosCallers(t, 12, 20, 8, 400*time.Millisecond, 2*time.Minute, work, func(int) {
		if pid := sb.PluginPID(); pid > 0 {
			pids = append(pids, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	ran := map[string]int{}
	b, _ := os.ReadFile(runs)
	for _, id := range strings.Fields(string(b)) {
		ran[id]++
	}
	ok, failed := 0, 0
	for _, c := range calls {
		if ran[c.id] > 1 {
			t.Errorf("call %s ran %d times", c.id, ran[c.id])
		}
		if checkEnded(t, c, strconv.Quote(c.id)) {
			ok++
			if ran[c.id] != 1 {
				t.Errorf("call %s succeeded but ran %d times", c.id, ran[c.id])
			}
		} else {
			failed++
		}
	}
	t.Logf("%d calls: %d succeeded, %d ended with an error; %d plugin kills, %d launches", len(calls), ok, failed, len(pids), sb.Launches())
	if len(pids) < 5 || ok == 0 {
		t.Fatalf("the chaos did not happen as planned: %d kills, %d successes", len(pids), ok)
	}
	// The chaos is over: every call succeeds again.
	for i := range 12 {
		if c := work(0, fmt.Sprintf("after-%d", i)); !checkEnded(t, c, strconv.Quote(c.id)) {
			t.Errorf("after the chaos: %+v %v", c.res, c.err)
		}
	}
	last := sb.PluginPID()
	h.Close()
	for _, pid := range append(pids, last) {
		waitDead(t, pid)
	}
	emptyDir(t, tmp)
	settleFDs(t, baseFDs)
}

// Tier 1 for real: the subprocess plugin's fork server, a running child
// and the plugin itself are SIGKILLed in turn under 12 callers. Every call
// ends with its own output or a result or error that says what happened;
// when the chaos stops all calls succeed; after Close no process of any
// plugin generation is left, no socket directory and no descriptor.
func TestChaosTier1PartsKilledUnderLoad(t *testing.T) {
	needPlugin(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	baseFDs := openFDs(t)
	src := "policy \"default\" {\n  timeout = \"5s\"\n  allowed_imports = [\"time\"]\n}\nsandbox \"t1\" {\n  plugin = \"subprocess\"\n}\n"
	cfg, diags := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h, err := Load(context.Background(), cfg, WithPluginDirs(pluginDir))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sb, err := h.Sandbox(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	const body = "import time\ntime.sleep(args['ms'] / 1000)\nreturn args['id']"
	work := func(_ int, id string) chaosCall {
		start := time.Now()
		res, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: body, Args: json.RawMessage(fmt.Sprintf(`{"id": %q, "ms": %d}`, id, 5+rand.IntN(60)))})
		return chaosCall{id: id, res: res, err: err, dur: time.Since(start)}
	}
	if c := work(0, "warm"); !checkEnded(t, c, `"warm"`) {
		t.Fatalf("first call: %+v %v", c.res, c.err)
	}
	seen := map[int]bool{}
	kills := map[string]int{}
	calls := chaosCallers(t, 8, 15, 16, 250*time.Millisecond, 3*time.Minute, work, func(round int) {
		plug := sb.PluginPID()
		if plug <= 0 {
			return
		}
		for _, p := range procTree(plug) {
			seen[p] = true
		}
		pm := parents()
		var zygotes, children []int
		for _, p := range kids(pm, plug) {
			zygotes = append(zygotes, p)
			children = append(children, kids(pm, p)...)
		}
		target, what := 0, ""
		switch round % 4 {
		case 0, 1: // children most often: they are the commonest death
			if len(children) > 0 {
				target, what = children[rand.IntN(len(children))], "child"
			}
		case 2:
			if len(zygotes) > 0 {
				target, what = zygotes[rand.IntN(len(zygotes))], "fork server"
			}
		case 3:
			target, what = plug, "plugin"
		}
		if target > 0 && syscall.Kill(target, syscall.SIGKILL) == nil {
			kills[what]++
		}
	})
	ok := 0
	kinds := map[string]int{}
	for _, c := range calls {
		k := ""
		if checkEnded(t, c, strconv.Quote(c.id)) {
			ok++
			continue
		} else if c.err != nil {
			k = "error:" + strings.Join(plugin.ErrorClasses(c.err), "+")
		} else {
			k = string(c.res.ErrorKind)
		}
		if kinds[k] == 0 {
			t.Logf("first %s: %v %s", k, c.err, c.res.Error)
		}
		kinds[k]++
	}
	t.Logf("%d calls: %d succeeded, failures by kind %v; kills %v; %d launches", len(calls), ok, kinds, kills, sb.Launches())
	if kills["plugin"] == 0 || kills["fork server"] == 0 || kills["child"] == 0 || ok == 0 {
		t.Fatalf("the chaos did not happen as planned: kills %v, %d successes", kills, ok)
	}
	for i := range 12 {
		if c := work(0, fmt.Sprintf("after-%d", i)); !checkEnded(t, c, strconv.Quote(c.id)) {
			t.Errorf("after the chaos: %+v %v", c.res, c.err)
		}
	}
	for _, p := range procTree(sb.PluginPID()) {
		seen[p] = true
	}
	h.Close()
	for p := range seen {
		waitDead(t, p)
	}
	emptyDir(t, tmp)
	settleFDs(t, baseFDs)
}

// Tier 2 sessions for real: six callers each keep a stateful docker
// session busy while session containers are killed (docker kill) and, once,
// the docker plugin. Each stateful call appends its id to a list the
// session's interpreter keeps and returns the list, so a call that ran twice
// would show up in it twice. Every call ends with its result or an error
// that says what happened; a call after a death runs in a reopened session
// that says state_lost; when the chaos stops every session serves; after
// the sessions close and the host closes, no container of the test's users
// is left.
func TestChaosDockerSessionsKilledUnderLoad(t *testing.T) {
	const callers = 6
	users := make([]string, callers)
	for i := range users {
		users[i] = testUser(fmt.Sprintf("orqtest-chaos%d-", i))
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	h, sb := dockerHost(t, "", "", users...)
	ctx := context.Background()
	plugins := []int{}
	ids := make([]string, callers)
	for i, u := range users {
		open, err := sb.Open(ctx, shared.OpenRequest{UserID: u})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = open.SessionID
	}
	const body = "try:\n    seen\nexcept NameError:\n    seen = []\nseen.append(args['id'])\nreturn seen"
	// lists[c] is what caller c's session has run since it was last
	// (re)opened, as the caller expects it.
	// A call that failed may or may not have run before it failed (its
	// result was lost with the plugin, say): failed[c] holds those ids,
	// which the list may hold once but which are not expected in it.
	lists := make([][]string, callers)
	failed := make([]map[string]bool, callers)
	for c := range failed {
		failed[c] = map[string]bool{}
	}
	work := func(c int, id string) chaosCall {
		start := time.Now()
		res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: body, Args: json.RawMessage(fmt.Sprintf(`{"id": %q}`, id)),
			SessionID: ids[c], UserID: users[c], Stateful: true})
		call := chaosCall{id: id, res: res, err: err, dur: time.Since(start)}
		if err != nil || !res.Success {
			failed[c][id] = true
			return call
		}
		var got []string
		if err := json.Unmarshal(res.Output, &got); err != nil {
			t.Errorf("call %s: output %s", id, res.Output)
			return call
		}
		if res.StateLost {
			lists[c] = nil
		}
		once := map[string]bool{}
		for _, g := range got {
			if once[g] {
				t.Errorf("call %s: call %s ran twice in the session: %v", id, g, got)
			}
			once[g] = true
		}
		sure := func(l []string) []string {
			return slices.DeleteFunc(slices.Clone(l), func(x string) bool { return failed[c][x] })
		}
		if want := sure(append(slices.Clone(lists[c]), id)); !slices.Equal(sure(got), want) {
			// After a death that this caller's calls did not see (the
			// container died between two calls) the list starts again,
			// and the result must say so.
			t.Errorf("call %s: the session has run %v, want %v (state_lost %v)", id, got, want, res.StateLost)
		}
		lists[c] = got
		return call
	}
	kills := map[string]int{}
	calls := chaosCallers(t, callers, 15, 8, time.Second, 5*time.Minute, work, func(round int) {
		if round == 4 {
			if pid := sb.PluginPID(); pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				plugins = append(plugins, pid)
				kills["plugin"]++
			}
			return
		}
		u := users[rand.IntN(callers)]
		if ctrs := containers(t, dockerUserLabel+"="+u); len(ctrs) > 0 {
			if exec.Command("docker", "kill", ctrs[0]).Run() == nil {
				kills["container"]++
			}
		}
	})
	ok, lost := 0, 0
	for _, c := range calls {
		if checkEnded(t, c, "") {
			ok++
			if c.res.StateLost {
				lost++
			}
		}
	}
	t.Logf("%d calls: %d succeeded (%d with state_lost); kills %v; %d launches", len(calls), ok, lost, kills, sb.Launches())
	if kills["container"] == 0 || kills["plugin"] == 0 || ok == 0 || lost == 0 {
		t.Fatalf("the chaos did not happen as planned: kills %v, %d successes, %d state_lost", kills, ok, lost)
	}
	for c := range callers {
		if r := work(c, fmt.Sprintf("after-%d", c)); !checkEnded(t, r, "") {
			t.Errorf("session %d after the chaos: %+v %v", c, r.res, r.err)
		}
	}
	for _, id := range ids {
		if err := sb.CloseSession(ctx, id); err != nil && !errors.Is(err, shared.ErrNotFound) {
			t.Errorf("close %s: %v", id, err)
		}
	}
	plugins = append(plugins, sb.PluginPID())
	h.Close()
	for _, pid := range plugins {
		waitDead(t, pid)
	}
	for _, u := range users {
		waitContainers(t, dockerUserLabel+"="+u, 0, 30*time.Second)
	}
	emptyDir(t, tmp)
}
