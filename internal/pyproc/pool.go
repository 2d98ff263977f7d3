package pyproc

import (
	"sync"
)

// Pool keeps warm fork-servers by name (the tier-1 backend has one, the
// tier-2 runtime one per agent), each for a configuration key: Get returns
// the running one, or starts it when there is none, it died, or the key
// changed (closing the old one). At most Max names are kept; the least
// recently used beyond that are closed. The zero value is ready (Max 0:
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
	mu   sync.Mutex // serialises the start
	key  string
	fs   *ForkServer
	used uint64
}

// Get returns the fork-server of name for key, starting one with start
// when needed.
func (p *Pool) Get(name, key string, start func() (*ForkServer, error)) (*ForkServer, error) {
	p.mu.Lock()
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
	p.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
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
		if s.fs != nil {
			s.fs.Close()
			s.fs = nil
		}
		s.mu.Unlock()
	}
}

// closeSlot closes a slot's fork-server in the background (its key
// changed or it was evicted: nothing waits for it).
func closeSlot(s *poolSlot) {
	go func() {
		s.mu.Lock()
		fs := s.fs
		s.fs = nil
		s.mu.Unlock()
		if fs != nil {
			fs.Close()
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
