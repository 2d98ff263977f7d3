// Command orqest-sandbox-plugin-docker is the tier-2 backend: one hardened
// Docker container per session, running the agent runtime (package agent,
// the binary orqest-agent-runtime) that serves MCP over the container's attached
// stdio. See docs/tier2.md.
package main

import (
	"context"
	"time"

	"github.com/orqest/sandbox/plugins/docker"
	"github.com/orqest/sandbox/shared/plugin"
)

func main() {
	logger := plugin.NewPluginLogger("docker")
	b := docker.NewBackend(logger)
	plugin.Serve(b, plugin.WithLogger(logger))
	// The host disconnected: remove every container this process still owns
	// (a plugin killed outright leaves them to AutoRemove and the reaper).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.Shutdown(ctx)
}
