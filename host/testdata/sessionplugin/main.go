// Command sessionplugin is a test backend with sessions kept in memory,
// for the host's session bookkeeping tests (sessions_test.go): no Python
// runs. Execute reads its code as a command:
//
//	count    one more on the session's counter, returned (its state)
//	sessions the ids of the sessions this process holds, sorted
//	forget   drop the session, as a backend that lost it would
//	sleep    wait for args.ms milliseconds, then return null
//
// A call on a session it does not hold fails with shared.ErrNotFound, or
// with shared.ErrSessionNotFound when $ORQEST_TEST_TYPED_NOT_FOUND is 1.
// Sessions have a workspace (FileStore); a missing file is ErrNotFound.
// With $ORQEST_TEST_PAUSE_DIR set (or its config block's pause_dir) it declares the pause capability: Pause
// writes the session (user, counter) to a file there and drops it, Resume
// reads it back (so a later process resumes it), Close of a paused session
// removes the file; a call on a paused session is ErrSessionPaused.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

type session struct {
	user  string
	count int
	files map[string][]byte
}

type backend struct {
	typed      bool
	pauseDir   string        // "": no pause capability
	pauseDelay time.Duration // Pause answers this long after the session is saved ($ORQEST_TEST_PAUSE_DELAY_MS)

	mu       sync.Mutex
	sessions map[string]*session
	next     int
}

func (b *backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	caps := []shared.Capability{shared.CapSessions, shared.CapFiles, shared.CapFreshProcess}
	if b.pauseDir != "" {
		caps = append(caps, shared.CapPause)
	}
	return shared.InfoResponse{Name: "sessions", Tier: 2, Version: "0.0.1", APIVersions: []int{shared.APIVersion},
		Capabilities: caps, ConfigSchema: []shared.ConfigAttribute{{Name: "pause_dir", Type: "string", Description: "where paused sessions are saved (declares the pause capability)"}}}, nil
}

// saved is a paused session's file.
type saved struct {
	User  string `json:"user"`
	Count int    `json:"count"`
}

func (b *backend) savedPath(id string) string { return filepath.Join(b.pauseDir, id+".json") }

// Pause implements shared.SessionPauser.
func (b *backend) Pause(_ context.Context, req shared.PauseRequest) (shared.PauseResponse, error) {
	if b.pauseDir == "" {
		return shared.PauseResponse{}, fmt.Errorf("pause: %w", shared.ErrNotSupported)
	}
	s, err := b.get(req.SessionID)
	if err != nil {
		return shared.PauseResponse{}, err
	}
	b.mu.Lock()
	raw, _ := json.Marshal(saved{User: s.user, Count: s.count})
	if err := os.WriteFile(b.savedPath(req.SessionID), raw, 0o600); err != nil {
		b.mu.Unlock()
		return shared.PauseResponse{}, fmt.Errorf("pause: %v: %w", err, shared.ErrInternal)
	}
	delete(b.sessions, req.SessionID)
	b.mu.Unlock()
	time.Sleep(b.pauseDelay)
	return shared.PauseResponse{Kept: []string{"count"}, Bytes: int64(len(raw))}, nil
}

// Resume implements shared.SessionPauser.
func (b *backend) Resume(_ context.Context, req shared.ResumeRequest) (shared.ResumeResponse, error) {
	if b.pauseDir == "" {
		return shared.ResumeResponse{}, fmt.Errorf("resume: %w", shared.ErrNotSupported)
	}
	raw, err := os.ReadFile(b.savedPath(req.SessionID))
	if errors.Is(err, fs.ErrNotExist) {
		return shared.ResumeResponse{}, fmt.Errorf("no paused session %q: %w", req.SessionID, shared.ErrSessionNotFound)
	}
	var sv saved
	if err == nil {
		err = json.Unmarshal(raw, &sv)
	}
	if err != nil {
		return shared.ResumeResponse{}, fmt.Errorf("resume: %v: %w", err, shared.ErrInternal)
	}
	b.mu.Lock()
	b.sessions[req.SessionID] = &session{user: sv.User, count: sv.Count, files: map[string][]byte{}}
	b.mu.Unlock()
	os.Remove(b.savedPath(req.SessionID))
	return shared.ResumeResponse{SessionID: req.SessionID, UserID: sv.User, Kept: []string{"count"}}, nil
}

// paused reports whether session id is paused on disk.
func (b *backend) paused(id string) bool {
	if b.pauseDir == "" {
		return false
	}
	_, err := os.Stat(b.savedPath(id))
	return err == nil
}

func (b *backend) Configure(_ context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	var cfg struct {
		PauseDir string `json:"pause_dir"`
	}
	if len(req.Config) > 0 {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return shared.ConfigureResponse{}, fmt.Errorf("config: %v: %w", err, shared.ErrInvalidArgument)
		}
	}
	if cfg.PauseDir != "" {
		b.pauseDir = cfg.PauseDir
	}
	return shared.ConfigureResponse{}, nil
}

func (b *backend) Validate(context.Context, shared.ValidateRequest) (shared.ValidateResponse, error) {
	return shared.ValidateResponse{}, nil
}

// unknown is the error of a call on a session this process does not hold.
func (b *backend) unknown(id string) error {
	if b.typed {
		return fmt.Errorf("no open session %q: %w", id, shared.ErrSessionNotFound)
	}
	return fmt.Errorf("no open session %q (call Open first): %w", id, shared.ErrNotFound)
}

func (b *backend) get(id string) (*session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[id]
	if s == nil {
		if b.paused(id) {
			return nil, fmt.Errorf("session %q is paused: %w", id, shared.ErrSessionPaused)
		}
		return nil, b.unknown(id)
	}
	return s, nil
}

func (b *backend) Open(_ context.Context, req shared.OpenRequest) (shared.OpenResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := req.SessionID
	if id == "" {
		b.next++
		id = fmt.Sprintf("s-%d-%d", os.Getpid(), b.next)
	}
	if b.sessions[id] != nil {
		return shared.OpenResponse{}, fmt.Errorf("open: session %q is already open: %w", id, shared.ErrFailedPrecondition)
	}
	b.sessions[id] = &session{user: req.UserID, files: map[string][]byte{}}
	return shared.OpenResponse{SessionID: id}, nil
}

func (b *backend) Close(_ context.Context, req shared.CloseRequest) (shared.CloseResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessions[req.SessionID] == nil {
		if b.paused(req.SessionID) {
			return shared.CloseResponse{}, os.Remove(b.savedPath(req.SessionID))
		}
		return shared.CloseResponse{}, b.unknown(req.SessionID)
	}
	delete(b.sessions, req.SessionID)
	return shared.CloseResponse{}, nil
}

func (b *backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	s, err := b.get(req.SessionID)
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	var out any
	switch req.Code {
	case "count":
		b.mu.Lock()
		s.count++
		out = s.count
		b.mu.Unlock()
	case "sessions":
		b.mu.Lock()
		ids := []string{}
		for id := range b.sessions {
			ids = append(ids, id)
		}
		b.mu.Unlock()
		sort.Strings(ids)
		out = ids
	case "forget":
		b.mu.Lock()
		delete(b.sessions, req.SessionID)
		b.mu.Unlock()
	case "sleep":
		var args struct {
			MS int `json:"ms"`
		}
		_ = json.Unmarshal(req.Args, &args)
		select {
		case <-time.After(time.Duration(args.MS) * time.Millisecond):
		case <-ctx.Done():
			return shared.ExecuteResponse{}, ctx.Err()
		}
	}
	raw, _ := json.Marshal(out)
	return shared.ExecuteResponse{Result: shared.ExecutionResult{Success: true, Output: raw}}, nil
}

func (b *backend) PutFile(_ context.Context, req shared.PutFileRequest) (shared.PutFileResponse, error) {
	s, err := b.get(req.SessionID)
	if err != nil {
		return shared.PutFileResponse{}, err
	}
	b.mu.Lock()
	s.files[req.Path] = req.Data
	b.mu.Unlock()
	return shared.PutFileResponse{File: shared.FileInfo{Name: req.Path, Size: int64(len(req.Data))}}, nil
}

func (b *backend) GetFile(_ context.Context, req shared.GetFileRequest) (shared.GetFileResponse, error) {
	s, err := b.get(req.SessionID)
	if err != nil {
		return shared.GetFileResponse{}, err
	}
	b.mu.Lock()
	data, ok := s.files[req.Path]
	b.mu.Unlock()
	if !ok {
		return shared.GetFileResponse{}, fmt.Errorf("get_file %s: no such file: %w", req.Path, shared.ErrNotFound)
	}
	return shared.GetFileResponse{File: shared.FileInfo{Name: req.Path, Size: int64(len(data))}, Data: data}, nil
}

func (b *backend) ListFiles(_ context.Context, req shared.ListFilesRequest) (shared.ListFilesResponse, error) {
	s, err := b.get(req.SessionID)
	if err != nil {
		return shared.ListFilesResponse{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if req.Path != "" {
		if _, ok := s.files[req.Path]; !ok {
			return shared.ListFilesResponse{}, fmt.Errorf("list_files %s: no such directory: %w", req.Path, shared.ErrNotFound)
		}
	}
	var out shared.ListFilesResponse
	for name, data := range s.files {
		out.Files = append(out.Files, shared.FileInfo{Name: name, Size: int64(len(data))})
	}
	sort.Slice(out.Files, func(i, j int) bool { return out.Files[i].Name < out.Files[j].Name })
	return out, nil
}

func main() {
	logger := plugin.NewPluginLogger("sessions")
	delay, _ := strconv.Atoi(os.Getenv("ORQEST_TEST_PAUSE_DELAY_MS"))
	plugin.Serve(&backend{typed: os.Getenv("ORQEST_TEST_TYPED_NOT_FOUND") == "1", pauseDir: os.Getenv("ORQEST_TEST_PAUSE_DIR"),
		pauseDelay: time.Duration(delay) * time.Millisecond, sessions: map[string]*session{}}, plugin.WithLogger(logger))
}
