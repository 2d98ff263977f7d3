package docker

// shared.FileStore for tier 2: a session's workspace (rtproto.FilesDir in
// its container, on the /workspace tmpfs whose size, workspace_mb, is the
// quota) served by the runtime's put_file, get_file and list_files with a
// fresh agent-scope token (internal/rtclient). Paths are checked there
// (shared.CheckFilePath) and again in the runtime, which opens them under
// an os.Root without following links.

import (
	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/shared"
)

var _ shared.FileStore = (*Backend)(nil)

// target finds an open session's runtime: the Finder of the embedded
// rtclient.SessionAPI, which serves FileStore (and, library.go,
// SessionTools) through the runtime's tools.
func (b *Backend) target(id string) (rtclient.Target, error) {
	s, err := b.sessions.Get(id)
	if err != nil {
		return rtclient.Target{}, err
	}
	return s.target(), nil
}
