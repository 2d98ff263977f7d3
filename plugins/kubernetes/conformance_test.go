package kubernetes

import (
	"context"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/conformance"
)

// TestConformance runs the shared contract suite against the Kubernetes
// backend on a real cluster, a session (a pod) per case, in-process and
// over gRPC; the library lives on the user's claim. Cases without a
// session run sessionless, as user "anonymous", which gets a volume too.
func TestConformance(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	provideVolume(t, cs, "anonymous")
	conformance.Run(t, func(t *testing.T) shared.Sandbox {
		b := NewBackend(testLogger())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			b.Shutdown(ctx)
		})
		return b
	},
		conformance.WithSession(user),
		conformance.WithConfigure(shared.ConfigureRequest{Config: testConfig(nil), Classes: true}),
		conformance.WithTimeoutScale(3),
	)
}
