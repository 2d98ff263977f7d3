package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// TestExecuteBatch: results come back in the batch's order whatever order
// they finish in, at most Concurrency run at once, OnResult sees each as it
// ends, and a request that cannot run fails alone.
func TestExecuteBatch(t *testing.T) {
	h := newHost(t, `
policy "default" {
  allowed_imports = ["time"]
  max_concurrency = 8
}
sandbox "a" { plugin = "subprocess" }
`)
	sb := defaultSandbox(t, h)
	var reqs []shared.ExecuteRequest
	for i := 0; i < 12; i++ {
		// Earlier requests sleep longer, so they finish after later ones.
		reqs = append(reqs, shared.ExecuteRequest{
			Code: fmt.Sprintf("import time\ntime.sleep(%.2f)\nreturn args['i'] * 10", 0.05*float64(12-i)),
			Args: []byte(`{"i": ` + strconv.Itoa(i) + `}`),
		})
	}
	reqs[3].Args = []byte(`[1]`)         // not an object: this one alone fails
	reqs[5].Code = "import os\nreturn 1" // rejected by validation: a result
	var mu sync.Mutex
	var order []int
	out := sb.ExecuteBatch(context.Background(), reqs, BatchOptions{Concurrency: 3, OnResult: func(r BatchResult) {
		mu.Lock()
		order = append(order, r.Index)
		mu.Unlock()
	}})
	if len(out) != len(reqs) || len(order) != len(reqs) {
		t.Fatalf("%d results, %d callbacks for %d requests", len(out), len(order), len(reqs))
	}
	for i, r := range out {
		switch {
		case r.Index != i:
			t.Errorf("result %d has index %d", i, r.Index)
		case i == 3:
			var fe *shared.FieldError
			if !errors.As(r.Err, &fe) || fe.Field != "args" {
				t.Errorf("request 3 (args [1]): %v, want a FieldError on args", r.Err)
			}
		case i == 5:
			if r.Err != nil || r.Result.ErrorKind != shared.KindValidation {
				t.Errorf("request 5 (import os): %v %+v, want a validation result", r.Err, r.Result)
			}
		case r.Err != nil || !r.Result.Success || string(r.Result.Output) != strconv.Itoa(i*10):
			t.Errorf("request %d: %v %+v", i, r.Err, r.Result)
		}
	}
	inOrder := true
	for i := range order {
		inOrder = inOrder && order[i] == i
	}
	if inOrder {
		t.Errorf("OnResult saw the results in the batch's order %v; the later, shorter ones should finish first", order)
	}
	if p := sb.PeakConcurrency(); p > 3 {
		t.Errorf("peak %d executions in flight, Concurrency was 3", p)
	}
}

// TestExecuteBatchCancel: once ctx ends, the requests not started carry its
// error and are not run.
func TestExecuteBatchCancel(t *testing.T) {
	h := newHost(t, `
policy "default" { allowed_imports = ["time"] }
sandbox "a" { plugin = "subprocess" }
`)
	sb := defaultSandbox(t, h)
	reqs := make([]shared.ExecuteRequest, 20)
	for i := range reqs {
		reqs[i] = shared.ExecuteRequest{Code: "return 1"}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := errors.New("enough")
	// With one in flight, the first result cancels the batch before the
	// second request is taken.
	out := sb.ExecuteBatch(ctx, reqs, BatchOptions{Concurrency: 1, OnResult: func(BatchResult) { cancel(stop) }})
	var ran, notRun int
	for _, r := range out {
		switch {
		case r.Err == nil && r.Result.Success:
			ran++
		case errors.Is(r.Err, stop):
			notRun++
		default:
			t.Errorf("result %d: %v %+v", r.Index, r.Err, r.Result)
		}
	}
	if ran != 1 || notRun != len(reqs)-1 {
		t.Errorf("%d ran, %d not run (the cancel cause) of %d; want 1 and the rest", ran, notRun, len(reqs))
	}
}
