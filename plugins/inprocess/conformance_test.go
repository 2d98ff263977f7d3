package inprocess

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/conformance"
)

// TestConformance runs the shared contract suite against the tier-0
// backend, in-process and over the real go-plugin gRPC path. Every Backend
// shares the one embedded interpreter of the test process. Cases needing a
// capability tier 0 does not declare (memory_limit without an RLIMIT_AS,
// isolation) skip with a message naming it. Classes are on by default on
// tier 0 and off when the sandbox block says classes = false.
func TestConformance(t *testing.T) {
	for _, classes := range []bool{false, true} {
		t.Run(map[bool]string{true: "classes", false: "no_classes"}[classes], func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) shared.Sandbox {
				return NewBackend(hclog.NewNullLogger())
			}, conformance.WithConfigure(shared.ConfigureRequest{Unsafe: true, Classes: classes}))
		})
	}
}
