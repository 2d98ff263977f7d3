// Package docker is the tier-2 backend: a session is one hardened Docker
// container (capabilities dropped but the agent's CHOWN, KILL, SETUID and
// SETGID, a read-only root, no-new-privileges, pids, memory and CPU
// limits, no network, a tmpfs /workspace, the user's named volume on
// /data) running the agent runtime (package agent, the image `make image`
// builds), spoken to over the container's attached stdio, or over HTTP on
// a port published on 127.0.0.1 in bridge mode. The package is the session
// kit's Driver (internal/session: registry, Execute, files, the tool
// library, the warm pool, reopen after a container dies) plus what only
// Docker needs: the container's configuration, the engine client, owner
// labels and the reaper of containers a dead host left behind.
package docker
