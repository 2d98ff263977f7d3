package kubernetes

// The warm pool (internal/warmpool), as tier 2 keeps one: after a session
// of a user opens, the plugin creates one more pod for that user (the
// user's claim mounted, the runtime attached and waiting for its hello
// line), so the user's next Open only binds it (hello with a fresh secret,
// MCP initialize). The pool is per user because the library claim is
// mounted when the pod is created. A warm pod carries the owner labels
// like any other, so the reaper deletes those of a dead plugin; Shutdown
// deletes the rest, and a reconfiguration discards them.

import (
	"context"

	"github.com/orqest/sandbox/internal/warmpool"
)

// PoolConfig is the config's `pool {}` block (size, max_idle).
type PoolConfig = warmpool.Config

func (c *Config) normalizePool() error { return c.Pool.Normalize() }

func (c Config) poolSize() int { return c.Pool.Users() }

// Dead makes a session a warmpool.Item: its attach stream has ended.
func (s *session) Dead() bool { return s.dead() }

// takeSpare returns user's warm pod if one waits.
func (b *Backend) takeSpare(user string) *session {
	s, ok := b.pool.Take(user)
	if !ok {
		return nil
	}
	return s
}

// refill starts a warm pod for user in the background (warmpool.Refill).
func (b *Backend) refill(cfg Config, user string) {
	kc, err := b.client()
	if err != nil {
		return
	}
	b.pool.Refill(user, cfg.poolSize(), cfg.Pool.Idle(), cfg.openTimeout, func(ctx context.Context) (*session, error) {
		return b.prepare(ctx, kc, cfg, user, "warm-"+randomHex(4))
	})
}
