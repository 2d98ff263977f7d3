package rtclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// CheckExecute checks the names an ExecuteRequest carries before anything
// runs: the tool name (a library call) and the agent and user ids.
func CheckExecute(req shared.ExecuteRequest) error {
	if req.ToolName != "" {
		if err := rtproto.CheckToolName(req.ToolName); err != nil {
			return fmt.Errorf("execute: %v: %w", err, shared.ErrInvalidArgument)
		}
	}
	for _, id := range []struct{ kind, v string }{{"agent_id", req.AgentID}, {"user_id", req.UserID}} {
		if id.v == "" {
			continue
		}
		if err := rtproto.CheckID(id.kind, id.v); err != nil {
			return fmt.Errorf("execute: %v: %w", err, shared.ErrInvalidArgument)
		}
	}
	return nil
}

// RejectedResponse is the response to a body that static validation
// rejected: shared.Rejected with the limits the call would have run with
// (the defaults for those req leaves zero) and the time since start.
func RejectedResponse(findings []shared.Finding, req shared.ExecuteRequest, start time.Time) shared.ExecuteResponse {
	l := shared.Limits{TimeoutMS: req.Timeout.Milliseconds(), MemoryMB: req.MemoryMB, MaxOutputBytes: req.MaxOutputBytes}
	if req.Timeout == 0 {
		l.TimeoutMS = shared.DefaultTimeout.Milliseconds()
	}
	if l.MemoryMB == 0 {
		l.MemoryMB = shared.DefaultMemoryMB
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = shared.DefaultMaxOutputBytes
	}
	res := shared.Rejected(findings, l)
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	return shared.ExecuteResponse{Result: res}
}

// ExecuteArgs are execute_python's arguments for req; args are req.Args
// as runner.Prepare checked them. Zero limits stay zero: the runtime
// applies the session's defaults.
func ExecuteArgs(req shared.ExecuteRequest, args json.RawMessage) rtproto.ExecuteArgs {
	return rtproto.ExecuteArgs{
		Code:           req.Code,
		Args:           args,
		AllowedImports: req.AllowedImports,
		AgentID:        req.AgentID,
		Dependencies:   req.Dependencies,
		TimeoutS:       req.Timeout.Seconds(),
		MemoryMB:       req.MemoryMB,
		MaxOutputBytes: req.MaxOutputBytes,
		ToolName:       req.ToolName,
		Stateful:       req.Stateful,
	}
}

// Finder returns the Target of an open session (shared.ErrNotFound when
// there is none).
type Finder func(sessionID string) (Target, error)

// Registry holds a plugin's open sessions by id. An id is reserved while
// its session starts, so two Opens of one id cannot both start one.
type Registry[S any] struct {
	mu sync.Mutex
	m  map[string]*S // nil value: reserved
}

// Open checks the ids of req (an empty SessionID gets "s-" and random hex
// from newID), reserves the id, runs start and records its session.
func (r *Registry[S]) Open(ctx context.Context, req shared.OpenRequest, newID func() string, start func(ctx context.Context, user, sessionID string) (*S, error)) (shared.OpenResponse, error) {
	if req.SessionID == "" {
		req.SessionID = "s-" + newID()
	}
	if err := errors.Join(rtproto.CheckID("user_id", req.UserID), rtproto.CheckID("session_id", req.SessionID)); err != nil {
		return shared.OpenResponse{}, fmt.Errorf("open: %v: %w", err, shared.ErrInvalidArgument)
	}
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]*S{}
	}
	if _, ok := r.m[req.SessionID]; ok {
		r.mu.Unlock()
		return shared.OpenResponse{}, fmt.Errorf("open: session %q is already open: %w", req.SessionID, shared.ErrFailedPrecondition)
	}
	r.m[req.SessionID] = nil
	r.mu.Unlock()
	s, err := start(ctx, req.UserID, req.SessionID)
	r.mu.Lock()
	if err != nil {
		delete(r.m, req.SessionID)
	} else {
		r.m[req.SessionID] = s
	}
	r.mu.Unlock()
	if err != nil {
		return shared.OpenResponse{}, err
	}
	return shared.OpenResponse{SessionID: req.SessionID}, nil
}

// Get returns the open session id.
func (r *Registry[S]) Get(id string) (*S, error) {
	if err := rtproto.CheckID("session_id", id); err != nil {
		return nil, fmt.Errorf("%v: %w", err, shared.ErrInvalidArgument)
	}
	r.mu.Lock()
	s := r.m[id]
	r.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("no open session %q (call Open first): %w", id, shared.ErrNotFound)
	}
	return s, nil
}

// Take removes and returns the open session id (Close).
func (r *Registry[S]) Take(id string) (*S, error) {
	if err := rtproto.CheckID("session_id", id); err != nil {
		return nil, fmt.Errorf("%v: %w", err, shared.ErrInvalidArgument)
	}
	r.mu.Lock()
	s := r.m[id]
	if s != nil {
		delete(r.m, id)
	}
	r.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("no open session %q: %w", id, shared.ErrNotFound)
	}
	return s, nil
}

// Drop removes session s of id if it is still the one recorded (a session
// that died).
func (r *Registry[S]) Drop(id string, s *S) {
	r.mu.Lock()
	if r.m[id] == s {
		delete(r.m, id)
	}
	r.mu.Unlock()
}

// TakeAll removes and returns every open session (Shutdown).
func (r *Registry[S]) TakeAll() []*S {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []*S
	for id, s := range r.m {
		if s != nil {
			all = append(all, s)
			delete(r.m, id)
		}
	}
	return all
}

// Each calls f for every open session (under the registry's lock: f must
// not call the registry).
func (r *Registry[S]) Each(f func(*S)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.m {
		if s != nil {
			f(s)
		}
	}
}

// Temporary opens a session for one sessionless call: user (or
// "anonymous") with a fresh "tmp-" id made by newID. done closes it, with
// a bound of its own even when ctx has ended, and logs a failure.
func Temporary(ctx context.Context, user string, newID func() string, open func(context.Context, shared.OpenRequest) (shared.OpenResponse, error), closeFn func(context.Context, shared.CloseRequest) (shared.CloseResponse, error), logger hclog.Logger) (id string, done func(), err error) {
	if user == "" {
		user = "anonymous"
	}
	id = "tmp-" + newID()
	if _, err := open(ctx, shared.OpenRequest{UserID: user, SessionID: id}); err != nil {
		return "", nil, err
	}
	return id, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		if _, err := closeFn(cctx, shared.CloseRequest{SessionID: id}); err != nil {
			logger.Warn("closing a temporary session", "session", id, "error", err)
		}
	}, nil
}
