package docker

// shared.FileStore for tier 2: a session's workspace (rtproto.FilesDir in
// its container, on the /workspace tmpfs whose size, workspace_mb, is the
// quota) served by the runtime's put_file, get_file and list_files with a
// fresh agent-scope token. Paths are checked here (shared.CheckFilePath)
// and again in the runtime, which opens them under an os.Root without
// following links.

import (
	"context"
	"fmt"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

var _ shared.FileStore = (*Backend)(nil)

// PutFile implements shared.FileStore.
func (b *Backend) PutFile(ctx context.Context, req shared.PutFileRequest) (shared.PutFileResponse, error) {
	if err := shared.CheckFilePath("path", req.Path, false); err != nil {
		return shared.PutFileResponse{}, err
	}
	if len(req.Data) > shared.DefaultMaxFileBytes {
		return shared.PutFileResponse{}, &shared.FieldError{Field: "data", Reason: fmt.Sprintf("data is %d bytes, over the per-file cap of %d", len(req.Data), shared.DefaultMaxFileBytes)}
	}
	var r rtproto.FileResult
	if err := b.fileCall(ctx, req.SessionID, rtproto.ToolPutFile, rtproto.PutFileArgs{Path: req.Path, Data: req.Data}, &r); err != nil {
		return shared.PutFileResponse{}, err
	}
	return shared.PutFileResponse{File: r.File}, nil
}

// GetFile implements shared.FileStore.
func (b *Backend) GetFile(ctx context.Context, req shared.GetFileRequest) (shared.GetFileResponse, error) {
	if err := shared.CheckFilePath("path", req.Path, false); err != nil {
		return shared.GetFileResponse{}, err
	}
	var r rtproto.FileResult
	if err := b.fileCall(ctx, req.SessionID, rtproto.ToolGetFile, rtproto.GetFileArgs{Path: req.Path}, &r); err != nil {
		return shared.GetFileResponse{}, err
	}
	return shared.GetFileResponse{File: r.File, Data: r.Data}, nil
}

// ListFiles implements shared.FileStore.
func (b *Backend) ListFiles(ctx context.Context, req shared.ListFilesRequest) (shared.ListFilesResponse, error) {
	if err := shared.CheckFilePath("path", req.Path, true); err != nil {
		return shared.ListFilesResponse{}, err
	}
	var r rtproto.ListFilesResult
	if err := b.fileCall(ctx, req.SessionID, rtproto.ToolListFiles, rtproto.ListFilesArgs{Path: req.Path}, &r); err != nil {
		return shared.ListFilesResponse{}, err
	}
	return shared.ListFilesResponse{Files: r.Files}, nil
}

// fileCall calls a workspace tool of the session with a fresh agent token
// and decodes its result into out.
func (b *Backend) fileCall(ctx context.Context, sessionID, tool string, args, out any) error {
	s, err := b.openSession(sessionID)
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	return s.target().Call(ctx, tool, args, out)
}
