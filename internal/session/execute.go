package session

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// Execute checks req, validates its code and runs it in the session's
// agent (a temporary session's without a SessionID, when the Config says
// Sessionless). The call in flight when the agent dies fails with
// shared.ErrUnavailable naming the death; the next call on the session
// gets a fresh agent and a result with StateLost.
func (m *Manager) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	return m.execute(ctx, req, nil)
}

// ExecuteStream implements shared.Streamer: Execute, with the code's
// stdout and stderr sent as the agent streams them. A send that fails
// cancels the call.
func (m *Manager) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk) error) (shared.ExecuteResponse, error) {
	return shared.StreamExecute(ctx, send, func(ctx context.Context, onChunk func(shared.OutputChunk)) (shared.ExecuteResponse, error) {
		return m.execute(ctx, req, onChunk)
	})
}

func (m *Manager) execute(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk)) (shared.ExecuteResponse, error) {
	start := time.Now()
	// The limits are resolved once, here (the host sent them resolved;
	// a plugin called directly gets the contract's defaults), and the
	// agent receives them as they are.
	p, err := shared.Prepare(req, shared.Defaults{MaxCodeBytes: m.cfg.MaxCodeBytes, MaxArgsBytes: m.cfg.MaxArgsBytes})
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	req = p.Apply(req)
	if err := checkNames(req); err != nil {
		return shared.ExecuteResponse{}, err
	}
	if m.cfg.Check != nil {
		if err := m.cfg.Check(req); err != nil {
			return shared.ExecuteResponse{}, fmt.Errorf("execute: %w", err)
		}
	}
	if m.cfg.Validate != nil {
		if findings := m.cfg.Validate(ctx, req.Code, req.AllowedImports, req.Verdict); len(findings) > 0 {
			res := shared.Rejected(findings, p.Limits())
			res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
			return shared.ExecuteResponse{Result: res}, nil
		}
	}
	if req.SessionID == "" {
		if req.Stateful {
			// A temporary session would throw the state away with the call.
			return shared.ExecuteResponse{}, &shared.FieldError{Field: "stateful", Reason: "a stateful call runs in a session's long-lived interpreter: open a session (Open) and pass its id"}
		}
		if !m.cfg.Sessionless {
			return shared.ExecuteResponse{}, &shared.FieldError{Field: "session_id", Reason: "this backend runs a call without a session itself"}
		}
		id, done, err := m.temporary(ctx, req.UserID)
		if err != nil {
			return shared.ExecuteResponse{}, err
		}
		defer done()
		req.SessionID = id
	}
	s, err := m.lookup(req.SessionID)
	if err != nil {
		return shared.ExecuteResponse{}, fmt.Errorf("execute: %w", err)
	}
	if req.UserID != "" && req.UserID != s.user {
		return shared.ExecuteResponse{}, fmt.Errorf("execute: session %q belongs to another user: %w", req.SessionID, shared.ErrInvalidArgument)
	}
	c, err := m.serving(ctx, s)
	if err != nil {
		return shared.ExecuteResponse{}, fmt.Errorf("execute: %w", err)
	}
	defer s.release()
	// The tool library's events come back with the result.
	res, events, err := s.target(c).ExecuteStream(ctx, executeArgs(req, p.Args), p.Timeout, send)
	if err != nil {
		if c.dead() {
			m.remove(c, s)
			return shared.ExecuteResponse{}, fmt.Errorf("%w; the next call on session %q starts a fresh agent (state lost, the user's persistent data kept)", err, s.id)
		}
		return shared.ExecuteResponse{}, err
	}
	if s.takeLost(c) {
		res.StateLost = true
	}
	return shared.ExecuteResponse{Result: res, Events: events}, nil
}

// checkNames checks the names a request carries before anything runs: a
// library call's tool name and the agent and user ids.
func checkNames(req shared.ExecuteRequest) error {
	if req.ToolName != "" {
		if err := rtproto.CheckToolName(req.ToolName); err != nil {
			return fmt.Errorf("execute: %w: %w", err, shared.ErrInvalidArgument)
		}
	}
	for _, id := range []struct{ kind, v string }{{"agent_id", req.AgentID}, {"user_id", req.UserID}} {
		if id.v == "" {
			continue
		}
		if err := rtproto.CheckID(id.kind, id.v); err != nil {
			return fmt.Errorf("execute: %w: %w", err, shared.ErrInvalidArgument)
		}
	}
	return nil
}

// executeArgs are execute_python's arguments for req, whose limits
// shared.Prepare resolved; args are req.Args as it checked them.
func executeArgs(req shared.ExecuteRequest, args json.RawMessage) rtproto.ExecuteArgs {
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

// temporary opens a session for one sessionless call: user (or
// "anonymous") with a fresh "tmp-" id. done closes it, bounded by
// StopTimeout even when ctx has ended, and logs a failure.
func (m *Manager) temporary(ctx context.Context, user string) (id string, done func(), err error) {
	if user == "" {
		user = "anonymous"
	}
	id = "tmp-" + randomHex(8)
	if _, err := m.Open(ctx, shared.OpenRequest{UserID: user, SessionID: id}); err != nil {
		return "", nil, err
	}
	return id, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StopTimeout)
		defer cancel()
		if _, err := m.Close(cctx, shared.CloseRequest{SessionID: id}); err != nil {
			m.log.Warn("closing a temporary session", "session", id, "error", err)
		}
	}, nil
}

// Target returns the runtime serving open session id, reopening it when
// its agent had died: what every session call speaks to, exported for a
// backend's own calls and tests (a forged-token test talks MCP to it
// directly).
func (m *Manager) Target(ctx context.Context, id string) (rtclient.Target, error) {
	t, done, err := m.call(ctx, id)
	if err != nil {
		return rtclient.Target{}, err
	}
	done()
	return t, nil
}

// call is Target for one call of the kit: done ends it (until then the
// session counts it in flight and is not paused).
func (m *Manager) call(ctx context.Context, id string) (rtclient.Target, func(), error) {
	s, err := m.lookup(id)
	if err != nil {
		return rtclient.Target{}, nil, err
	}
	c, err := m.serving(ctx, s)
	if err != nil {
		return rtclient.Target{}, nil, err
	}
	return s.target(c), s.release, nil
}
