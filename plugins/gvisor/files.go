package gvisor

// shared.FileStore for tier 3: a session's workspace (rtproto.FilesDir in
// its sandbox, on the /workspace tmpfs whose size, workspace_mb, is the
// quota), served by the same runtime as tier 2's through the embedded
// session.Manager (paths checked there and again in the runtime).

import "github.com/orqest/sandbox/shared"

var _ shared.FileStore = (*Backend)(nil)
