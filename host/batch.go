package host

import (
	"context"
	"iter"
	"sync"

	"github.com/orqest/sandbox/shared"
)

// BatchOptions tune ExecuteBatch and ExecuteEach.
type BatchOptions struct {
	// Concurrency is how many executions of the batch are in flight at once.
	// 0 means the sandbox's max_concurrency (every slot the policy allows);
	// more than that is capped to it, since the rest would only queue.
	Concurrency int
	// OnResult, when set, is called with each result as soon as its
	// execution ends (so in the order they finish, not the batch's), one
	// call at a time.
	OnResult func(BatchResult)
}

// BatchResult is the outcome of one request of a batch.
type BatchResult struct {
	// Index is the request's position in the batch, from 0.
	Index int
	// Result is what Execute returned; meaningful when Err is nil.
	Result shared.ExecutionResult
	// Err is Execute's infrastructure error for this request (a policy
	// refusal, a plugin that died), or the error the sequence yielded in
	// its place (a malformed line of a batch file). It fails this request
	// only: the rest of the batch runs.
	Err error
}

// ExecuteBatch runs every request of reqs through Execute, at most
// opts.Concurrency at a time, on the sandbox's one plugin (a fork-server
// tier keeps its zygote warm across the batch), and returns the results in
// the order of reqs. An evaluator that tests many candidate bodies calls
// this once instead of once per candidate. When ctx ends, the requests not
// yet started are not run: their results carry ctx's error.
func (s *Sandbox) ExecuteBatch(ctx context.Context, reqs []shared.ExecuteRequest, opts BatchOptions) []BatchResult {
	out := make([]BatchResult, len(reqs))
	done := make([]bool, len(reqs))
	user := opts.OnResult
	opts.OnResult = func(r BatchResult) {
		out[r.Index], done[r.Index] = r, true
		if user != nil {
			user(r)
		}
	}
	s.ExecuteEach(ctx, func(yield func(shared.ExecuteRequest, error) bool) {
		for _, r := range reqs {
			if !yield(r, nil) {
				return
			}
		}
	}, opts)
	for i := range out {
		if !done[i] { // ctx ended before it started
			out[i] = BatchResult{Index: i, Err: context.Cause(ctx)}
		}
	}
	return out
}

// ExecuteEach runs the requests reqs yields, as ExecuteBatch does, taking
// the next one only when a slot is free: reqs may block (a caller streaming
// candidates on a pipe). Each result goes to opts.OnResult as it ends; an
// error reqs yields in place of a request becomes that index's result. It
// returns when reqs is exhausted and every execution it started has ended,
// or when ctx ended (the requests not yet taken are left in reqs).
func (s *Sandbox) ExecuteEach(ctx context.Context, reqs iter.Seq2[shared.ExecuteRequest, error], opts BatchOptions) {
	n := opts.Concurrency
	if limit := cap(s.admit.slots); n <= 0 || n > limit {
		n = limit
	}
	n = max(n, 1)
	var (
		deliver sync.Mutex
		wg      sync.WaitGroup
	)
	emit := func(r BatchResult) {
		if opts.OnResult == nil {
			return
		}
		deliver.Lock()
		defer deliver.Unlock()
		opts.OnResult(r)
	}
	slots := make(chan struct{}, n)
	next, stop := iter.Pull2(reqs)
	defer stop()
	for i := 0; ; i++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		if ctx.Err() != nil { // both were ready and the select took the slot
			break
		}
		req, err, ok := next()
		if !ok {
			break
		}
		if err != nil {
			<-slots
			emit(BatchResult{Index: i, Err: err})
			continue
		}
		wg.Add(1)
		go func(i int, req shared.ExecuteRequest) {
			defer wg.Done()
			defer func() { <-slots }()
			res, err := s.Execute(ctx, req)
			emit(BatchResult{Index: i, Result: res, Err: err})
		}(i, req)
	}
	wg.Wait()
}
