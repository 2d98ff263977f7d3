// Command orqest-sandbox-plugin-inprocess is the tier-0 backend: CPython
// embedded in the plugin process (cgo, libpython3), running the shared
// runner with its validator, curated builtins and import shim, and no
// isolation at all. It refuses to run anything unless the sandbox block of
// the policy sets `unsafe = true`. The host launches it as a go-plugin over
// gRPC; run by hand it says so and exits.
package main

import (
	"github.com/orqest/sandbox/plugins/inprocess"
	"github.com/orqest/sandbox/shared/plugin"
)

func main() {
	logger := plugin.NewPluginLogger("inprocess")
	plugin.Serve(inprocess.NewPluginProcessBackend(logger), plugin.WithLogger(logger))
}
