package host

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// The session lifecycle policy. Per sandbox block:
//
//	sandbox "docker" {
//	  plugin       = "docker"
//	  idle_timeout = "10m"   # a session unused this long is closed
//	  max_lifetime = "24h"   # a session open this long is closed
//	}
//
// Host-wide, a top-level block:
//
//	sessions {
//	  max_sessions          = 64    # open sessions across every sandbox
//	  max_sessions_per_user = 8     # open sessions of one user id (an MCP client's identity)
//	  reclaim_idle_after    = "1m"  # at a cap, the least recently used session idle this long is closed to make room
//	}
//
// The host enforces them for every session backend (sessions.go).

// Defaults of the session lifecycle policy.
const (
	DefaultIdleTimeout        = 10 * time.Minute
	DefaultMaxLifetime        = 24 * time.Hour
	DefaultMaxSessions        = 64
	DefaultMaxSessionsPerUser = 8
	DefaultReclaimIdleAfter   = time.Minute
)

// SessionsConfig is the top-level `sessions {}` block as written; the
// resolved values are Config.SessionLimits.
type SessionsConfig struct {
	MaxSessions        *int    `hcl:"max_sessions,optional"`
	MaxSessionsPerUser *int    `hcl:"max_sessions_per_user,optional"`
	ReclaimIdleAfter   *string `hcl:"reclaim_idle_after,optional"`

	DefRange                hcl.Range `hcl:",def_range"`
	MaxSessionsRange        hcl.Range `hcl:"max_sessions,attr_value_range"`
	MaxSessionsPerUserRange hcl.Range `hcl:"max_sessions_per_user,attr_value_range"`
	ReclaimIdleAfterRange   hcl.Range `hcl:"reclaim_idle_after,attr_value_range"`
}

// SessionLimits are the host-wide bounds on open sessions. A session
// reclaimed by the host (a tombstone, see Sandbox.Sessions) does not count.
type SessionLimits struct {
	// MaxSessions caps the sessions open at once across the host's
	// sandboxes.
	MaxSessions int
	// MaxSessionsPerUser caps the sessions of one user id open at once
	// (`mcp serve`: one bearer-token identity, its default session and
	// its named ones).
	MaxSessionsPerUser int
	// ReclaimIdleAfter is how long a session must have been idle before
	// an Open at a cap may close it to make room (least recently used
	// first); when none has, the Open is refused.
	ReclaimIdleAfter time.Duration
}

// SessionLifecycle bounds the sessions of one sandbox: the host closes a
// session that has had no call for IdleTimeout, or has been open for
// MaxLifetime, whatever the backend (a session with a call in flight is
// closed when the call ends).
type SessionLifecycle struct {
	IdleTimeout time.Duration
	MaxLifetime time.Duration
	// OnIdle is what the host does with a session idle for IdleTimeout:
	// OnIdleClose (the default) or OnIdlePause (the backend must declare
	// shared.CapPause; a pause that fails closes it).
	OnIdle string
}

// Values of the sandbox's on_idle.
const (
	OnIdleClose = "close"
	OnIdlePause = "pause"
)

// SessionLimits returns the policy's host-wide session limits (the
// defaults where the sessions block, or the block itself, is absent).
func (c *Config) SessionLimits() SessionLimits {
	l, _ := c.Sessions.limits()
	return l
}

// SandboxLifecycle returns the session lifecycle of sandbox s.
func (c *Config) SandboxLifecycle(s *SandboxConfig) SessionLifecycle {
	l, _ := s.lifecycle()
	return l
}

// limits resolves the sessions block (nil: every default) and reports
// each bad value at its attribute.
func (sc *SessionsConfig) limits() (SessionLimits, hcl.Diagnostics) {
	l := SessionLimits{MaxSessions: DefaultMaxSessions, MaxSessionsPerUser: DefaultMaxSessionsPerUser, ReclaimIdleAfter: DefaultReclaimIdleAfter}
	if sc == nil {
		return l, nil
	}
	var diags hcl.Diagnostics
	for _, a := range []struct {
		name string
		v    *int
		rng  hcl.Range
		dst  *int
	}{
		{"max_sessions", sc.MaxSessions, sc.MaxSessionsRange, &l.MaxSessions},
		{"max_sessions_per_user", sc.MaxSessionsPerUser, sc.MaxSessionsPerUserRange, &l.MaxSessionsPerUser},
	} {
		if positiveLimit(&diags, a.name, a.v, a.rng, "a positive number of sessions") {
			*a.dst = *a.v
		}
	}
	if sc.ReclaimIdleAfter != nil {
		d, diag := parseSessionDuration("reclaim_idle_after", *sc.ReclaimIdleAfter, sc.ReclaimIdleAfterRange, true)
		if diag != nil {
			diags = append(diags, diag)
		} else {
			l.ReclaimIdleAfter = d
		}
	}
	return l, diags
}

// lifecycle resolves the sandbox's idle_timeout and max_lifetime and
// reports each bad value at its attribute.
func (s *SandboxConfig) lifecycle() (SessionLifecycle, hcl.Diagnostics) {
	l := SessionLifecycle{IdleTimeout: DefaultIdleTimeout, MaxLifetime: DefaultMaxLifetime, OnIdle: OnIdleClose}
	var diags hcl.Diagnostics
	if s.OnIdle != nil {
		switch *s.OnIdle {
		case OnIdleClose, OnIdlePause:
			l.OnIdle = *s.OnIdle
		default:
			diags = append(diags, errDiag(s.OnIdleRange, "Invalid on_idle",
				fmt.Sprintf("on_idle must be %q (the default: an idle session is closed) or %q (it is paused: a backend with the pause capability saves it, and the next call resumes it), not %q.", OnIdleClose, OnIdlePause, *s.OnIdle)))
		}
	}
	for _, a := range []struct {
		name string
		v    *string
		rng  hcl.Range
		dst  *time.Duration
	}{
		{"idle_timeout", s.IdleTimeout, s.IdleTimeoutRange, &l.IdleTimeout},
		{"max_lifetime", s.MaxLifetime, s.MaxLifetimeRange, &l.MaxLifetime},
	} {
		if a.v == nil {
			continue
		}
		d, diag := parseSessionDuration(a.name, *a.v, a.rng, false)
		if diag != nil {
			diags = append(diags, diag)
			continue
		}
		*a.dst = d
	}
	return l, diags
}

// parseSessionDuration parses the Go duration v of attribute name: a
// positive one (zero too when zeroOK).
func parseSessionDuration(name, v string, rng hcl.Range, zeroOK bool) (time.Duration, *hcl.Diagnostic) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, errDiag(rng, "Invalid duration",
			fmt.Sprintf("%s %q is not a duration such as \"90s\", \"10m\" or \"24h\": %v.", name, v, err))
	case d < 0 || (d == 0 && !zeroOK):
		want := "positive"
		if zeroOK {
			want = "zero or positive"
		}
		return 0, errDiag(rng, "Invalid duration",
			fmt.Sprintf("%s must be %s, not %q.", name, want, v))
	}
	return d, nil
}
