// Command orqest-sandbox-plugin-gvisor is the tier-3 backend: each
// execution runs in a fresh gVisor sandbox (runsc), so user code's system
// calls reach gVisor's Sentry, not the host kernel. The host launches it as
// a go-plugin over gRPC; run by hand it says so and exits.
package main

import (
	"github.com/orqest/sandbox/plugins/gvisor"
	"github.com/orqest/sandbox/shared/plugin"
)

func main() {
	logger := plugin.NewPluginLogger("gvisor")
	// A plugin killed mid-call cannot remove its state directory; the next
	// plugin process sweeps what dead ones left.
	if n, err := gvisor.SweepStale("", ""); err != nil {
		logger.Warn("sweeping stale state directories", "error", err)
	} else if n > 0 {
		logger.Info("removed state directories of dead plugin processes", "count", n)
	}
	b := gvisor.NewBackend(logger)
	plugin.Serve(b, plugin.WithLogger(logger))
	// The host closed the plugin: remove the state directory now (a plugin
	// killed instead leaves it to the sweep above).
	b.Shutdown()
}
