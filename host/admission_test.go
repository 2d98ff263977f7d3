package host

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// Policy values are ceilings unless the policy raises them in ceiling {}.
func TestPolicyCeilings(t *testing.T) {
	cfg, diags := ParseConfig("/x/config.hcl", []byte(`
policy "default" {
  timeout   = "2s"
  memory_mb = 64
}
policy "roomy" {
  timeout   = "2s"
  memory_mb = 64
  ceiling {
    timeout          = "1m"
    memory_mb        = 512
    max_output_bytes = 8388608
  }
}
sandbox "a" { plugin = "subprocess" }
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	strict, _ := cfg.Policy("default")
	roomy, _ := cfg.Policy("roomy")
	for _, c := range []struct {
		p     Policy
		req   shared.ExecuteRequest
		field string // "" = allowed
	}{
		{strict, shared.ExecuteRequest{Timeout: 2 * time.Second, MemoryMB: 64}, ""},
		{strict, shared.ExecuteRequest{Timeout: 10 * time.Hour, MemoryMB: 64}, "timeout"},
		{strict, shared.ExecuteRequest{Timeout: time.Second, MemoryMB: 100000}, "memory_mb"},
		{strict, shared.ExecuteRequest{Timeout: time.Second, MemoryMB: 64, MaxOutputBytes: 1 << 30}, "max_output_bytes"},
		{roomy, shared.ExecuteRequest{Timeout: time.Minute, MemoryMB: 512, MaxOutputBytes: 8 << 20}, ""},
		{roomy, shared.ExecuteRequest{Timeout: 2 * time.Minute, MemoryMB: 64}, "timeout"},
		{roomy, shared.ExecuteRequest{Timeout: time.Second, MemoryMB: 513}, "memory_mb"},
	} {
		c.req.Code = "return 1"
		_, err := shared.Prepare(c.req, c.p.limits())
		var fe *shared.FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s %+v: refused: %v", c.p.Name, c.req, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, shared.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), "policy \""+c.p.Name+"\"'s ceiling") || !strings.Contains(err.Error(), "raise ceiling { "+c.field+" }")):
			t.Errorf("%s %+v: got %v, want a FieldError on %s naming the policy's ceiling", c.p.Name, c.req, err, c.field)
		}
	}
}

// A caller asking the CLI or the Go API for more than the policy is refused
// before anything runs.
func TestExecuteAboveCeilingRefused(t *testing.T) {
	h := newHost(t, `
policy "default" {
  timeout = "2s"
}
sandbox "a" { plugin = "subprocess" }
`)
	sb := defaultSandbox(t, h)
	_, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", Timeout: 10 * time.Hour})
	var fe *shared.FieldError
	if !errors.As(err, &fe) || fe.Field != "timeout" {
		t.Fatalf("Execute with a 10h timeout: %v, want a FieldError on timeout", err)
	}
}

// A burst of callers against max_concurrency = 4 never runs more than 4 at
// once; callers that cannot get a slot within their timeout fail cleanly
// (ErrUnavailable), and a full queue is refused at once.
func TestMaxConcurrency(t *testing.T) {
	h := newHost(t, `
policy "default" {
  allowed_imports = ["time"]
  timeout         = "3s"
  max_concurrency = 4
  max_queue       = 40
}
sandbox "a" { plugin = "subprocess" }
`)
	sb := defaultSandbox(t, h)
	ctx := context.Background()
	if res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1"}); err != nil || !res.Success {
		t.Fatalf("warm-up: %v %+v", err, res)
	}
	const callers = 64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, busy, full int
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "import time\ntime.sleep(0.4)\nreturn 1", Timeout: time.Second})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && res.Success:
				ok++
			case errors.Is(err, shared.ErrUnavailable) && strings.Contains(err.Error(), "max_queue"):
				full++
			case errors.Is(err, shared.ErrUnavailable) && strings.Contains(err.Error(), "within the call's timeout"):
				busy++
			default:
				t.Errorf("unexpected outcome: %v %+v", err, res)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d ran, %d timed out waiting, %d refused by a full queue; peak %d in flight", ok, busy, full, sb.PeakConcurrency())
	if p := sb.PeakConcurrency(); p > 4 || p < 1 {
		t.Errorf("peak concurrency %d, want 1..4", p)
	}
	if full != callers-4-40 {
		t.Errorf("%d refused by a full queue, want %d (64 callers, 4 slots, 40 queued)", full, callers-4-40)
	}
	if ok < 4 || busy == 0 {
		t.Errorf("%d ran and %d timed out waiting; want at least the first 4 to run and some waiters to time out", ok, busy)
	}
	if res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 2"}); err != nil || !res.Success {
		t.Fatalf("after the burst: %v %+v", err, res)
	}
}

// 500 callers at once against one tier-1 sandbox whose queue holds them
// all: every call runs (none is refused or times out waiting), never more
// than max_concurrency at a time.
func TestFiveHundredQueuedCalls(t *testing.T) {
	h := newHost(t, `
policy "default" {
  timeout         = "60s"
  max_concurrency = 4
  max_queue       = 600
}
sandbox "a" { plugin = "subprocess" }
`)
	sb := defaultSandbox(t, h)
	ctx := context.Background()
	const callers = 500
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return sum(range(1000))"})
			mu.Lock()
			defer mu.Unlock()
			if err == nil && res.Success && string(res.Output) == "499500" {
				ok++
			} else if err != nil {
				t.Errorf("%v", err)
			}
		}()
	}
	wg.Wait()
	if ok != callers {
		t.Errorf("%d of %d calls ran", ok, callers)
	}
	if p := sb.PeakConcurrency(); p > 4 {
		t.Errorf("peak %d in flight, max_concurrency 4", p)
	}
}

// The host resolves a request's limits once, with its policy: the plugin
// receives every limit set (the policy's where the request left one at
// zero) and records exactly those in the result.
func TestExecuteSendsResolvedLimits(t *testing.T) {
	h := newHost(t, `
policy "default" {
  timeout          = "3s"
  memory_mb        = 256
  max_output_bytes = 4096
}
sandbox "a" { plugin = "subprocess" }
`)
	sb := defaultSandbox(t, h)
	req, limits, err := sb.applyPolicy(shared.ExecuteRequest{Code: "return 1", Args: json.RawMessage(" null ")})
	if err != nil {
		t.Fatal(err)
	}
	want := shared.Limits{TimeoutMS: 3000, MemoryMB: 256, MaxOutputBytes: 4096}
	if req.Timeout != 3*time.Second || req.MemoryMB != 256 || req.MaxOutputBytes != 4096 || string(req.Args) != "{}" || limits != want {
		t.Fatalf("applyPolicy: %+v, limits %+v; want the policy's limits %+v and args {}", req, limits, want)
	}
	// What the caller sets, within the ceiling, wins.
	if req, _, err := sb.applyPolicy(shared.ExecuteRequest{Code: "return 1", Timeout: time.Second}); err != nil || req.Timeout != time.Second || req.MemoryMB != 256 {
		t.Fatalf("a request's own timeout: %+v, %v", req, err)
	}
	// The plugin records what it received: the resolved values, not its
	// own defaults (5s, 128 MB, 1 MiB).
	res, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1"})
	if err != nil || !res.Success || res.Limits != want {
		t.Fatalf("Execute: %+v, %v; want limits %+v", res, err, want)
	}
}
