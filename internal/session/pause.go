package session

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// Pauser is optional for a Driver whose agents can be saved to disk and
// brought back (shared.SessionPauser): the Manager then implements Pause
// and Resume. What it saves is keyed by the session's id and outlives the
// plugin's process.
type Pauser interface {
	// Pause saves agent a of session id, with meta (the kit's record of
	// the session: user, tokens' secret; to be kept private, 0600) beside
	// it, and ends a: no process of it runs afterwards. On an error a is
	// left running when the backend can, and nothing is kept on disk.
	Pause(ctx context.Context, a Agent, id string, meta []byte) (shared.PauseResponse, error)
	// Resume starts an agent from what Pause saved for id and returns it
	// with its meta; the saved state stays until Forget. Nothing saved for
	// id is an error wrapping shared.ErrSessionNotFound. The agent's
	// Connect initializes MCP again: it already has its hello.
	Resume(ctx context.Context, id string) (Agent, []byte, error)
	// Forget removes what Pause saved for id and reports whether there
	// was anything.
	Forget(id string) (bool, error)
}

// Resumed is optional for an Agent that Pauser.Resume returned without
// the memory it had: once it is bound, it sets in resp what came back of
// the session (Memory false, StateLost, the globals Kept and NotKept).
type Resumed interface {
	Resumed(resp *shared.ResumeResponse)
}

// pausedMeta is the kit's record of a paused session, saved with it.
type pausedMeta struct {
	User   string    `json:"user"`
	Secret []byte    `json:"secret"`
	Opened time.Time `json:"opened"`
}

func (m *Manager) pauser(op string) (Pauser, error) {
	if err := m.available(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	p, ok := m.cfg.Driver.(Pauser)
	if !ok {
		return nil, fmt.Errorf("%s: this backend cannot pause sessions: %w", op, shared.ErrNotSupported)
	}
	return p, nil
}

// Pause implements shared.SessionPauser: session req.SessionID's agent is
// saved by the Driver and ended. A session with a call in flight is
// refused (shared.ErrSessionBusy) and untouched; so is one whose agent has
// ended (its next call starts a fresh one: there is nothing to save). New
// calls wait while the pause runs and are then refused with
// shared.ErrSessionPaused until Resume.
func (m *Manager) Pause(ctx context.Context, req shared.PauseRequest) (shared.PauseResponse, error) {
	p, err := m.pauser("pause")
	if err != nil {
		return shared.PauseResponse{}, err
	}
	s, err := m.lookup(req.SessionID)
	if err != nil {
		return shared.PauseResponse{}, fmt.Errorf("pause: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return shared.PauseResponse{}, fmt.Errorf("pause: %w", notOpen(s.id))
	case s.paused:
		return shared.PauseResponse{}, fmt.Errorf("pause: session %q is paused already: %w", s.id, shared.ErrSessionPaused)
	case s.busy > 0:
		return shared.PauseResponse{}, fmt.Errorf("pause: session %q has %d call(s) in flight; pause it when they have ended (nothing was changed): %w", s.id, s.busy, shared.ErrSessionBusy)
	case s.cur == nil || s.cur.dead():
		return shared.PauseResponse{}, fmt.Errorf("pause: session %q has no running agent (it had ended; its next call starts a fresh one), so there is nothing to save: %w", s.id, shared.ErrFailedPrecondition)
	}
	c := s.cur
	meta, err := json.Marshal(pausedMeta{User: s.user, Secret: s.secret, Opened: s.opened})
	if err != nil {
		return shared.PauseResponse{}, fmt.Errorf("pause: %v: %w", err, shared.ErrInternal)
	}
	c.pausing.Store(true)
	resp, err := p.Pause(ctx, c.agent, s.id, meta)
	if err != nil {
		c.pausing.Store(false)
		if c.dead() {
			// The pause failed after its agent ended: the session is as if
			// its agent had died; its next call reopens it.
			go m.remove(c, s)
		}
		return shared.PauseResponse{}, fmt.Errorf("pause: session %q: %w", s.id, err)
	}
	c.stopOnce.Do(func() { close(c.stopping) }) // Pause ended the agent: nothing left to stop
	if c.mcp != nil {
		go c.mcp.Close()
	}
	s.cur, s.paused = nil, true
	m.log.Info("session paused", "session", s.id, "user", s.user, "memory", resp.Memory, "bytes", resp.Bytes)
	return resp, nil
}

// Resume implements shared.SessionPauser: the Driver starts the agent
// that Pause saved, and the session serves calls again under its id, user
// and secret. The session may have been paused by an earlier process of
// the plugin: it is then registered from what was saved with it.
func (m *Manager) Resume(ctx context.Context, req shared.ResumeRequest) (shared.ResumeResponse, error) {
	p, err := m.pauser("resume")
	if err != nil {
		return shared.ResumeResponse{}, err
	}
	if err := rtproto.CheckID("session_id", req.SessionID); err != nil {
		return shared.ResumeResponse{}, fmt.Errorf("resume: %w: %w", err, shared.ErrInvalidArgument)
	}
	id := req.SessionID
	m.mu.Lock()
	if m.shutdown {
		m.mu.Unlock()
		return shared.ResumeResponse{}, fmt.Errorf("resume: the plugin is shutting down: %w", shared.ErrUnavailable)
	}
	s, known := m.sessions[id]
	switch {
	case known && s == nil:
		m.mu.Unlock()
		return shared.ResumeResponse{}, fmt.Errorf("resume: session %q is being opened: %w", id, shared.ErrFailedPrecondition)
	case !known:
		m.sessions[id] = nil // reserved while it resumes from disk
	}
	m.mu.Unlock()

	if known {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return shared.ResumeResponse{}, fmt.Errorf("resume: %w", notOpen(id))
		}
		if !s.paused {
			return shared.ResumeResponse{}, fmt.Errorf("resume: session %q is not paused: %w", id, shared.ErrFailedPrecondition)
		}
	}
	c, user, err := m.restore(ctx, p, s, id)
	if err == nil {
		c.s.cur, c.s.paused = c.conn, false
	}
	if !known {
		m.mu.Lock()
		if err != nil || m.shutdown {
			delete(m.sessions, id)
		} else {
			m.sessions[id] = c.s
		}
		late := err == nil && m.shutdown
		m.mu.Unlock()
		if late {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StopTimeout)
			defer cancel()
			_ = c.conn.stop(sctx)
			return shared.ResumeResponse{}, fmt.Errorf("resume: the plugin is shutting down: %w", shared.ErrUnavailable)
		}
	}
	if err != nil {
		return shared.ResumeResponse{}, fmt.Errorf("resume: session %q: %w", id, err)
	}
	if _, ferr := p.Forget(id); ferr != nil {
		m.log.Warn("resume: removing the saved state of a resumed session", "session", id, "error", ferr)
	}
	resp := shared.ResumeResponse{SessionID: id, UserID: user, Memory: true}
	if r, ok := c.conn.agent.(Resumed); ok {
		r.Resumed(&resp)
	}
	m.log.Info("session resumed", "session", id, "user", user, "agent", c.conn.agent.Name(), "memory", resp.Memory, "not_kept", len(resp.NotKept))
	return resp, nil
}

// restored is a resumed agent bound to its session.
type restored struct {
	s    *session
	conn *conn
}

// restore starts the agent saved for id and binds it to s (nil: a session
// paused by an earlier process, made from the saved meta).
func (m *Manager) restore(ctx context.Context, p Pauser, s *session, id string) (restored, string, error) {
	st := m.current()
	ctx, cancel := context.WithTimeout(ctx, st.OpenTimeout)
	defer cancel()
	a, raw, err := p.Resume(ctx, id)
	if err != nil {
		return restored{}, "", err
	}
	if s == nil {
		var meta pausedMeta
		if err := json.Unmarshal(raw, &meta); err != nil || len(meta.Secret) < rtproto.MinSecretBytes || rtproto.CheckID("user_id", meta.User) != nil {
			m.stopAgent(ctx, a)
			return restored{}, "", fmt.Errorf("the saved record of the session is unreadable (%v): %w", err, shared.ErrInternal)
		}
		s = &session{id: id, user: meta.User, secret: meta.Secret, opened: meta.Opened, paused: true}
	}
	c, err := m.bind(ctx, st, a, s)
	if err != nil {
		return restored{}, "", err // bind stopped the agent; the saved state stays
	}
	return restored{s: s, conn: c}, s.user, nil
}

// stopAgent stops a, bounded by StopTimeout.
func (m *Manager) stopAgent(ctx context.Context, a Agent) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StopTimeout)
	defer cancel()
	if err := a.Stop(sctx); err != nil {
		m.log.Warn("stopping an agent", "agent", a.Name(), "error", err)
	}
}

// forgetPaused removes what was saved for session id, paused by this
// Driver (in this process or an earlier one); false when nothing was.
func (m *Manager) forgetPaused(id string) (bool, error) {
	p, ok := m.cfg.Driver.(Pauser)
	if !ok {
		return false, nil
	}
	found, err := p.Forget(id)
	if err != nil {
		return found, fmt.Errorf("removing the saved state of paused session %q: %v: %w", id, err, shared.ErrInternal)
	}
	return found, nil
}

// errPaused is the refusal of a call on a paused session.
func errPaused(id string) error {
	return fmt.Errorf("session %q is paused; resume it first (Resume, `orqest-sandbox session resume`): %w", id, shared.ErrSessionPaused)
}
