package docker

import (
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

// sessionHello is the hello line of a session: the secret, the ids, and
// the package policy (allowed_packages and where the wheels are).
func sessionHello(cfg Config, secret []byte, user, sessionID string) rtproto.Hello {
	h := rtproto.Hello{Secret: secret, User: user, Session: sessionID, AllowedPackages: cfg.allowedPackages}
	if cfg.WheelDir != "" {
		h.WheelDir = rtproto.WheelMount
	}
	return h
}
