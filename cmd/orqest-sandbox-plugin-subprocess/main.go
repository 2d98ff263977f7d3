// Command orqest-sandbox-plugin-subprocess is the tier-1 backend: a fresh
// Python process per execution under RLIMIT_AS, RLIMIT_CPU and an outer wall
// clock. The host launches it as a go-plugin over gRPC; run by hand it says
// so and exits.
package main

import (
	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/plugins/subprocess"
	"github.com/orqest/sandbox/shared/plugin"
)

func main() {
	logger := plugin.NewPluginLogger("subprocess")
	// A plugin killed mid-call in spawn mode cannot remove its child's
	// working directory; the next plugin process sweeps what dead ones left.
	if n, err := pyproc.SweepStaleTempDirs(""); err != nil {
		logger.Warn("sweeping stale working directories", "error", err)
	} else if n > 0 {
		logger.Info("removed working directories of dead plugin processes", "count", n)
	}
	plugin.Serve(subprocess.NewBackend(logger), plugin.WithLogger(logger))
}
