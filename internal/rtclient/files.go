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
// an os.Root without following links. The plugins that run the runtime
// (docker, gvisor) implement shared.FileStore with these.

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

// SessionCalls implements shared.FileStore and
// shared.SessionToolStreamer for a plugin whose sessions each run a
// runtime: Session resolves a session id to its runtime's Target (an
// unknown id is the plugin's error, e.g. ErrNotFound). A plugin embeds it
// in its backend.
type SessionCalls struct {
	Session func(id string) (Target, error)
}

// CallToolStream implements shared.SessionToolStreamer: Target.CallTool
// with the output of the code a promoted tool runs sent as the runtime
// streams it.
func (f SessionCalls) CallToolStream(ctx context.Context, req shared.CallToolRequest, send func(shared.OutputChunk) error) (shared.CallToolResponse, error) {
	t, err := f.Session(req.SessionID)
	if err != nil {
		return shared.CallToolResponse{}, fmt.Errorf("call tool: %w", err)
	}
	return shared.StreamCall(ctx, "call tool stream", send, func(ctx context.Context, onChunk func(shared.OutputChunk)) (shared.CallToolResponse, error) {
		return t.CallToolStream(ctx, req, onChunk)
	})
}

// PutFile implements shared.FileStore.
func (f SessionCalls) PutFile(ctx context.Context, req shared.PutFileRequest) (shared.PutFileResponse, error) {
	t, err := f.Session(req.SessionID)
	if err != nil {
		return shared.PutFileResponse{}, fmt.Errorf("%s: %w", rtproto.ToolPutFile, err)
	}
	return t.PutFile(ctx, req)
}

// GetFile implements shared.FileStore.
func (f SessionCalls) GetFile(ctx context.Context, req shared.GetFileRequest) (shared.GetFileResponse, error) {
	t, err := f.Session(req.SessionID)
	if err != nil {
		return shared.GetFileResponse{}, fmt.Errorf("%s: %w", rtproto.ToolGetFile, err)
	}
	return t.GetFile(ctx, req)
}

// ListFiles implements shared.FileStore.
func (f SessionCalls) ListFiles(ctx context.Context, req shared.ListFilesRequest) (shared.ListFilesResponse, error) {
	t, err := f.Session(req.SessionID)
	if err != nil {
		return shared.ListFilesResponse{}, fmt.Errorf("%s: %w", rtproto.ToolListFiles, err)
	}
	return t.ListFiles(ctx, req)
}
