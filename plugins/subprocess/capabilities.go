package subprocess

import (
	"sort"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// Capabilities tier 1 declares beyond the ones in shared/types.go. Each
// names one sealing layer; Info lists a capability only when the layer is
// really in force on this machine.
const (
	CapSeccomp          shared.Capability = "seccomp"
	CapNoNewPrivs       shared.Capability = "no_new_privs"
	CapUserNamespace    shared.Capability = "user_namespace"
	CapNetworkNamespace shared.Capability = "network_namespace"
	CapLandlockFS       shared.Capability = "landlock_filesystem"
	CapLandlockNet      shared.Capability = "landlock_network"
	CapLandlockScope    shared.Capability = "landlock_scope"
	CapUnprivilegedUID  shared.Capability = "unprivileged_uid"
	// CapSeparateUID: user code runs as a kernel uid that is not the
	// plugin's (65534 under a root plugin, a subordinate uid otherwise), so
	// file permissions protect the plugin account's files from it.
	CapSeparateUID      shared.Capability = "separate_uid"
	CapEmptyEnvironment shared.Capability = "empty_environment"
)

// layerCaps maps a runner sealing layer to the capability it provides.
var layerCaps = map[string]shared.Capability{
	runner.LayerNoNewPrivs:      CapNoNewPrivs,
	runner.LayerUnprivilegedUID: CapUnprivilegedUID,
	runner.LayerUserNamespace:   CapUserNamespace,
	runner.LayerSeparateUID:     CapSeparateUID,
	runner.LayerNetNamespace:    CapNetworkNamespace,
	runner.LayerLandlockFS:      CapLandlockFS,
	runner.LayerLandlockNet:     CapLandlockNet,
	runner.LayerLandlockScope:   CapLandlockScope,
	runner.LayerSeccomp:         CapSeccomp,
}

// baseCaps are enforced by the Go side and rlimits on every Linux host.
var baseCaps = []shared.Capability{
	shared.CapMemoryLimit,
	shared.CapCPULimit,
	shared.CapWallClockTimeout,
	shared.CapProcessIsolation,
	shared.CapFreshProcess,
	shared.CapOutputLimit,
	shared.CapStreaming,
	CapEmptyEnvironment,
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
			caps = append(caps, layerCaps[l])
		}
	}
	return caps
}

// knownCaps lists every capability `require` may name.
func knownCaps() []string {
	seen := map[shared.Capability]bool{shared.CapNetworkIsolation: true, shared.CapFilesystemIsolation: true}
	for _, c := range baseCaps {
		seen[c] = true
	}
	for _, c := range layerCaps {
		seen[c] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, string(c))
	}
	sort.Strings(out)
	return out
}
