package pyproc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/orqest/sandbox/shared"
)

// Pool keeps warm fork-servers by name (the tier-1 backend has one, the
// tier-2 runtime one per agent), each for a configuration key: Get returns
// the running one, or starts it when there is none, it died, or the key
// changed (closing the old one). At most Max names are kept; the least
// recently used beyond that are closed. A fork-server the pool closes
// (evicted, or its key changed) is drained: calls already running on it
// through Run finish first. The zero value is ready (Max 0:
// no bound). Safe for concurrent use; starts of different names run in
// parallel, of one name one at a time.
type Pool struct {
	// Max bounds how many fork-servers are kept (0: no bound).
	Max int
	// OnRestart, when set, is told of a fork-server that died and is
	// replaced (not of one replaced because its key changed).
	OnRestart func(name string, old *ForkServer)

	mu    sync.Mutex
	slots map[string]*poolSlot
	tick  uint64
}

type poolSlot struct {
	mu     sync.Mutex // serialises the start
	key    string
	fs     *ForkServer
	used   uint64
	closed bool // evicted or replaced: a caller holding it looks again
}

// Get returns the fork-server of name for key, starting one with start
// when needed. A caller that runs an execution should use Run instead,
// which keeps the fork-server from being closed under the call.
func (p *Pool) Get(name, key string, start func() (*ForkServer, error)) (*ForkServer, error) {
	for {
		s := p.slot(name, key)
		s.mu.Lock()
		fs, err := p.startLocked(name, s, start)
		s.mu.Unlock()
		if fs == nil && err == nil {
			continue // the slot was closed meanwhile
		}
		return fs, err
	}
}

// Run runs job on the fork-server of name for key (started with start
// when needed, as Get). The fork-server is not closed while the call runs,
// even when the pool evicts it meanwhile. A call that found its
// fork-server dead before the request reached a child (shared.ErrNotRun)
// runs on a new one, up to notSentRetries times: none of it ran.
func (p *Pool) Run(ctx context.Context, name, key string, start func() (*ForkServer, error), job Job) (shared.ExecutionResult, error) {
	for tries := 0; ; tries++ {
		res, err := p.runOnce(ctx, name, key, start, job)
		if err == nil || !errors.Is(err, shared.ErrNotRun) {
			return res, err
		}
		if tries == notSentRetries || ctx.Err() != nil {
			// Not ErrNotRun any more: that class would have the host
			// resend the call to a new plugin process, and the plugin is
			// fine; its fork-servers are not.
			return res, fmt.Errorf("the call found %d fork-servers dead before it reached a child; the last: %v: %w", tries+1, err, shared.ErrUnavailable)
		}
	}
}

// notSentRetries bounds Run's new tries of a call whose fork-server died
// before the call reached a child (a zygote that dies as it starts must
// not loop forever).
const notSentRetries = 2

// runOnce is one try of Run.
func (p *Pool) runOnce(ctx context.Context, name, key string, start func() (*ForkServer, error), job Job) (shared.ExecutionResult, error) {
	for {
		s := p.slot(name, key)
		s.mu.Lock()
		fs, err := p.startLocked(name, s, start)
		if err != nil {
			s.mu.Unlock()
			return shared.ExecutionResult{}, err
		}
		if fs == nil {
			s.mu.Unlock()
			continue // the slot was closed meanwhile
		}
		if !fs.acquire() { // drained by someone else: it closes itself
			s.fs = nil
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		defer fs.release()
		return fs.run(ctx, job)
	}
}

// SetMax changes Max, closing the least recently used fork-servers beyond
// it (once their calls end).
func (p *Pool) SetMax(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Max = n
	p.evictLocked("\x00") // no name is kept: none is "\x00"
}

// slot returns name's slot for key, replacing one of another key and
// evicting beyond Max, and marks it used.
func (p *Pool) slot(name, key string) *poolSlot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slots == nil {
		p.slots = map[string]*poolSlot{}
	}
	s := p.slots[name]
	if s == nil || s.key != key {
		if s != nil {
			closeSlot(s)
		}
		s = &poolSlot{key: key}
		p.slots[name] = s
		p.evictLocked(name)
	}
	p.tick++
	s.used = p.tick
	return s
}

// startLocked returns s's running fork-server, starting one when there is
// none or it died; nil and no error when s was closed. s.mu is held.
func (p *Pool) startLocked(name string, s *poolSlot, start func() (*ForkServer, error)) (*ForkServer, error) {
	if s.closed {
		return nil, nil
	}
	if s.fs != nil && s.fs.Alive() {
		return s.fs, nil
	}
	if s.fs != nil {
		if p.OnRestart != nil {
			p.OnRestart(name, s.fs)
		}
		go s.fs.Close()
		s.fs = nil
	}
	fs, err := start()
	if err != nil {
		return nil, err
	}
	s.fs = fs
	return fs, nil
}

// Peek returns the fork-server of name if one was started (alive or not),
// without starting one.
func (p *Pool) Peek(name string) *ForkServer {
	p.mu.Lock()
	s := p.slots[name]
	p.mu.Unlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fs
}

// Close stops every fork-server of the pool and their children, and waits
// for them.
func (p *Pool) Close() {
	p.mu.Lock()
	slots := p.slots
	p.slots = nil
	p.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		s.closed = true
		if s.fs != nil {
			s.fs.Close()
			s.fs = nil
		}
		s.mu.Unlock()
	}
}

// closeSlot drains a slot's fork-server in the background (its key
// changed or it was evicted: nothing waits for it); the calls running on
// it finish first.
func closeSlot(s *poolSlot) {
	go func() {
		s.mu.Lock()
		s.closed = true
		fs := s.fs
		s.fs = nil
		s.mu.Unlock()
		if fs != nil {
			fs.Drain()
		}
	}()
}

// evictLocked closes the least recently used fork-servers beyond Max,
// never keep's. p.mu is held.
func (p *Pool) evictLocked(keep string) {
	for p.Max > 0 && len(p.slots) > p.Max {
		var oldest string
		var ot uint64
		for n, s := range p.slots {
			if n != keep && (oldest == "" || s.used < ot) {
				oldest, ot = n, s.used
			}
		}
		if oldest == "" {
			return
		}
		closeSlot(p.slots[oldest])
		delete(p.slots, oldest)
	}
}
