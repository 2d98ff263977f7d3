package docker

// shared.FileStore for tier 2: a session's workspace (rtproto.FilesDir in
// its container, on the /workspace tmpfs whose size, workspace_mb, is the
// quota), served by the runtime through rtclient.SessionCalls, which the
// Backend embeds (paths checked there and again in the runtime).

import (
	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/shared"
)

var _ shared.FileStore = (*Backend)(nil)

// sessionTarget is the runtime of open session id (rtclient.SessionCalls).
func (b *Backend) sessionTarget(id string) (rtclient.Target, error) {
	s, err := b.openSession(id)
	if err != nil {
		return rtclient.Target{}, err
	}
	return s.target(), nil
}
