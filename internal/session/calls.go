package session

import (
	"context"
	"fmt"
	"time"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// The session's agent serves its tokens, tool calls and files; a call on a
// session whose agent died reopens it first (Manager.serving).
var (
	_ shared.SessionTools        = (*Manager)(nil)
	_ shared.SessionToolStreamer = (*Manager)(nil)
	_ shared.FileStore           = (*Manager)(nil)
	_ shared.Streamer            = (*Manager)(nil)
)

// MintToken mints a bearer token for an open session: scope "agent" or
// "operator", at most rtproto.MaxTokenTTL (rtclient.Target.MintToken); it is
// logged without the token.
func (m *Manager) MintToken(ctx context.Context, req shared.MintTokenRequest) (shared.MintTokenResponse, error) {
	t, done, err := m.call(ctx, req.SessionID)
	if err != nil {
		return shared.MintTokenResponse{}, fmt.Errorf("mint token: %w", err)
	}
	defer done()
	resp, err := t.MintToken(req)
	if err != nil {
		return resp, err
	}
	m.log.Info("token minted", "session", t.Session, "user", t.User, "scope", req.Scope, "ttl", time.Until(resp.ExpiresAt).Round(time.Second))
	return resp, nil
}

// CallTool calls a tool of the session's runtime with the caller's token
// (never one the plugin mints); see rtclient.Target.CallTool.
func (m *Manager) CallTool(ctx context.Context, req shared.CallToolRequest) (shared.CallToolResponse, error) {
	t, done, err := m.call(ctx, req.SessionID)
	if err != nil {
		return shared.CallToolResponse{}, fmt.Errorf("call tool: %w", err)
	}
	defer done()
	return t.CallTool(ctx, req)
}

// CallToolStream implements shared.SessionToolStreamer: CallTool with the
// output of the code a promoted tool runs sent as the runtime streams it.
func (m *Manager) CallToolStream(ctx context.Context, req shared.CallToolRequest, send func(shared.OutputChunk) error) (shared.CallToolResponse, error) {
	t, done, err := m.call(ctx, req.SessionID)
	if err != nil {
		return shared.CallToolResponse{}, fmt.Errorf("call tool: %w", err)
	}
	defer done()
	return shared.StreamCall(ctx, "call tool stream", send, func(ctx context.Context, onChunk func(shared.OutputChunk)) (shared.CallToolResponse, error) {
		return t.CallToolStream(ctx, req, onChunk)
	})
}

// PutFile implements shared.FileStore (the runtime's put_file).
func (m *Manager) PutFile(ctx context.Context, req shared.PutFileRequest) (shared.PutFileResponse, error) {
	t, done, err := m.call(ctx, req.SessionID)
	if err != nil {
		return shared.PutFileResponse{}, fmt.Errorf("%s: %w", rtproto.ToolPutFile, err)
	}
	defer done()
	return t.PutFile(ctx, req)
}

// GetFile implements shared.FileStore (the runtime's get_file).
func (m *Manager) GetFile(ctx context.Context, req shared.GetFileRequest) (shared.GetFileResponse, error) {
	t, done, err := m.call(ctx, req.SessionID)
	if err != nil {
		return shared.GetFileResponse{}, fmt.Errorf("%s: %w", rtproto.ToolGetFile, err)
	}
	defer done()
	return t.GetFile(ctx, req)
}

// ListFiles implements shared.FileStore (the runtime's list_files).
func (m *Manager) ListFiles(ctx context.Context, req shared.ListFilesRequest) (shared.ListFilesResponse, error) {
	t, done, err := m.call(ctx, req.SessionID)
	if err != nil {
		return shared.ListFilesResponse{}, fmt.Errorf("%s: %w", rtproto.ToolListFiles, err)
	}
	defer done()
	return t.ListFiles(ctx, req)
}
