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
	"fmt"
	"time"

	"github.com/orqest/sandbox/shared"
)

// PoolConfig is the config's `pool {}` block.
type PoolConfig struct {
	// Size is how many users keep a warm pod (0: no pool).
	Size int `json:"size"`
	// MaxIdle is how long a warm pod waits before it is deleted
	// (default DefaultPoolMaxIdle).
	MaxIdle string `json:"max_idle"`

	maxIdle time.Duration
}

// DefaultPoolMaxIdle is how long a warm pod waits by default.
const DefaultPoolMaxIdle = 5 * time.Minute

func (c *Config) normalizePool() error {
	if c.Pool == nil {
		return nil
	}
	if c.Pool.Size < 0 || c.Pool.Size > 1000 {
		return &shared.FieldError{Field: "pool.size", Reason: fmt.Sprintf("size = %d: want 0 (no pool) to 1000 users", c.Pool.Size)}
	}
	c.Pool.maxIdle = DefaultPoolMaxIdle
	if c.Pool.MaxIdle != "" {
		d, err := time.ParseDuration(c.Pool.MaxIdle)
		if err != nil || d <= 0 {
			return &shared.FieldError{Field: "pool.max_idle", Reason: fmt.Sprintf("max_idle = %q: want a positive duration such as \"5m\"", c.Pool.MaxIdle)}
		}
		c.Pool.maxIdle = d
	}
	return nil
}

func (c Config) poolSize() int {
	if c.Pool == nil {
		return 0
	}
	return c.Pool.Size
}

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
	b.pool.Refill(user, cfg.poolSize(), cfg.Pool.maxIdle, cfg.openTimeout, func(ctx context.Context) (*session, error) {
		return b.prepare(ctx, kc, cfg, user, "warm-"+randomHex(4))
	})
}
