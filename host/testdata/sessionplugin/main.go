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
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
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
	typed bool

	mu       sync.Mutex
	sessions map[string]*session
	next     int
}

func (b *backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	return shared.InfoResponse{Name: "sessions", Tier: 2, Version: "0.0.1", APIVersions: []int{shared.APIVersion},
		Capabilities: []shared.Capability{shared.CapSessions, shared.CapFiles, shared.CapFreshProcess}}, nil
}

func (b *backend) Configure(context.Context, shared.ConfigureRequest) (shared.ConfigureResponse, error) {
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
	plugin.Serve(&backend{typed: os.Getenv("ORQEST_TEST_TYPED_NOT_FOUND") == "1", sessions: map[string]*session{}}, plugin.WithLogger(logger))
}
