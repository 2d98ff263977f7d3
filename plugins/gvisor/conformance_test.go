package gvisor

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/conformance"
)

// TestConformance runs the shared contract suite against the gVisor
// backend with the real runsc, in-process and over the real go-plugin gRPC
// path, sessionless: each call in a fresh sandbox. No runtime is
// configured and none is next to the test binary, so this backend declares
// no sessions and the Sessions case checks that Open and Close say
// ErrNotSupported.
func TestConformance(t *testing.T) {
	needRunsc(t)
	conformance.Run(t, func(t *testing.T) shared.Sandbox {
		b := NewBackend(hclog.NewNullLogger())
		t.Cleanup(b.Shutdown)
		return b
	}, conformance.WithConfigure(shared.ConfigureRequest{Classes: true}))
	assertNoSandboxes(t)
}

// TestConformanceSessions runs the suite with a session per case
// (WithSession): every call goes to the agent runtime in that session's
// gVisor sandbox.
func TestConformanceSessions(t *testing.T) {
	needRunsc(t)
	cfg := sessionConfig(t, nil)
	conformance.Run(t, func(t *testing.T) shared.Sandbox {
		b := NewBackend(hclog.NewNullLogger())
		t.Cleanup(b.Shutdown)
		return b
	},
		conformance.WithSession("conformance"),
		conformance.WithConfigure(shared.ConfigureRequest{Config: cfg, Classes: true}),
		conformance.WithTimeoutScale(3),
		conformance.WithAgentKiller(func(t *testing.T, impl shared.Sandbox, sid string) {
			// SIGKILL of every process of the session's sandbox, as the
			// kernel's OOM killer or an operator would.
			killSandbox(sandboxOf(t, impl.(*Backend), sid))
		}),
		conformance.WithPersistentLibrary(),
	)
	assertNoSandboxes(t)
}
