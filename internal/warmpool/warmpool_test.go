package warmpool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type item struct {
	id      int
	dead    atomic.Bool
	stopped atomic.Bool
}

func (i *item) Dead() bool { return i.dead.Load() }

type fixture struct {
	mu      sync.Mutex
	stopped []*item
	next    int
}

func (f *fixture) stop(_ context.Context, it *item) error {
	it.stopped.Store(true)
	f.mu.Lock()
	f.stopped = append(f.stopped, it)
	f.mu.Unlock()
	return nil
}

func (f *fixture) start(delay time.Duration, err error) func(context.Context) (*item, error) {
	return func(ctx context.Context) (*item, error) {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		f.mu.Lock()
		f.next++
		it := &item{id: f.next}
		f.mu.Unlock()
		return it, nil
	}
}

func waitLen(t *testing.T, p *Pool[*item], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Len() != n {
		if time.Now().After(deadline) {
			t.Fatalf("pool holds %d items, want %d", p.Len(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestTakeRefillEvict(t *testing.T) {
	f := &fixture{}
	p := New(f.stop, nil)
	if _, ok := p.Take("u"); ok {
		t.Fatal("empty pool gave an item")
	}
	p.Refill("u", 1, time.Hour, time.Second, f.start(0, nil))
	p.Refill("u", 1, time.Hour, time.Second, f.start(0, nil)) // one per key
	p.Refill("v", 1, time.Hour, time.Second, f.start(0, nil)) // size 1: no room
	waitLen(t, p, 1)
	it, ok := p.Take("u")
	if !ok || it.id != 1 || it.stopped.Load() {
		t.Fatalf("Take = %+v %v", it, ok)
	}
	if _, ok := p.Take("u"); ok {
		t.Fatal("an item was taken twice")
	}
	// A dead item is stopped, not handed out.
	p.Refill("u", 1, time.Hour, time.Second, f.start(0, nil))
	waitLen(t, p, 1)
	p.mu.Lock()
	p.spares["u"].item.dead.Store(true)
	p.mu.Unlock()
	if _, ok := p.Take("u"); ok {
		t.Fatal("a dead item was handed out")
	}
	// Idle items are evicted after maxIdle.
	p.Refill("u", 1, 20*time.Millisecond, time.Second, f.start(0, nil))
	waitLen(t, p, 1)
	waitLen(t, p, 0)
	// The pool stops what it drops in the background: the count may trail
	// the pool's length by a moment.
	stopped := func() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.stopped) }
	for deadline := time.Now().Add(5 * time.Second); stopped() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := stopped(); n != 2 {
		t.Errorf("stopped %d items (dead + idle), want 2", n)
	}
}

func TestFailedStartFreesTheKey(t *testing.T) {
	f := &fixture{}
	p := New(f.stop, nil)
	p.Refill("u", 1, time.Hour, time.Second, f.start(0, errors.New("no")))
	p.refills.Wait()
	p.Refill("u", 1, time.Hour, time.Second, f.start(0, nil))
	waitLen(t, p, 1)
}

func TestDiscardAndDrain(t *testing.T) {
	f := &fixture{}
	p := New(f.stop, nil)
	p.Refill("a", 5, time.Hour, time.Second, f.start(0, nil))
	waitLen(t, p, 1)
	// b still starting when the configuration changes: it must not be kept.
	p.Refill("b", 5, time.Hour, time.Second, f.start(50*time.Millisecond, nil))
	p.Discard()
	p.refills.Wait()
	if p.Len() != 0 {
		t.Fatalf("after Discard the pool holds %d items", p.Len())
	}
	f.mu.Lock()
	if len(f.stopped) != 2 {
		t.Errorf("Discard stopped %d items, want 2 (the ready one and the one starting)", len(f.stopped))
	}
	f.mu.Unlock()
	p.Refill("c", 5, time.Hour, time.Second, f.start(0, nil))
	waitLen(t, p, 1)
	p.Drain()
	if p.Len() != 0 {
		t.Fatal("Drain left items")
	}
	p.Refill("d", 5, time.Hour, time.Second, f.start(0, nil))
	p.refills.Wait()
	if p.Len() != 0 {
		t.Fatal("a drained pool refilled")
	}
}
