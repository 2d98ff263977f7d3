package subprocess

import "github.com/orqest/sandbox/internal/forkcore"

// forkCoreSHA256 is the sha256 of the bin/orqest-forkcore.so that `make
// build` compiled beside this plugin (set with -ldflags -X). When set, the
// plugin hands the zygote no other bytes.
var forkCoreSHA256 string

// ForkCoreName is the file name of the fork-server's C loop
// (runner/forkcore), looked up beside the plugin's executable.
const ForkCoreName = forkcore.Name

// forkCoreEnv names a forkcore path for builds without a compiled-in
// sha256 (go test; the Makefile sets it).
const forkCoreEnv = forkcore.Env

// ForkCoreNone, as `forkcore`, keeps the zygote's loop in Python.
const ForkCoreNone = forkcore.None

// coreID names forkcore bytes in the fork-server's configuration key.
func coreID(data []byte) string { return forkcore.ID(data) }

// loadForkCore returns the bytes of the fork-server's C loop the config
// asks for (forkcore.Load, against the sha256 this plugin was built with).
func loadForkCore(setting string) (data []byte, why string, err error) {
	return forkcore.Load("subprocess", setting, forkCoreSHA256)
}
