package subprocess

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/conformance"
)

// TestConformance runs the shared contract suite against the tier-1 backend,
// in-process and over the real go-plugin gRPC path, configured as the host
// configures it by default (classes on) and with classes off.
func TestConformance(t *testing.T) {
	for _, classes := range []bool{true, false} {
		t.Run(map[bool]string{true: "classes", false: "no_classes"}[classes], func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) shared.Sandbox {
				b := NewBackend(hclog.NewNullLogger())
				t.Cleanup(b.Shutdown)
				return b
			}, conformance.WithConfigure(shared.ConfigureRequest{Classes: classes}))
		})
	}
}
