package pyproc_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// forkServerStarter returns a start function of fork-servers with pool
// idle children each, sealed as the probe says this machine can; the test
// skips without the interpreter.
func forkServerStarter(t *testing.T, pool int) func() (*pyproc.ForkServer, error) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skip(err)
	}
	s, err := pyproc.Probe(context.Background(), runner.Argv(python), nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rules := json.RawMessage(validator.RulesJSON())
	return func() (*pyproc.ForkServer, error) {
		return pyproc.StartForkServer(runner.ForkServerArgv(python), runner.ForkServerConfig{Seal: s.Seal(nil), Rules: rules, Pool: pool}, pyproc.ForkServerOptions{})
	}
}

// TestPoolKeysAndBound: Get starts a fork-server once per (name, key),
// starts a new one when the key changes or the old one died, reports a
// failed start, and closes the least recently used beyond Max.
func TestPoolKeysAndBound(t *testing.T) {
	starts := 0
	base := forkServerStarter(t, 1)
	start := func() (*pyproc.ForkServer, error) {
		starts++
		return base()
	}
	restarted := 0
	p := &pyproc.Pool{Max: 2, OnRestart: func(string, *pyproc.ForkServer) { restarted++ }}
	defer p.Close()
	a1, err := p.Get("a", "k1", start)
	if err != nil {
		t.Fatal(err)
	}
	if a2, _ := p.Get("a", "k1", start); a2 != a1 || starts != 1 {
		t.Fatalf("same name and key: %d starts", starts)
	}
	a3, _ := p.Get("a", "k2", start)
	if a3 == a1 || starts != 2 {
		t.Fatalf("a new key did not start a new fork-server (%d starts)", starts)
	}
	a3.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for a3.Alive() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if a4, _ := p.Get("a", "k2", start); a4 == a3 || restarted != 1 {
		t.Fatalf("a dead fork-server was not replaced (restarts %d)", restarted)
	}
	if _, err := p.Get("b", "k", func() (*pyproc.ForkServer, error) { return nil, errors.New("boom") }); err == nil {
		t.Fatal("a failed start was not reported")
	}
	if _, err := p.Get("b", "k", start); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get("c", "k", start); err != nil { // evicts a
		t.Fatal(err)
	}
	if p.Peek("a") != nil || p.Peek("b") == nil || p.Peek("c") == nil {
		t.Error("eviction beyond Max did not drop the least recently used name")
	}
}

// TestPoolEvictionDrains: a fork-server the pool evicts while a call runs
// on it is closed only after that call ended, and the call succeeds.
func TestPoolEvictionDrains(t *testing.T) {
	start := forkServerStarter(t, 1)
	p := &pyproc.Pool{Max: 1}
	defer p.Close()
	job := func(code string) pyproc.Job {
		return pyproc.Job{Request: runner.Request{Code: code, AllowedImports: []string{"time"}}, Limits: shared.Resolved{Timeout: 20 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 20}}
	}
	a, err := p.Get("a", "k", start)
	if err != nil {
		t.Fatal(err)
	}
	// The slow call is held mid-run: its output handler does not return
	// until the gate opens, so the child blocks on its full stdout pipe
	// (1 MiB written, more than a pipe holds) and the call cannot end.
	running, gate := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	defer release()
	var first sync.Once
	slowJob := job("print('running', flush=True)\nprint('x' * (1 << 20))\nreturn 'slow'")
	slowJob.Limits.MaxOutputBytes = 4 << 20
	slowJob.OnOutput = func(stream string, _ []byte) {
		if stream == shared.StreamStdout {
			first.Do(func() { close(running); <-gate })
		}
	}
	slow := make(chan error, 1)
	go func() {
		res, err := p.Run(context.Background(), "a", "k", start, slowJob)
		if err == nil && (!res.Success || string(res.Output) != `"slow"`) {
			err = errors.New(string(res.ErrorKind) + ": " + res.Error)
		}
		slow <- err
	}()
	select {
	case <-running: // the slow call is running on a
	case err := <-slow:
		t.Fatalf("the slow call ended before it was held: %v", err)
	}
	res, err := p.Run(context.Background(), "b", "k", start, job("return 2"))
	if err != nil || !res.Success {
		t.Fatalf("b: %+v %v", res, err)
	}
	if p.Peek("a") != nil {
		t.Error("a was not evicted beyond Max = 1")
	}
	if !a.Alive() {
		t.Error("the evicted fork-server was closed while a call ran on it")
	}
	release()
	if err := <-slow; err != nil {
		t.Errorf("the call on the evicted fork-server: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if a.Alive() {
		t.Error("the evicted fork-server outlived its last call")
	}
}

// TestPoolCallRightAfterZygoteKilled: a call that arrives right after its
// fork-server was SIGKILLed runs on a new one and succeeds (its request
// reached no child: none is taken from a dead zygote); a zygote that never
// stays up fails the call with ErrUnavailable, not ErrNotRun (the plugin
// is fine: the host must not resend the call to a new plugin process).
func TestPoolCallRightAfterZygoteKilled(t *testing.T) {
	start := forkServerStarter(t, 2)
	p := &pyproc.Pool{Max: 1}
	defer p.Close()
	job := pyproc.Job{Request: runner.Request{Code: "return 7"}, Limits: shared.Resolved{Timeout: 20 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 20}}
	for i := range 10 {
		fs, err := p.Get("a", "k", start)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Run(context.Background(), "a", "k", start, job); err != nil { // its idle children are ready
			t.Fatal(err)
		}
		if err := syscall.Kill(fs.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Its control socket has reached end-of-file (so the pool would
		// restart it), but its idle children may still be there, dying.
		for deadline := time.Now().Add(5 * time.Second); fs.Alive() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		res, err := p.Run(context.Background(), "a", "k", start, job)
		if err != nil || !res.Success || string(res.Output) != "7" {
			t.Fatalf("round %d: the call right after the zygote's death: %+v %v", i, res, err)
		}
		if p.Peek("a") == fs {
			t.Fatalf("round %d: the call ran on the killed zygote", i)
		}
	}

	// A zygote that dies as soon as it is up, every time.
	dying := func() (*pyproc.ForkServer, error) {
		fs, err := start()
		if err == nil {
			_ = syscall.Kill(fs.PID(), syscall.SIGKILL)
			for deadline := time.Now().Add(5 * time.Second); fs.Alive() && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
		}
		return fs, err
	}
	_, err := p.Run(context.Background(), "b", "k", dying, job)
	if !errors.Is(err, shared.ErrUnavailable) || errors.Is(err, shared.ErrNotRun) {
		t.Errorf("always-dying zygote: %v, want ErrUnavailable and not ErrNotRun", err)
	}
}
