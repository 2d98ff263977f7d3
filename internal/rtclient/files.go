package rtclient

import (
	"context"
	"fmt"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// shared.FileStore against a runtime: a session's workspace
// (rtproto.FilesDir) served by the runtime's put_file, get_file and
// list_files with a fresh agent-scope token. Paths are checked here
// (shared.CheckFilePath) and again in the runtime, which opens them under
// an os.Root without following links. Package session serves shared.FileStore
// with these for every session backend.

// PutFile uploads req.Data to req.Path of t's workspace (req.SessionID is
// the caller's business: t is that session's runtime).
func (t Target) PutFile(ctx context.Context, req shared.PutFileRequest) (shared.PutFileResponse, error) {
	if err := shared.CheckFilePath("path", req.Path, false); err != nil {
		return shared.PutFileResponse{}, err
	}
	if len(req.Data) > shared.DefaultMaxFileBytes {
		return shared.PutFileResponse{}, &shared.FieldError{Field: "data", Reason: fmt.Sprintf("data is %d bytes, over the per-file cap of %d", len(req.Data), shared.DefaultMaxFileBytes)}
	}
	var r rtproto.FileResult
	if err := t.Call(ctx, rtproto.ToolPutFile, rtproto.PutFileArgs{Path: req.Path, Data: req.Data}, &r); err != nil {
		return shared.PutFileResponse{}, err
	}
	return shared.PutFileResponse{File: r.File}, nil
}

// GetFile downloads req.Path of t's workspace.
func (t Target) GetFile(ctx context.Context, req shared.GetFileRequest) (shared.GetFileResponse, error) {
	if err := shared.CheckFilePath("path", req.Path, false); err != nil {
		return shared.GetFileResponse{}, err
	}
	var r rtproto.FileResult
	if err := t.Call(ctx, rtproto.ToolGetFile, rtproto.GetFileArgs{Path: req.Path}, &r); err != nil {
		return shared.GetFileResponse{}, err
	}
	return shared.GetFileResponse{File: r.File, Data: r.Data}, nil
}

// ListFiles lists t's workspace (under req.Path when set).
func (t Target) ListFiles(ctx context.Context, req shared.ListFilesRequest) (shared.ListFilesResponse, error) {
	if err := shared.CheckFilePath("path", req.Path, true); err != nil {
		return shared.ListFilesResponse{}, err
	}
	var r rtproto.ListFilesResult
	if err := t.Call(ctx, rtproto.ToolListFiles, rtproto.ListFilesArgs{Path: req.Path}, &r); err != nil {
		return shared.ListFilesResponse{}, err
	}
	return shared.ListFilesResponse{Files: r.Files}, nil
}
