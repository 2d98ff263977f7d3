package inprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
)

// newConfigured returns a Backend configured with unsafe = true.
func newConfigured(t testing.TB, cfg string) *Backend {
	t.Helper()
	b := NewBackend(hclog.NewNullLogger())
	if _, err := b.Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(cfg), Unsafe: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return b
}

func execute(t testing.TB, b *Backend, req shared.ExecuteRequest) shared.ExecutionResult {
	t.Helper()
	resp, err := b.Execute(context.Background(), req)
	if err != nil {
		t.Fatalf("Execute(%q): %v", req.Code, err)
	}
	return resp.Result
}

func TestInfo(t *testing.T) {
	info, err := NewBackend(nil).Info(context.Background(), shared.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "inprocess" || info.Tier != 0 {
		t.Errorf("Info = %q tier %d, want inprocess tier 0", info.Name, info.Tier)
	}
	for _, c := range []shared.Capability{shared.CapProcessIsolation, shared.CapNetworkIsolation,
		shared.CapFilesystemIsolation, shared.CapFreshProcess, shared.CapCPULimit} {
		if info.Has(c) {
			t.Errorf("tier 0 declares %q, which it does not enforce", c)
		}
	}
	if !info.Has(shared.CapWallClockTimeout) || !info.Has(shared.CapOutputLimit) {
		t.Errorf("capabilities %v, want wall_clock_timeout and output_limit", info.Capabilities)
	}
	// The test process has no RLIMIT_AS, so no memory_limit either.
	if processMemoryLimitMB() == 0 && info.Has(shared.CapMemoryLimit) {
		t.Error("memory_limit declared without an RLIMIT_AS in force")
	}
}

// TestUnsafeRefusal: without unsafe = true the backend refuses to start,
// with ErrFailedPrecondition and a message that says how to opt in, and
// runs nothing.
func TestUnsafeRefusal(t *testing.T) {
	ctx := context.Background()
	b := NewBackend(nil)
	_, err := b.Configure(ctx, shared.ConfigureRequest{})
	if !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Fatalf("Configure(unsafe=false) = %v, want ErrFailedPrecondition", err)
	}
	if !strings.Contains(err.Error(), "unsafe = true") {
		t.Errorf("refusal does not say how to opt in: %v", err)
	}
	if _, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1"}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("Execute on an unconfigured backend = %v, want ErrFailedPrecondition", err)
	}
	if _, err := b.Validate(ctx, shared.ValidateRequest{Code: "return 1"}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("Validate on an unconfigured backend = %v, want ErrFailedPrecondition", err)
	}
	// Opting in, then out again, refuses again.
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Unsafe: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Configure(ctx, shared.ConfigureRequest{}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Fatalf("second Configure(unsafe=false) = %v", err)
	}
	if _, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1"}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("Execute after opting out = %v, want ErrFailedPrecondition", err)
	}
}

func TestConfigureRejectsBadConfig(t *testing.T) {
	for _, cfg := range []string{`{"nope": 1}`, `{"grace_ms": -1}`, `[1]`} {
		_, err := NewBackend(nil).Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(cfg), Unsafe: true})
		if !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("Configure(%s) = %v, want ErrInvalidArgument", cfg, err)
		}
	}
	// memory_limit_mb caps the whole process: never in a test process.
	_, err := NewBackend(nil).Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(`{"memory_limit_mb": 4096}`), Unsafe: true})
	var fe *shared.FieldError
	if !errors.Is(err, shared.ErrFailedPrecondition) || !errors.As(err, &fe) || fe.Field != "memory_limit_mb" {
		t.Errorf("memory_limit_mb outside the plugin binary = %v, want ErrFailedPrecondition on memory_limit_mb", err)
	}
	// A refused attribute is named (the host points at it in the policy).
	for cfg, field := range map[string]string{`{"grace_ms": -1}`: "grace_ms", `{"memory_limit_mb": -1}`: "memory_limit_mb"} {
		_, err := NewBackend(nil).Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(cfg), Unsafe: true})
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("Configure(%s) = %v, want a FieldError on %s", cfg, err, field)
		}
	}
}

// TestTimeoutLatency measures how long after its deadline a pure-Python
// loop, a sleep and a loop that catches the first interrupt return.
func TestTimeoutLatency(t *testing.T) {
	b := newConfigured(t, "")
	const timeout = 200 * time.Millisecond
	for _, tc := range []struct{ name, code string }{
		{"busy_loop", "while True:\n    pass"},
		{"sleep", "import time\ntime.sleep(30)"},
		{"catches_once", "try:\n    while True:\n        pass\nexcept BaseException:\n    return 'caught'"},
		{"catches_in_finally", "try:\n    while True:\n        pass\nfinally:\n    x = 0\n    for i in range(10):\n        x += i"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res := execute(t, b, shared.ExecuteRequest{Code: tc.code, Timeout: timeout, AllowedImports: []string{"time"}})
			over := time.Since(start) - timeout
			if res.Success || res.ErrorKind != shared.KindTimeout {
				t.Fatalf("want error_kind timeout, got success=%v %q: %s", res.Success, res.ErrorKind, res.Error)
			}
			t.Logf("%s: returned %v after the deadline", tc.name, over.Round(10*time.Microsecond))
			// Half the grace (1 s): a call the interrupt did not end runs
			// on to the grace. A quiet machine returns within a few ms; the
			// bound leaves room for a loaded one.
			if over > DefaultGrace/2 {
				t.Errorf("returned %v after the deadline, want well under %v (half the grace)", over, DefaultGrace/2)
			}
		})
	}
	res := execute(t, b, shared.ExecuteRequest{Code: "return 1 + 1"})
	if !res.Success || string(res.Output) != "2" {
		t.Fatalf("after timeouts: %+v", res)
	}
}

// TestNoStateLeaks: globals, stdout and names of one execution are not
// visible to the next, on the one shared interpreter.
func TestNoStateLeaks(t *testing.T) {
	b := newConfigured(t, "")
	res := execute(t, b, shared.ExecuteRequest{Code: "secret = 41\ndef helper():\n    return secret\nimport math\nprint('first')\nreturn helper() + 1", AllowedImports: []string{"math"}})
	if !res.Success || string(res.Output) != "42" || res.Stdout != "first\n" {
		t.Fatalf("first call: %+v", res)
	}
	for _, code := range []string{"return secret", "return helper()", "return math.pi"} {
		res = execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: []string{"math"}})
		if res.Success || res.ErrorKind != shared.KindRuntime || !strings.Contains(res.Error, "NameError") {
			t.Errorf("%q after a call that defined it: want a NameError, got %+v", code, res)
		}
		if res.Stdout != "" {
			t.Errorf("%q: stdout of the previous call leaked: %q", code, res.Stdout)
		}
	}
	// The runner's own namespace is not reachable.
	for _, code := range []string{"return _orq_execute", "return _orq_t0_rules", "return __name__"} {
		res = execute(t, b, shared.ExecuteRequest{Code: code})
		if res.Success && code != "return __name__" {
			t.Errorf("%q reached the runner namespace: %s", code, res.Output)
		}
		if code == "return __name__" && res.Success && string(res.Output) != `"__sandbox__"` {
			t.Errorf("__name__ = %s", res.Output)
		}
	}
}

// TestConcurrentQueue: concurrent calls queue on the interpreter thread and
// each gets its own output.
func TestConcurrentQueue(t *testing.T) {
	b := newConfigured(t, "")
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res := execute(t, b, shared.ExecuteRequest{Code: "print(args['i'])\nreturn args['i'] * 2", Args: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))})
			if !res.Success || string(res.Output) != fmt.Sprint(i*2) || res.Stdout != fmt.Sprintf("%d\n", i) {
				t.Errorf("call %d: %+v", i, res)
			}
		}(i)
	}
	wg.Wait()
}

// TestCancelWhileQueued: a caller whose context ends while it waits for the
// interpreter leaves the queue without running.
func TestCancelWhileQueued(t *testing.T) {
	b := newConfigured(t, "")
	go func() {
		_, _ = b.Execute(context.Background(), shared.ExecuteRequest{Code: "while True:\n    pass", Timeout: 300 * time.Millisecond})
	}()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued call with an expiring context = %v", err)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("a queued call took %v to give up", d)
	}
}

func TestStderrAndUnicode(t *testing.T) {
	b := newConfigured(t, "")
	res := execute(t, b, shared.ExecuteRequest{Code: "print('\\ud800 é')\nreturn '\\ud800'"})
	if !res.Success {
		t.Fatalf("%+v", res)
	}
	if !strings.Contains(res.Stdout, "é") {
		t.Errorf("stdout %q", res.Stdout)
	}
}

// TestIsolatedConfig: the embedded interpreter runs in isolated mode, without
// site, without bytecode writing, on the system stdlib.
func TestIsolatedConfig(t *testing.T) {
	b := newConfigured(t, "")
	code := "import sys\nreturn [sys.flags.isolated, sys.flags.no_site, sys.flags.ignore_environment, sys.dont_write_bytecode, sys.prefix, sys.version_info[0], sys.version_info[1]]"
	res := execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: []string{"sys"}})
	if !res.Success {
		t.Skipf("policy does not let a test read sys here: %s", res.Error)
	}
	var got []any
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got[:4]) != "[1 1 1 true]" {
		t.Errorf("flags isolated, no_site, ignore_environment, dont_write_bytecode = %v, want [1 1 1 true]", got[:4])
	}
	t.Logf("embedded CPython %v.%v, prefix %v", got[5], got[6], got[4])
}
