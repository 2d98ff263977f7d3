package kubernetes

// The plugin side of the per-user tool library and the session's other
// tools, as in tier 2: the promotion policy goes to the runtime in the
// hello line, the library's events come back with each result, and
// SessionTools lets the host mint a token and call the runtime's tools
// with it; FileStore serves the session's workspace through the
// runtime's file tools.

import (
	"context"
	"fmt"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

var (
	_ shared.SessionTools = (*Backend)(nil)
	_ shared.FileStore    = (*Backend)(nil)
	_ shared.Streamer     = (*Backend)(nil)
)

// normalizePromotion fills the policy's defaults and checks it.
func (c *Config) normalizePromotion() error {
	p, err := toollib.NormalizeBlock(c.Promotion)
	if err != nil {
		return fmt.Errorf("kubernetes config: %w", err)
	}
	c.Promotion = p
	return nil
}

// MintToken mints a bearer token for an open session (rtclient.Target.MintToken).
func (b *Backend) MintToken(_ context.Context, req shared.MintTokenRequest) (shared.MintTokenResponse, error) {
	s, err := b.sessions.Get(req.SessionID)
	if err != nil {
		return shared.MintTokenResponse{}, fmt.Errorf("mint token: %w", err)
	}
	resp, err := s.target().MintToken(req)
	if err == nil {
		b.logger.Info("token minted", "session", s.id, "user", s.user, "scope", req.Scope)
	}
	return resp, err
}

// CallTool calls a tool of the session's runtime with the caller's token
// (never one the plugin mints); see rtclient.Target.CallTool.
func (b *Backend) CallTool(ctx context.Context, req shared.CallToolRequest) (shared.CallToolResponse, error) {
	s, err := b.sessions.Get(req.SessionID)
	if err != nil {
		return shared.CallToolResponse{}, fmt.Errorf("call tool: %w", err)
	}
	return s.target().CallTool(ctx, req)
}

// target finds an open session's runtime.
func (b *Backend) target(id string) (rtclient.Target, error) {
	s, err := b.sessions.Get(id)
	if err != nil {
		return rtclient.Target{}, err
	}
	return s.target(), nil
}

// PutFile implements shared.FileStore (the runtime's put_file).
func (b *Backend) PutFile(ctx context.Context, req shared.PutFileRequest) (shared.PutFileResponse, error) {
	return rtclient.PutFile(ctx, b.target, req)
}

// GetFile implements shared.FileStore (the runtime's get_file).
func (b *Backend) GetFile(ctx context.Context, req shared.GetFileRequest) (shared.GetFileResponse, error) {
	return rtclient.GetFile(ctx, b.target, req)
}

// ListFiles implements shared.FileStore (the runtime's list_files).
func (b *Backend) ListFiles(ctx context.Context, req shared.ListFilesRequest) (shared.ListFilesResponse, error) {
	return rtclient.ListFiles(ctx, b.target, req)
}
