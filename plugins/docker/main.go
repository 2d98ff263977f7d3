// Command orqest-sandbox-plugin-docker is the tier-2 backend: one hardened
// Docker container per session, running the in-container agent runtime
// (plugins/docker/runtime) that serves MCP over the container's attached
// stdio. See docs/tier2.md.
package main

import (
	"context"
	"time"

	"github.com/orqest/sandbox/shared"
)

// version is set with -ldflags "-X main.version=...".
var version = Version

func main() {
	logger := shared.NewPluginLogger("docker")
	b := NewBackend(logger)
	shared.Serve(b, shared.WithLogger(logger))
	// The host disconnected: remove every container this process still owns
	// (a plugin killed outright leaves them to AutoRemove and the reaper).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.Shutdown(ctx)
}
