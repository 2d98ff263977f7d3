package host

import (
	"strings"
	"testing"
	"time"
)

// The lifecycle attributes resolve to their defaults when absent and to
// what they say when present.
func TestSessionLifecycleValues(t *testing.T) {
	cfg, diags := ParseConfig("config.hcl", []byte("sandbox \"a\" { plugin = \"docker\" }\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := cfg.SandboxLifecycle(cfg.Sandboxes[0]); got != (SessionLifecycle{IdleTimeout: 10 * time.Minute, MaxLifetime: 24 * time.Hour, OnIdle: OnIdleClose}) {
		t.Errorf("default lifecycle %+v", got)
	}
	if got := cfg.SessionLimits(); got != (SessionLimits{MaxSessions: 64, MaxSessionsPerUser: 8, ReclaimIdleAfter: time.Minute}) {
		t.Errorf("default limits %+v", got)
	}
	src := `sessions {
  max_sessions          = 4
  max_sessions_per_user = 2
  reclaim_idle_after    = "0s"
}
sandbox "a" {
  plugin       = "docker"
  idle_timeout = "2s"
  max_lifetime = "1h"
  on_idle      = "pause"
}
`
	if cfg, diags = ParseConfig("config.hcl", []byte(src)); diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := cfg.SandboxLifecycle(cfg.Sandboxes[0]); got != (SessionLifecycle{IdleTimeout: 2 * time.Second, MaxLifetime: time.Hour, OnIdle: OnIdlePause}) {
		t.Errorf("lifecycle %+v", got)
	}
	if got := cfg.SessionLimits(); got != (SessionLimits{MaxSessions: 4, MaxSessionsPerUser: 2, ReclaimIdleAfter: 0}) {
		t.Errorf("limits %+v", got)
	}
}

// A bad lifecycle value is a diagnostic at the attribute's value
// (file:line:col), with the source snippet.
func TestSessionLifecycleDiagnostics(t *testing.T) {
	pdir, _ := fakePluginDir(t)
	for _, c := range []struct {
		name, src, pos, want string
	}{
		{"bad idle_timeout", "sandbox \"a\" {\n  plugin = \"subprocess\"\n  idle_timeout = \"ten minutes\"\n}\n", ":3:18:", `idle_timeout "ten minutes" is not a duration`},
		{"number idle_timeout", "sandbox \"a\" {\n  plugin = \"subprocess\"\n  idle_timeout = 600\n}\n", ":3:18:", `idle_timeout "600" is not a duration`},
		{"zero idle_timeout", "sandbox \"a\" {\n  plugin = \"subprocess\"\n  idle_timeout = \"0s\"\n}\n", ":3:18:", "idle_timeout must be positive"},
		{"negative max_lifetime", "sandbox \"a\" {\n  plugin = \"subprocess\"\n  max_lifetime = \"-1h\"\n}\n", ":3:18:", "max_lifetime must be positive"},
		{"zero max_sessions", "sessions {\n  max_sessions = 0\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:18:", "max_sessions must be a positive number"},
		{"negative per user", "sessions {\n  max_sessions_per_user = -2\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:27:", "max_sessions_per_user must be a positive number"},
		{"bad reclaim_idle_after", "sessions {\n  reclaim_idle_after = \"soon\"\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:24:", `reclaim_idle_after "soon" is not a duration`},
		{"negative reclaim_idle_after", "sessions {\n  reclaim_idle_after = \"-1s\"\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:24:", "reclaim_idle_after must be zero or positive"},
		{"unknown sessions attribute", "sessions {\n  max_session = 3\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:3:", "Unsupported argument"},
		{"two sessions blocks", "sessions {}\nsessions {}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:1:", "Duplicate sessions block"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, path, err := loadText(t, c.src, pdir)
			if err == nil {
				h.Close()
				t.Fatal("loaded without error")
			}
			out := render(t, err)
			if !strings.Contains(out, path+c.pos) || !strings.Contains(out, c.want) {
				t.Errorf("want %s%s and %q in:\n%s", path, c.pos, c.want, out)
			}
			if !strings.Contains(out, "  on "+path+" line ") {
				t.Errorf("no source snippet in:\n%s", out)
			}
		})
	}
}
