package docker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/conformance"
)

// TestConformance runs the shared contract suite against the tier-2 backend
// with a real container per case (WithSession), in-process and over gRPC.
func TestConformance(t *testing.T) {
	dc := requireDocker(t)
	user := testUser(t) // one user (and volume) for the whole suite
	// Cases without a session run sessionless, as user "anonymous": remove
	// that volume afterwards unless it existed before (a real user's data).
	anon := VolumeName("anonymous")
	if _, err := dc.VolumeInspect(context.Background(), anon, client.VolumeInspectOptions{}); err != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = dc.VolumeRemove(ctx, anon, client.VolumeRemoveOptions{Force: true})
		})
	}
	// Paused sessions (the Pause case) go to a directory of the test.
	cfg, _ := json.Marshal(map[string]any{"image": testImage(), "paused_dir": t.TempDir()})
	conformance.Run(t, func(t *testing.T) shared.Sandbox {
		b := NewBackend(hclog.NewNullLogger())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			b.Shutdown(ctx)
		})
		return b
	},
		conformance.WithSession(user),
		conformance.WithConfigure(shared.ConfigureRequest{Config: cfg, Classes: true}),
		conformance.WithTimeoutScale(3),
		conformance.WithAgentKiller(func(t *testing.T, _ shared.Sandbox, sid string) {
			// As an operator would: docker kill of the session's container.
			ids := containersOf(t, dc, LabelSession+"="+sid)
			if len(ids) != 1 {
				t.Fatalf("session %s: %d containers labelled with it, want 1: %v", sid, len(ids), ids)
			}
			if _, err := dc.ContainerKill(context.Background(), ids[0], client.ContainerKillOptions{Signal: "KILL"}); err != nil {
				t.Fatalf("docker kill %s: %v", ids[0], err)
			}
		}),
		// A bound on a hang, not a speed check (about 0.4 s here when the
		// machine is quiet; make bench reports open times).
		conformance.WithReopenWithin(10*time.Second/3),
		conformance.WithPersistentLibrary(),
	)
}
