package docker

// shared.FileStore for tier 2: a session's workspace (rtproto.FilesDir in
// its container, on the /workspace tmpfs whose size, workspace_mb, is the
// quota), served by the runtime's put_file, get_file and list_files
// through the embedded session.Manager. Paths are checked there
// (shared.CheckFilePath) and again in the runtime, which opens them under
// an os.Root without following links.

import "github.com/orqest/sandbox/shared"

var _ shared.FileStore = (*Backend)(nil)
