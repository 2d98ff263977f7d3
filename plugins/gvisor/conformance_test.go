package gvisor

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/conformance"
)

// TestConformance runs the shared contract suite against the gVisor
// backend with the real runsc, in-process and over the real go-plugin gRPC
// path.
func TestConformance(t *testing.T) {
	needRunsc(t)
	conformance.Run(t, func(t *testing.T) shared.Sandbox {
		b := NewBackend(hclog.NewNullLogger())
		t.Cleanup(b.Shutdown)
		return b
	}, conformance.WithConfigure(shared.ConfigureRequest{Classes: true}))
	assertNoSandboxes(t)
}
