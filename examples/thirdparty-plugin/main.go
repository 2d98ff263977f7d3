// Command orqest-sandbox-plugin-pyexec is an example third-party backend for
// orqest-sandbox, built on its own against the public SDK (package
// github.com/orqest/sandbox/shared, served by .../shared/plugin): it
// implements shared.Sandbox and hands it to plugin.Serve. Build it, drop the binary into the host's plugin
// directory, and name it in a `sandbox` block; the host is not rebuilt.
//
// pyexec runs each execution in a fresh /usr/bin/python3 process with the
// project's Python runner (package runner) and simple limits of its own
// (RLIMIT_AS, RLIMIT_CPU, a wall clock that kills the process group, capped
// output). It demonstrates the SDK; it is not a new isolation tier.
package main

import "github.com/orqest/sandbox/shared/plugin"

func main() {
	// Plugins log JSON to stderr: stdout carries the go-plugin handshake.
	logger := plugin.NewPluginLogger("pyexec")
	plugin.Serve(NewBackend(logger), plugin.WithLogger(logger))
}
