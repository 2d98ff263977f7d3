package docker

import (
	"context"
	"time"

	"github.com/orqest/sandbox/internal/warmpool"
)

// The warm pool: after a session of a user opens, the plugin creates and
// starts one more container for that user (its volume mounted, the runtime
// waiting for its hello line), so the user's next Open only binds it (the
// hello line with a fresh secret, the MCP connection). A container is
// bound to at most one session and removed when it closes, as without the
// pool. The per-user volume is why the pool is per user: Docker mounts a
// volume only when it creates a container, and a container started
// without /data would need the library moved behind the runtime. Warm
// containers carry the owner labels, so the reaper removes those of a
// host that died; Shutdown removes the rest.

// PoolConfig is the docker config's `pool {}` block (size, max_idle).
type PoolConfig = warmpool.Config

// DefaultPoolMaxIdle is how long a warm container waits by default.
const DefaultPoolMaxIdle = warmpool.DefaultMaxIdle

// spare is a warm container waiting for its user's next session.
type spare struct {
	s     *session
	timer *time.Timer // removes it after max_idle
}

func (c *Config) normalizePool() error { return c.Pool.Normalize() }

func (c Config) poolSize() int { return c.Pool.Users() }

// takeSpare removes and returns user's warm container, if one waits and
// is alive.
func (b *Backend) takeSpare(user string) *session {
	b.mu.Lock()
	sp := b.spares[user]
	if sp != nil { // nil: none, or one still starting (its refill owns it)
		delete(b.spares, user)
	}
	b.mu.Unlock()
	if sp == nil {
		return nil
	}
	sp.timer.Stop()
	if sp.s.dead() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.stopSession(ctx, sp.s)
		return nil
	}
	return sp.s
}

// refill starts a warm container for user in the background unless one
// waits already, size users have one, or the backend is shutting down.
func (b *Backend) refill(cfg Config, user string) {
	b.mu.Lock()
	if b.shutdown || b.spares[user] != nil || len(b.spares) >= cfg.poolSize() {
		b.mu.Unlock()
		return
	}
	b.spares[user] = nil // reserved while it starts
	b.refills.Add(1)
	gen := b.poolGen
	b.mu.Unlock()
	go func() {
		defer b.refills.Done()
		ctx, cancel := context.WithTimeout(context.Background(), cfg.openTimeout)
		defer cancel()
		fail := func() {
			b.mu.Lock()
			if sp, ok := b.spares[user]; ok && sp == nil && b.poolGen == gen {
				delete(b.spares, user)
			}
			b.mu.Unlock()
		}
		dc, err := b.client()
		if err != nil {
			fail()
			return
		}
		s, err := b.prepare(ctx, cfg, dc, user, "warm-"+randomHex(4))
		if err != nil {
			b.logger.Warn("pool: could not start a warm container", "user", user, "error", err)
			fail()
			return
		}
		sp := &spare{s: s}
		sp.timer = time.AfterFunc(cfg.Pool.Idle(), func() { b.evictSpare(user, sp) })
		b.mu.Lock()
		if b.shutdown || b.poolGen != gen {
			// Shut down, or reconfigured while it started (its
			// reservation went with the old configuration).
			if cur, ok := b.spares[user]; ok && cur == nil && b.poolGen == gen {
				delete(b.spares, user)
			}
			b.mu.Unlock()
			sp.timer.Stop()
			rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer rcancel()
			_ = b.stopSession(rctx, s)
			return
		}
		b.spares[user] = sp
		b.mu.Unlock()
		b.logger.Debug("pool: warm container ready", "user", user, "container", shortID(s.containerID))
	}()
}

// evictSpare removes sp, user's warm container, after max_idle.
func (b *Backend) evictSpare(user string, sp *spare) {
	b.mu.Lock()
	if b.spares[user] != sp {
		b.mu.Unlock()
		return // taken meanwhile
	}
	delete(b.spares, user)
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.stopSession(ctx, sp.s); err != nil {
		b.logger.Warn("pool: removing an idle warm container", "user", user, "error", err)
	}
}

// discardSpares removes every warm container, and any still starting,
// because the configuration they were started under is gone: Configure
// calls it, and the next Open of each user starts cold under the new one.
func (b *Backend) discardSpares(ctx context.Context) {
	b.mu.Lock()
	b.poolGen++
	var old []*spare
	for u, sp := range b.spares {
		if sp != nil {
			old = append(old, sp)
		}
		delete(b.spares, u) // a reservation too: its refill sees the new generation
	}
	b.mu.Unlock()
	for _, sp := range old {
		sp.timer.Stop()
		if err := b.stopSession(ctx, sp.s); err != nil {
			b.logger.Warn("configure: removing a warm container of the previous configuration", "user", sp.s.user, "error", err)
		}
	}
}

// drainSpares stops refills and removes every warm container.
func (b *Backend) drainSpares(ctx context.Context) {
	b.mu.Lock()
	b.shutdown = true
	b.mu.Unlock()
	b.refills.Wait()
	b.mu.Lock()
	var all []*spare
	for u, sp := range b.spares {
		if sp != nil {
			all = append(all, sp)
		}
		delete(b.spares, u)
	}
	b.mu.Unlock()
	for _, sp := range all {
		sp.timer.Stop()
		if err := b.stopSession(ctx, sp.s); err != nil {
			b.logger.Warn("shutdown: removing a warm container", "user", sp.s.user, "error", err)
		}
	}
}
