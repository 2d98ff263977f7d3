// Package forkcore finds and checks the fork server's C loop
// (runner/forkcore built as a shared object, bin/orqest-forkcore.so): the
// bytes a plugin hands its interpreters so that their runner's audit hook
// and class guard run in C. The plugins that use it (subprocess, gvisor)
// each carry the sha256 `make build` compiled in and pass it to Load.
package forkcore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/orqest/sandbox/shared"
)

// Name is the file name of the C loop, looked up beside the plugin's
// executable.
const Name = "orqest-forkcore.so"

// Env names a path for builds without a compiled-in sha256 (go test; the
// Makefile sets it).
const Env = "ORQEST_FORKCORE"

// None, as a plugin's `forkcore` setting, disables the C loop and hook:
// interpreters keep the runner's Python ones.
const None = "none"

// ID names core bytes in short (a fork server's configuration key; logs):
// the first 8 bytes of their sha256 in hex, "" for none.
func ID(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Load returns the bytes a plugin's `forkcore` setting asks for: ""
// finds them (Env, else beside the executable when built is set), None
// disables them, a path must load. built is the sha256 (hex) the plugin was
// built with; when set, other bytes are refused (ErrFailedPrecondition,
// naming both). nil bytes with a nil error: none found or disabled, and
// why says so. An explicit path that cannot be read is ErrUnavailable.
// Errors are backend's configuration errors on its `forkcore` attribute
// (shared.ConfigError).
func Load(backend, setting, built string) (data []byte, why string, err error) {
	if setting == None {
		return nil, "disabled by config (forkcore = \"none\")", nil
	}
	path, explicit := setting, setting != ""
	if !explicit {
		if env := os.Getenv(Env); env != "" {
			path, explicit = env, true
		} else if built != "" {
			if exe, err := os.Executable(); err == nil {
				path = filepath.Join(filepath.Dir(exe), Name)
			}
		}
	}
	if path == "" {
		return nil, "this build has no " + Name + " (make build compiles it)", nil
	}
	data, err = os.ReadFile(path)
	if err != nil {
		if !explicit && os.IsNotExist(err) {
			return nil, fmt.Sprintf("%s not found (make build compiles it)", path), nil
		}
		return nil, "", shared.ConfigError(backend, "forkcore", shared.ErrUnavailable, "forkcore %q: %v", path, err)
	}
	if built != "" {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != built {
			return nil, "", shared.ConfigError(backend, "forkcore", shared.ErrFailedPrecondition, "forkcore %q has sha256 %s, this plugin was built with %s", path, got, built)
		}
	}
	return data, "", nil
}
