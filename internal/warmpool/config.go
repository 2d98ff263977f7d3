package warmpool

import (
	"fmt"
	"time"

	"github.com/orqest/sandbox/shared"
)

// Config is a plugin's `pool {}` block: how many users keep a warm item
// and how long one waits.
type Config struct {
	// Size is how many users keep a warm item (0: no pool).
	Size int `json:"size"`
	// MaxIdle is how long a warm item waits before it is removed
	// (default DefaultMaxIdle).
	MaxIdle string `json:"max_idle"`

	maxIdle time.Duration
}

// DefaultMaxIdle is how long a warm item waits by default.
const DefaultMaxIdle = 5 * time.Minute

// MaxSize bounds Size.
const MaxSize = 1000

// Schema is the `pool {}` block of a session backend's config schema;
// what names the backend's agents ("container", "pod", "gVisor sandbox").
func Schema(what string) shared.ConfigAttribute {
	return shared.ConfigAttribute{Name: "pool", Type: shared.ConfigBlock, Description: "warm " + what + "s: after a user's session opens, one more " + what + " of that user is started ahead of demand, so the user's next Open only binds it", Attributes: []shared.ConfigAttribute{
		{Name: "size", Type: "number", Description: "how many users keep a warm " + what + " (default 0: no pool)"},
		{Name: "max_idle", Type: "string", Description: `how long a warm ` + what + ` waits before it is removed (default "5m")`},
	}}
}

// Normalize checks the block and parses max_idle; errors are
// *shared.FieldError on "pool.size" or "pool.max_idle". A nil block is
// no pool.
func (c *Config) Normalize() error {
	if c == nil {
		return nil
	}
	if c.Size < 0 || c.Size > MaxSize {
		return &shared.FieldError{Field: "pool.size", Reason: fmt.Sprintf("size = %d: want 0 (no pool) to %d users", c.Size, MaxSize)}
	}
	c.maxIdle = DefaultMaxIdle
	if c.MaxIdle != "" {
		d, err := time.ParseDuration(c.MaxIdle)
		if err != nil || d <= 0 {
			return &shared.FieldError{Field: "pool.max_idle", Reason: fmt.Sprintf("max_idle = %q: want a positive duration such as \"5m\"", c.MaxIdle)}
		}
		c.maxIdle = d
	}
	return nil
}

// Users is how many users keep a warm item (0 for a nil block).
func (c *Config) Users() int {
	if c == nil {
		return 0
	}
	return c.Size
}

// Idle is how long a warm item waits (after Normalize).
func (c *Config) Idle() time.Duration {
	if c == nil || c.maxIdle == 0 {
		return DefaultMaxIdle
	}
	return c.maxIdle
}
