package docker

import (
	"fmt"

	"github.com/moby/moby/api/types/mount"

	"github.com/orqest/sandbox/internal/rtproto"
)

// wheelMounts bind-mounts the operator's wheel_dir read-only at
// rtproto.WheelMount (nothing when wheel_dir is unset).
func wheelMounts(cfg Config) []mount.Mount {
	if cfg.WheelDir == "" {
		return nil
	}
	return []mount.Mount{{
		Type:     mount.TypeBind,
		Source:   cfg.WheelDir,
		Target:   rtproto.WheelMount,
		ReadOnly: true,
	}}
}

// nativeTmpfs is the tmpfs of native wheels (rtproto.NativeMount) when
// wheel_dir is set: exec allowed, unlike /workspace, so an extension
// module can be mapped; root's (the runtime installs, the children only
// read); as large as the workspace.
func nativeTmpfs(cfg Config, tmpfs map[string]string) map[string]string {
	if cfg.WheelDir != "" {
		tmpfs[rtproto.NativeMount] = fmt.Sprintf("rw,nosuid,nodev,exec,size=%dm,uid=0,gid=0,mode=0755", cfg.WorkspaceMB)
	}
	return tmpfs
}

// sessionHello is the hello line of a session: the secret, the ids, and
// the package policy (allowed_packages, where the wheels are and where
// native ones go).
func sessionHello(cfg Config, secret []byte, user, sessionID string) rtproto.Hello {
	h := rtproto.Hello{Secret: secret, User: user, Session: sessionID, AllowedPackages: cfg.allowedPackages}
	if cfg.WheelDir != "" {
		h.WheelDir, h.NativeDir = rtproto.WheelMount, rtproto.NativeMount
	}
	return h
}
