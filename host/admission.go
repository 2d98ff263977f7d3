package host

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/orqest/sandbox/shared"
)

// admission caps the executions of one sandbox in flight (max_concurrency)
// and the callers waiting for one of those slots (max_queue). Every
// execution is a process or a container's child, so without a cap a burst
// of callers could exhaust the machine's process table.
type admission struct {
	slots    chan struct{}
	queued   atomic.Int64
	maxQueue int64
	inFlight atomic.Int64
	peak     atomic.Int64
}

func newAdmission(maxConcurrency, maxQueue int) *admission {
	if maxConcurrency <= 0 {
		maxConcurrency = DefaultMaxConcurrency()
	}
	return &admission{slots: make(chan struct{}, maxConcurrency), maxQueue: int64(maxQueue)}
}

// acquire takes a slot, waiting at most wait (and while ctx lives). The
// error wraps shared.ErrUnavailable when the queue is full or the wait ran
// out, ctx's error when ctx ended. release gives the slot back.
func (a *admission) acquire(ctx context.Context, sandbox string, wait time.Duration) (release func(), err error) {
	select {
	case a.slots <- struct{}{}:
		return a.admitted(), nil
	default:
	}
	if n := a.queued.Add(1); n > a.maxQueue {
		a.queued.Add(-1)
		return nil, fmt.Errorf("sandbox %q is busy: %d executions running (max_concurrency) and %d callers already waiting (max_queue); retry later or raise them in the policy: %w",
			sandbox, cap(a.slots), a.maxQueue, shared.ErrUnavailable)
	}
	defer a.queued.Add(-1)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return a.admitted(), nil
	case <-t.C:
		return nil, fmt.Errorf("sandbox %q is busy: no free slot of %d (max_concurrency) within the call's timeout of %s; retry later or raise max_concurrency in the policy: %w",
			sandbox, cap(a.slots), wait, shared.ErrUnavailable)
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free slot of sandbox %q: %w", sandbox, ctx.Err())
	}
}

func (a *admission) admitted() func() {
	n := a.inFlight.Add(1)
	for {
		p := a.peak.Load()
		if n <= p || a.peak.CompareAndSwap(p, n) {
			break
		}
	}
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			a.inFlight.Add(-1)
			<-a.slots
		}
	}
}
