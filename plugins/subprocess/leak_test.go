package subprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// childrenOf lists the processes whose parent is ppid.
func childrenOf(ppid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// killedOrGone reports whether pid can never run user code again: it is
// gone, a zombie, exiting (PF_EXITING in /proc/<pid>/stat), or has SIGKILL
// pending (SigPnd/ShdPnd in /proc/<pid>/status). These states only move
// forward (pending -> exiting -> zombie -> gone), and SIGKILL is dequeued
// just before PF_EXITING is set, so a few samples close that window.
func killedOrGone(pid int) (bool, string) {
	const pfExiting = 0x4
	const sigkillBit = 1 << (9 - 1)
	var last string
	for try := 0; try < 5; try++ {
		status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil {
			return true, ""
		}
		for _, line := range strings.Split(string(status), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "SigPnd" || k == "ShdPnd") {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&sigkillBit != 0 {
					return true, ""
				}
			}
		}
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return true, ""
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if i < 0 || len(f) < 7 {
			return false, "unreadable stat"
		}
		if f[0] == "Z" || f[0] == "X" {
			return true, ""
		}
		if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil && flags&pfExiting != 0 {
			return true, ""
		}
		last = "state " + f[0] + ", flags " + f[6]
		time.Sleep(time.Millisecond)
	}
	return false, last
}

// TestChildKilledWhenExecuteReturns: Execute returns once the response is
// in and the child has been sent SIGKILL, without waiting for the kernel
// to tear its address space down; at that point the child can never run
// again, and the zygote reaps it within 2 s.
func TestChildKilledWhenExecuteReturns(t *testing.T) {
	b := newTestBackend(t)
	var pid int
	b.onSpawn = func(p int, _ string) { pid = p }
	zpid := 0
	for i := 0; i < 50; i++ {
		code := "print('out', args['i'])\nreturn args['i']"
		if i%5 == 4 {
			code = "return 1/0"
		}
		resp, err := b.Execute(context.Background(), shared.ExecuteRequest{Code: code, Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		if ok, why := killedOrGone(pid); !ok {
			t.Fatalf("call %d: child %d may still run after Execute returned (%s)", i, pid, why)
		}
		if i%5 != 4 && (resp.Result.Stdout != fmt.Sprintf("out %d\n", i) || string(resp.Result.Output) != strconv.Itoa(i)) {
			t.Fatalf("call %d: incomplete capture: stdout %q output %s error %s", i, resp.Result.Stdout, resp.Result.Output, resp.Result.Error)
		}
		if zpid == 0 {
			zpid = zygotePID(t, b)
		}
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
			if slices.Contains(childrenOf(zpid), pid) == false {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("call %d: child %d not reaped within 2 s", i, pid)
			}
		}
	}
}

func tempEntries(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// This process's entries only (the backend runs in it and names its
	// directories orqest-<what>-<pid>-): other test packages running at
	// the same time make orqest-* entries of their own.
	mine := "-" + strconv.Itoa(os.Getpid()) + "-"
	m := map[string]bool{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "orqest-") && strings.Contains(e.Name(), mine) {
			m[e.Name()] = true
		}
	}
	return m
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

// TestNoLeaksMixedLoad runs 1,000 executions (10,000 with ORQEST_SOAK=1;
// the fork-server does them in well under a minute on an idle 2-core
// machine) from 8 concurrent callers, mixing successes, runtime errors,
// timeouts and memory kills. Afterwards: no child of the zygote left, no
// temporary file, no growth in the plugin's open descriptors; after
// Shutdown, nothing left in the zygote's process group.
func TestNoLeaksMixedLoad(t *testing.T) {
	n := 1000
	if os.Getenv("ORQEST_SOAK") != "" {
		n = 10000
	}
	b := newTestBackend(t)
	ran := map[int]bool{}
	var ranMu sync.Mutex
	b.onSpawn = func(pid int, _ string) {
		ranMu.Lock()
		ran[pid] = true
		ranMu.Unlock()
	}
	ctx := context.Background()
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 0"}), "0") // warm up
	zpid := zygotePID(t, b)
	poolFull(t, b) // the plugin holds two descriptors per ready child
	fdsBefore := openFDs(t)
	tmpBefore := tempEntries(t)

	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[shared.ErrorKind]int{}
	var failures []string
	start := time.Now()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				req := shared.ExecuteRequest{Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
				var want shared.ErrorKind
				switch {
				case i%50 == 0:
					req.Code, req.Timeout, want = "while True:\n    pass", 100*time.Millisecond, shared.KindTimeout
				case i%50 == 1:
					req.Code, req.MemoryMB, want = "x = ' ' * (2*1024**3)\nreturn len(x)", 64, shared.KindMemory
				case i%10 == 2:
					req.Code, want = "return args['i'] / 0", shared.KindRuntime
				default:
					req.Code, want = "print('x')\nreturn args['i'] * 2", shared.KindNone
				}
				resp, err := b.Execute(ctx, req)
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("%d: %v", i, err))
				case resp.Result.ErrorKind != want || (want == shared.KindNone && string(resp.Result.Output) != strconv.Itoa(i*2)):
					failures = append(failures, fmt.Sprintf("%d: kind %q (want %q) output %s error %s", i, resp.Result.ErrorKind, want, resp.Result.Output, resp.Result.Error))
				}
				counts[resp.Result.ErrorKind]++
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d executions, 8 callers: %v (%.0f/s); outcomes %v", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), counts)
	for i, f := range failures {
		if i == 10 {
			t.Errorf("... and %d more", len(failures)-10)
			break
		}
		t.Error(f)
	}

	// Every child that ran an execution was SIGKILLed (or had exited)
	// before Execute returned: what is still there of them right now is
	// dying or a zombie the zygote is about to reap, never a process that
	// can run; within 2 s all are reaped. What remains is the zygote's
	// small pool of idle, pre-forked children (pids recycle, so compare
	// with the pool's size too).
	ranMu.Lock()
	for _, k := range childrenOf(zpid) {
		if ok, why := killedOrGone(k); ran[k] && !ok {
			t.Errorf("child %d ran an execution and may still run (%s)", k, why)
		}
	}
	kids := childrenOf(zpid)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); kids = childrenOf(zpid) {
		left := 0
		for _, k := range kids {
			if ran[k] {
				left++
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, k := range kids {
		if ran[k] {
			t.Errorf("child %d ran an execution and was not reaped", k)
		}
	}
	ranMu.Unlock()
	if len(kids) > forkServerPool {
		t.Errorf("zygote %d has %d children (pool of %d): %v", zpid, len(kids), forkServerPool, kids)
	}
	if zygotePID(t, b) != zpid {
		t.Errorf("the zygote was restarted under load")
	}
	poolFull(t, b)
	after := openFDs(t) // the watches on killed children's pidfds end with their teardown
	for deadline := time.Now().Add(2 * time.Second); after > fdsBefore && time.Now().Before(deadline); after = openFDs(t) {
		time.Sleep(5 * time.Millisecond)
	}
	if after > fdsBefore {
		t.Errorf("open fds grew from %d to %d", fdsBefore, after)
	}
	for name := range tempEntries(t) {
		if !tmpBefore[name] {
			t.Errorf("temporary file left: %s", name)
		}
	}
	b.Shutdown()
	processGone(t, zpid)
}

// poolFull waits (up to 5 s) until the plugin holds a full pool of ready
// children, so that descriptor counts compare like with like.
func poolFull(t *testing.T, b *Backend) {
	t.Helper()
	fs := b.zygotes.Peek("")
	if fs == nil {
		return
	}
	for deadline := time.Now().Add(5 * time.Second); fs.Idle() < forkServerPool && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}
