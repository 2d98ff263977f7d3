// Package warmpool keeps one started-ahead session host (a container, a
// pod) per recent key (a user), so that the key's next session only binds
// it instead of waiting for it to start. An item is taken at most once and
// then belongs to the caller; an item waits at most its max idle time; a
// reconfiguration discards every waiting item and any still starting (they
// were made under the old configuration); Drain stops refills and removes
// what waits. Items are stopped with the pool's stop function.
package warmpool

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Item is a warm session host; Dead reports that it ended on its own.
type Item interface {
	Dead() bool
}

// Pool is a warm pool of T keyed by user. The zero value is not usable:
// use New.
type Pool[T Item] struct {
	stop   func(context.Context, T) error
	logger hclog.Logger

	mu       sync.Mutex
	spares   map[string]*spare[T] // nil value: reserved while it starts
	refills  sync.WaitGroup
	shutdown bool
	gen      uint64 // counts Discards: an item of an older generation is never kept
}

type spare[T Item] struct {
	item  T
	timer *time.Timer
}

// New returns a pool whose items are removed with stop.
func New[T Item](stop func(context.Context, T) error, logger hclog.Logger) *Pool[T] {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Pool[T]{stop: stop, logger: logger, spares: map[string]*spare[T]{}}
}

// stopTimeout bounds the removal of one item.
const stopTimeout = 60 * time.Second

func (p *Pool[T]) remove(item T, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := p.stop(ctx, item); err != nil {
		p.logger.Warn("pool: removing a warm item", "why", why, "error", err)
	}
}

// Take removes and returns key's warm item if one waits and is alive.
func (p *Pool[T]) Take(key string) (T, bool) {
	var zero T
	p.mu.Lock()
	sp := p.spares[key]
	if sp != nil {
		delete(p.spares, key)
	}
	p.mu.Unlock()
	if sp == nil {
		return zero, false
	}
	sp.timer.Stop()
	if sp.item.Dead() {
		p.remove(sp.item, "dead")
		return zero, false
	}
	return sp.item, true
}

// Refill starts a warm item for key in the background with start (bounded
// by timeout) unless one waits or starts already, size keys have one, or
// the pool is drained. The item is removed after maxIdle unless taken.
func (p *Pool[T]) Refill(key string, size int, maxIdle, timeout time.Duration, start func(context.Context) (T, error)) {
	p.mu.Lock()
	if _, waits := p.spares[key]; waits || p.shutdown || size <= 0 || len(p.spares) >= size {
		p.mu.Unlock()
		return
	}
	p.spares[key] = nil
	p.refills.Add(1)
	gen := p.gen
	p.mu.Unlock()
	go func() {
		defer p.refills.Done()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		item, err := start(ctx)
		p.mu.Lock()
		reservationOurs := p.gen == gen
		if cur, ok := p.spares[key]; ok && cur == nil && reservationOurs && (err != nil || p.shutdown) {
			delete(p.spares, key)
		}
		if err != nil {
			p.mu.Unlock()
			p.logger.Warn("pool: could not start a warm item", "key", key, "error", err)
			return
		}
		if p.shutdown || !reservationOurs {
			p.mu.Unlock()
			p.remove(item, "drained or reconfigured while it started")
			return
		}
		sp := &spare[T]{item: item}
		sp.timer = time.AfterFunc(maxIdle, func() { p.evict(key, sp) })
		p.spares[key] = sp
		p.mu.Unlock()
		p.logger.Debug("pool: warm item ready", "key", key)
	}()
}

// evict removes sp after its idle time unless it was taken meanwhile.
func (p *Pool[T]) evict(key string, sp *spare[T]) {
	p.mu.Lock()
	if p.spares[key] != sp {
		p.mu.Unlock()
		return
	}
	delete(p.spares, key)
	p.mu.Unlock()
	p.remove(sp.item, "idle")
}

// Discard removes every waiting item and makes those still starting be
// removed when they are ready (the configuration they were started under
// is gone).
func (p *Pool[T]) Discard() {
	p.mu.Lock()
	p.gen++
	old := p.takeAllLocked()
	p.mu.Unlock()
	p.removeAll(old, "reconfigured")
}

// Drain stops refills, waits for those under way and removes every item.
func (p *Pool[T]) Drain() {
	p.mu.Lock()
	p.shutdown = true
	p.mu.Unlock()
	p.refills.Wait()
	p.mu.Lock()
	all := p.takeAllLocked()
	p.mu.Unlock()
	p.removeAll(all, "shutdown")
}

// Has reports whether an item of key waits (not one still starting).
func (p *Pool[T]) Has(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spares[key] != nil
}

// Len reports how many items wait.
func (p *Pool[T]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, sp := range p.spares {
		if sp != nil {
			n++
		}
	}
	return n
}

func (p *Pool[T]) takeAllLocked() []T {
	var out []T
	for k, sp := range p.spares {
		if sp != nil {
			sp.timer.Stop()
			out = append(out, sp.item)
		}
		delete(p.spares, k)
	}
	return out
}

func (p *Pool[T]) removeAll(items []T, why string) {
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.remove(it, why)
		}()
	}
	wg.Wait()
}
