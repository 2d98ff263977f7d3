package subprocess

import (
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// baseCaps are enforced by the Go side and rlimits on every Linux host.
var baseCaps = []shared.Capability{
	shared.CapMemoryLimit,
	shared.CapCPULimit,
	shared.CapWallClockTimeout,
	shared.CapProcessIsolation,
	shared.CapFreshProcess,
	shared.CapOutputLimit,
	shared.CapStreaming,
	shared.CapEmptyEnvironment,
}

// sealCaps turns the layers in force into capabilities, including the two
// summary ones: network_isolation (a network namespace with no interface
// up, or a seccomp filter that denies socket(2)) and filesystem_isolation
// (Landlock: read the stdlib only, write nothing).
func sealCaps(layers []string) []shared.Capability {
	in := map[string]bool{}
	for _, l := range layers {
		in[l] = true
	}
	var caps []shared.Capability
	if in[runner.LayerNetNamespace] || in[runner.LayerSeccomp] {
		caps = append(caps, shared.CapNetworkIsolation)
	}
	if in[runner.LayerLandlockFS] {
		caps = append(caps, shared.CapFilesystemIsolation)
	}
	for _, l := range runner.Layers {
		if in[l] {
			caps = append(caps, runner.LayerCapability(l))
		}
	}
	return caps
}

// knownCaps lists every capability `require` may name.
func knownCaps() []string {
	return runner.KnownCapabilities(append([]shared.Capability{shared.CapNetworkIsolation, shared.CapFilesystemIsolation}, baseCaps...))
}
