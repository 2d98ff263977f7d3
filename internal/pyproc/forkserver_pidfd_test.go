package pyproc_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/procfs"
	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// childrenOf lists the processes whose parent is ppid, living and zombie.
func childrenOf(t *testing.T, ppid int) (living, zombies []int) {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procfs.ReadStat(pid)
		if err != nil || st.PPID != ppid {
			continue
		}
		if st.Gone() {
			zombies = append(zombies, pid)
		} else {
			living = append(living, pid)
		}
	}
	return living, zombies
}

// Both ways a zygote keeps its children — by pidfd, and by pid as where
// pidfd_open is ENOSYS (gVisor's Sentry; forced here with NoPidfds) — in
// both loops (C and Python): results, a runaway call killed at its wall
// clock (and the next call works), the memory limit, an outside kill, and
// every child reaped (no zombie, no child beyond the pool).
func TestForkServerWithAndWithoutPidfds(t *testing.T) {
	rules := json.RawMessage(validator.RulesJSON())
	for _, pidfds := range []bool{true, false} {
		t.Run("pidfds="+strconv.FormatBool(pidfds), func(t *testing.T) {
			zygoteLoopsWith(t, runner.Program(), rules, pyproc.ForkServerOptions{NoPidfds: !pidfds}, func(t *testing.T, fs *pyproc.ForkServer) {
				if fs.PIDFDs() != pidfds {
					t.Fatalf("the zygote keeps its children by pidfd: %v, want %v", fs.PIDFDs(), pidfds)
				}
				ctx := context.Background()
				run := func(code string, timeout time.Duration, mem int) shared.ExecutionResult {
					t.Helper()
					res, err := fs.Run(ctx, pyproc.Job{Request: runner.Request{Code: code, Rules: rules},
						Limits: shared.Resolved{Timeout: timeout, MemoryMB: mem, MaxOutputBytes: 1 << 16}})
					if err != nil {
						t.Fatalf("%q: %v", code, err)
					}
					return res
				}
				for i := range 10 {
					if res := run("return 6*7", 20*time.Second, 128); string(res.Output) != "42" {
						t.Fatalf("call %d: %+v", i, res)
					}
				}
				start := time.Now()
				if res := run("while True:\n    pass", 300*time.Millisecond, 128); res.ErrorKind != shared.KindTimeout {
					t.Fatalf("runaway: %+v, want a timeout", res)
				}
				t.Logf("runaway with a 300 ms wall clock returned after %v", time.Since(start))
				if res := run("return 1", 20*time.Second, 128); string(res.Output) != "1" {
					t.Fatalf("the call after the runaway: %+v", res)
				}
				if res := run("x = b'a' * (400 * 1024 * 1024)\nreturn len(x)", 20*time.Second, 128); res.ErrorKind != shared.KindMemory {
					t.Fatalf("400 MB under a 128 MB limit: %+v, want a memory error", res)
				}
				if res := run("return 1/0", 20*time.Second, 128); res.ErrorKind != shared.KindRuntime {
					t.Fatalf("1/0: %+v, want a runtime error", res)
				}
				outsideKill(t, fs, rules)

				// Every child is reaped: once the last exits are reported,
				// the zygote has its idle pool and no zombie.
				deadline := time.Now().Add(10 * time.Second)
				for {
					living, zombies := childrenOf(t, fs.PID())
					if len(zombies) == 0 && len(living) <= 2 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the zygote's children: living %v (pool 2), zombies %v", living, zombies)
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		})
	}
}

// outsideKill SIGKILLs a running child from outside the zygote: the call
// reports it as killed from outside.
func outsideKill(t *testing.T, fs *pyproc.ForkServer, rules json.RawMessage) {
	t.Helper()
	var mu sync.Mutex
	pid := 0
	var once sync.Once
	res, err := fs.Run(context.Background(), pyproc.Job{
		Request: runner.Request{Code: "print('running', flush=True)\nwhile True:\n    pass", Rules: rules},
		Limits:  shared.Resolved{Timeout: 30 * time.Second, MemoryMB: 128, MaxOutputBytes: 1 << 16},
		OnStart: func(p int, _ string) { mu.Lock(); pid = p; mu.Unlock() },
		OnOutput: func(stream string, _ []byte) {
			if stream == shared.StreamStdout {
				once.Do(func() { mu.Lock(); _ = syscall.Kill(pid, syscall.SIGKILL); mu.Unlock() })
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ErrorKind != shared.KindKilled || !strings.Contains(res.Error, "from outside the sandbox") {
		t.Fatalf("a child killed from outside: %s %q, want %s from outside", res.ErrorKind, res.Error, shared.KindKilled)
	}
}

// A zygote without pidfds signals only a child it has not reaped: a kill
// message naming any other pid (a process that is not its child, its own,
// its parent's, a child it already reaped) kills nothing, and the zygote
// goes on serving.
func TestZygoteKillsOnlyItsUnreapedChildren(t *testing.T) {
	rules := json.RawMessage(validator.RulesJSON())
	zygoteLoopsWith(t, runner.Program(), rules, pyproc.ForkServerOptions{NoPidfds: true}, func(t *testing.T, fs *pyproc.ForkServer) {
		bystander := exec.Command("sleep", "60")
		if err := bystander.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = bystander.Process.Kill(); _ = bystander.Wait() }()
		// A child that ran and was reaped (its exit reported: Run of a
		// timed-out call waits for it).
		var reaped int
		res, err := fs.Run(context.Background(), pyproc.Job{
			Request: runner.Request{Code: "while True:\n    pass", Rules: rules},
			Limits:  shared.Resolved{Timeout: 200 * time.Millisecond, MemoryMB: 128, MaxOutputBytes: 1 << 16},
			OnStart: func(p int, _ string) { reaped = p },
		})
		if err != nil || res.ErrorKind != shared.KindTimeout {
			t.Fatalf("runaway: %+v %v", res, err)
		}
		for _, pid := range []int{bystander.Process.Pid, os.Getpid(), fs.PID(), reaped} {
			fs.SendKill(pid)
		}
		res, err = fs.Run(context.Background(), pyproc.Job{
			Request: runner.Request{Code: "return 5", Rules: rules},
			Limits:  shared.Resolved{Timeout: 20 * time.Second, MemoryMB: 128, MaxOutputBytes: 1 << 16},
		})
		if err != nil || string(res.Output) != "5" {
			t.Fatalf("a call after the kill messages: %+v %v", res, err)
		}
		if st, err := procfs.ReadStat(bystander.Process.Pid); err != nil || st.Gone() {
			t.Fatalf("the bystander %d was killed by a kill message naming it: %+v %v", bystander.Process.Pid, st, err)
		}
		if !fs.Alive() {
			t.Fatal("the zygote died of a kill message naming itself")
		}
	})
}
