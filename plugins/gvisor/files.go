package gvisor

// shared.FileStore for tier 3: a session's workspace (rtproto.FilesDir in
// its sandbox, on the /workspace tmpfs whose size, workspace_mb, is the
// quota), served by the same runtime as tier 2's through rtclient.SessionAPI,
// which the Backend embeds (paths checked there and again in the runtime).

import (
	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/shared"
)

var _ shared.FileStore = (*Backend)(nil)

// sessionTarget is the runtime of open session id (rtclient.SessionAPI).
func (b *Backend) sessionTarget(id string) (rtclient.Target, error) {
	s, err := b.openSession(id)
	if err != nil {
		return rtclient.Target{}, err
	}
	return s.target(), nil
}
