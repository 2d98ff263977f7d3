package subprocess

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/orqest/sandbox/shared"
)

// forkCoreSHA256 is the sha256 of the bin/orqest-forkcore.so that `make
// build` compiled beside this plugin (set with -ldflags -X). When set, the
// plugin hands the zygote no other bytes.
var forkCoreSHA256 string

// ForkCoreName is the file name of the fork-server's C loop
// (runner/forkcore), looked up beside the plugin's executable.
const ForkCoreName = "orqest-forkcore.so"

// forkCoreEnv names a forkcore path for builds without a compiled-in
// sha256 (go test; the Makefile sets it).
const forkCoreEnv = "ORQEST_FORKCORE"

// ForkCoreNone, as `forkcore`, keeps the zygote's loop in Python.
const ForkCoreNone = "none"

// coreID names forkcore bytes in the fork-server's configuration key.
func coreID(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// loadForkCore returns the bytes of the fork-server's C loop the config
// asks for: setting "" finds it (ORQEST_FORKCORE, else beside the
// executable when this build knows its sha256), "none" disables it, a path
// must load. nil bytes with a nil error: none found, the zygote loops in
// Python; why says so.
func loadForkCore(setting string) (data []byte, why string, err error) {
	if setting == ForkCoreNone {
		return nil, "disabled by config (forkcore = \"none\")", nil
	}
	path, explicit := setting, setting != ""
	if !explicit {
		if env := os.Getenv(forkCoreEnv); env != "" {
			path, explicit = env, true
		} else if forkCoreSHA256 != "" {
			if exe, err := os.Executable(); err == nil {
				path = filepath.Join(filepath.Dir(exe), ForkCoreName)
			}
		}
	}
	if path == "" {
		return nil, "this build has no " + ForkCoreName + " (make build compiles it)", nil
	}
	data, err = os.ReadFile(path)
	if err != nil {
		if !explicit && os.IsNotExist(err) {
			return nil, fmt.Sprintf("%s not found (make build compiles it)", path), nil
		}
		return nil, "", configError("forkcore", shared.ErrUnavailable, "forkcore %q: %v", path, err)
	}
	if forkCoreSHA256 != "" {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != forkCoreSHA256 {
			return nil, "", configError("forkcore", shared.ErrFailedPrecondition, "forkcore %q has sha256 %s, this plugin was built with %s",
				path, got, forkCoreSHA256)
		}
	}
	return data, "", nil
}
