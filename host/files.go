package host

import (
	"context"
	"fmt"

	"github.com/orqest/sandbox/shared"
)

// PutFile uploads a file into an open session's workspace (a sandbox whose
// plugin declares shared.CapFiles; any other is ErrNotSupported before the
// plugin is called). The path is checked here too: absolute, unclean or
// ".." paths are a *shared.FieldError on "path".
func (s *Sandbox) PutFile(ctx context.Context, req shared.PutFileRequest) (shared.PutFileResponse, error) {
	var resp shared.PutFileResponse
	err := s.files(ctx, "PutFile", req.SessionID, req.Path, false, func(fs shared.FileStore) error {
		var err error
		resp, err = fs.PutFile(ctx, req)
		return err
	})
	return resp, err
}

// GetFile downloads a file of an open session's workspace (see PutFile).
func (s *Sandbox) GetFile(ctx context.Context, req shared.GetFileRequest) (shared.GetFileResponse, error) {
	var resp shared.GetFileResponse
	err := s.files(ctx, "GetFile", req.SessionID, req.Path, false, func(fs shared.FileStore) error {
		var err error
		resp, err = fs.GetFile(ctx, req)
		return err
	})
	return resp, err
}

// ListFiles lists the files of an open session's workspace, under Path
// when it is set (see PutFile).
func (s *Sandbox) ListFiles(ctx context.Context, req shared.ListFilesRequest) (shared.ListFilesResponse, error) {
	var resp shared.ListFilesResponse
	err := s.files(ctx, "ListFiles", req.SessionID, req.Path, true, func(fs shared.FileStore) error {
		var err error
		resp, err = fs.ListFiles(ctx, req)
		return err
	})
	return resp, err
}

// files checks what a file call needs (a session, a clean path, a plugin
// with the files capability) and calls do on the plugin's FileStore.
func (s *Sandbox) files(ctx context.Context, op, sessionID, path string, emptyPath bool, do func(shared.FileStore) error) error {
	if sessionID == "" {
		return &shared.FieldError{Field: "session_id", Reason: "files live in a session's workspace: open a session and pass its id"}
	}
	if err := shared.CheckFilePath("path", path, emptyPath); err != nil {
		return err
	}
	info, err := s.inst.infoOf(ctx)
	if err != nil {
		return err
	}
	if !info.Has(shared.CapFiles) {
		return fmt.Errorf("sandbox %q: plugin %q keeps no session files (no %q capability; use a session tier such as docker): %w",
			s.cfg.Name, s.cfg.Plugin, shared.CapFiles, shared.ErrNotSupported)
	}
	call := s.beginSession(sessionID)
	defer call.end()
	return s.sessionDo(ctx, call, op, func(p shared.Sandbox) error {
		fs, ok := p.(shared.FileStore)
		if !ok {
			return fmt.Errorf("sandbox %q: %s: %w", s.cfg.Name, op, shared.ErrNotSupported)
		}
		return do(fs)
	})
}
