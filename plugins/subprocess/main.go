// Command orqest-sandbox-plugin-subprocess is the tier-1 backend: a fresh
// Python process per execution under RLIMIT_AS, RLIMIT_CPU and an outer wall
// clock. The host launches it as a go-plugin over gRPC; run by hand it says
// so and exits.
package main

import "github.com/orqest/sandbox/shared"

func main() {
	logger := shared.NewPluginLogger("subprocess")
	shared.Serve(NewBackend(logger), shared.WithLogger(logger))
}
