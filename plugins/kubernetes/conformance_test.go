package kubernetes

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		conformance.WithAgentKiller(func(t *testing.T, _ shared.Sandbox, sid string) {
			// As an operator (or an eviction) would: the session's pod is
			// deleted at once, without a grace period.
			pods := podsOf(t, cs, LabelSession+"="+LabelValue(sid))
			if len(pods) != 1 {
				t.Fatalf("session %s: %d pods labelled with it, want 1: %v", sid, len(pods), pods)
			}
			grace := int64(0)
			if err := cs.CoreV1().Pods(testNamespace).Delete(context.Background(), pods[0], metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
				t.Fatalf("deleting the pod %s: %v", pods[0], err)
			}
		}),
		conformance.WithPersistentLibrary(),
	)
}
