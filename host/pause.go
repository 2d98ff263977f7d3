package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orqest/sandbox/shared"
)

// SessionPaused: the backend saved the session to disk and ended
// everything of it that ran (Sandbox.PauseSession); it holds no CPU and no
// memory and does not count against the session caps. The next call on
// it, or ResumeSession, resumes it.
const SessionPaused SessionState = "paused"

// ReopenPaused is the cause of a resume the host did for a call on a
// paused session (the cause label of orqest_sessions_reopened_total).
const ReopenPaused = "paused"

// Audit records of pause and resume:
//
//	sandbox.session_paused   {session, user, memory, bytes, not_kept, reason}
//	sandbox.session_resumed  {session, user, memory, state_lost, not_kept, cause}
const (
	EventSessionPaused  = "sandbox.session_paused"
	EventSessionResumed = "sandbox.session_resumed"
)

// pauser checks that the sandbox's plugin declares CapPause.
func (s *Sandbox) pauser(ctx context.Context, op string) error {
	info, err := s.inst.infoOf(ctx)
	if err != nil {
		return err
	}
	if !info.Has(shared.CapPause) {
		return fmt.Errorf("sandbox %q: %s: plugin %q cannot pause sessions (no %q capability; gvisor, docker and kubernetes sessions can): %w",
			s.cfg.Name, op, s.cfg.Plugin, shared.CapPause, shared.ErrNotSupported)
	}
	return nil
}

// PauseSession pauses session id (see shared.SessionPauser): the backend
// saves it to disk and ends its processes; it then holds no CPU and no
// memory, and survives a restart of the plugin and of the host. A session
// with a call in flight is refused with shared.ErrSessionBusy and keeps
// running untouched; a backend without CapPause is shared.ErrNotSupported.
// The next call on a paused session resumes it (as ResumeSession does).
func (s *Sandbox) PauseSession(ctx context.Context, id string) (shared.PauseResponse, error) {
	if err := s.pauser(ctx, "pause"); err != nil {
		return shared.PauseResponse{}, err
	}
	t := s.host.sessions
	r := t.lookup(s, id)
	if r == nil {
		// Not opened through this host: the plugin decides.
		return s.pauseOnPlugin(ctx, id)
	}
	r.op.Lock()
	defer r.op.Unlock()
	t.mu.Lock()
	state, busy, gen := r.state, r.inFlight, r.gen
	t.mu.Unlock()
	switch {
	case state == SessionPaused:
		return shared.PauseResponse{}, fmt.Errorf("sandbox %q: session %q is paused already: %w", s.Name(), id, shared.ErrSessionPaused)
	case state != SessionOpen:
		return shared.PauseResponse{}, fmt.Errorf("sandbox %q: session %q holds nothing to pause (it was closed after %s; its next call opens it again): %w", s.Name(), id, reasonText(r), shared.ErrFailedPrecondition)
	case busy > 0:
		return shared.PauseResponse{}, fmt.Errorf("sandbox %q: session %q has %d call(s) in flight; pause it when they have ended (nothing was changed): %w", s.Name(), id, busy, shared.ErrSessionBusy)
	}
	if live, ok := s.inst.liveGen(); !ok || live != gen {
		return shared.PauseResponse{}, fmt.Errorf("sandbox %q: session %q was lost with an earlier plugin process (its next call opens it again, state lost): nothing to pause: %w", s.Name(), id, shared.ErrFailedPrecondition)
	}
	resp, err := s.pauseOnPlugin(ctx, id)
	if err != nil {
		return resp, err
	}
	s.markPaused(r, resp, "request")
	return resp, nil
}

// markPaused records that r's backend session is paused.
func (s *Sandbox) markPaused(r *sessionRecord, resp shared.PauseResponse, reason string) {
	t := s.host.sessions
	t.mu.Lock()
	r.state = SessionPaused
	t.mu.Unlock()
	s.host.opts.logger.Info("session paused", "sandbox", s.Name(), "session", r.id, "user", r.user, "memory", resp.Memory, "bytes", resp.Bytes, "reason", reason)
	t.record(s, EventSessionPaused, map[string]any{"session": r.id, "user": r.user, "memory": resp.Memory, "bytes": resp.Bytes, "not_kept": resp.NotKept, "reason": reason})
}

func (s *Sandbox) pauseOnPlugin(ctx context.Context, id string) (shared.PauseResponse, error) {
	var resp shared.PauseResponse
	err := s.inst.do(ctx, "Pause", func(p shared.Sandbox) error {
		sp, ok := p.(shared.SessionPauser)
		if !ok {
			return fmt.Errorf("pause: %w", shared.ErrNotSupported)
		}
		var err error
		resp, err = sp.Pause(ctx, shared.PauseRequest{SessionID: id})
		return err
	})
	return resp, err
}

// ResumeSession brings back paused session id: one this host paused, or
// one paused before the host (or its plugin) restarted, which the host
// then tracks again with the user the backend saved. Its calls run again
// where they left off: with its memory on a backend with CapPauseMemory,
// else with what the response lists as kept (StateLost otherwise).
func (s *Sandbox) ResumeSession(ctx context.Context, id string) (shared.ResumeResponse, error) {
	if err := s.pauser(ctx, "resume"); err != nil {
		return shared.ResumeResponse{}, err
	}
	t := s.host.sessions
	r := t.lookup(s, id)
	if r != nil {
		r.op.Lock()
		defer r.op.Unlock()
		if state := t.stateOf(r); state != SessionPaused {
			return shared.ResumeResponse{}, fmt.Errorf("sandbox %q: session %q is not paused (%s): %w", s.Name(), id, state, shared.ErrFailedPrecondition)
		}
		var resp shared.ResumeResponse
		err := s.inst.doOn(ctx, "Resume", func(l *launched) error {
			var err error
			resp, err = s.resumeOn(ctx, l, r, "request")
			return err
		})
		return resp, err
	}
	// Paused before this host started: the plugin finds it on disk.
	var resp shared.ResumeResponse
	var gen int
	err := s.inst.doOn(ctx, "Resume", func(l *launched) error {
		sp, ok := l.impl.(shared.SessionPauser)
		if !ok {
			return fmt.Errorf("resume: %w", shared.ErrNotSupported)
		}
		var err error
		resp, err = sp.Resume(ctx, shared.ResumeRequest{SessionID: id})
		gen = l.gen
		return err
	})
	if err != nil {
		return resp, err
	}
	t.add(s, id, resp.UserID, gen)
	s.host.opts.logger.Info("session resumed", "sandbox", s.Name(), "session", id, "user", resp.UserID, "memory", resp.Memory, "state_lost", resp.StateLost, "cause", "request")
	t.record(s, EventSessionResumed, map[string]any{"session": id, "user": resp.UserID, "memory": resp.Memory, "state_lost": resp.StateLost, "not_kept": resp.NotKept, "cause": "request"})
	return resp, nil
}

// resumeOn resumes r's backend session on l and records it open; r.op is
// held and r is SessionPaused.
func (s *Sandbox) resumeOn(ctx context.Context, l *launched, r *sessionRecord, cause string) (shared.ResumeResponse, error) {
	sp, ok := l.impl.(shared.SessionPauser)
	if !ok {
		return shared.ResumeResponse{}, fmt.Errorf("resume: %w", shared.ErrNotSupported)
	}
	t := s.host.sessions
	release, err := t.reserve(ctx, s, r.user)
	if err != nil {
		return shared.ResumeResponse{}, fmt.Errorf("sandbox %q: session %q is paused and cannot be resumed now: %w", s.Name(), r.id, err)
	}
	defer release()
	resp, err := sp.Resume(ctx, shared.ResumeRequest{SessionID: r.id})
	if err != nil {
		return resp, fmt.Errorf("sandbox %q: resume session %q: %w", s.Name(), r.id, err)
	}
	now := time.Now()
	t.mu.Lock()
	r.state, r.gen, r.lastUsed = SessionOpen, l.gen, now
	if resp.StateLost {
		r.epoch++
	}
	t.mu.Unlock()
	s.host.opts.logger.Info("session resumed", "sandbox", s.Name(), "session", r.id, "user", r.user, "memory", resp.Memory, "state_lost", resp.StateLost, "cause", cause)
	t.record(s, EventSessionResumed, map[string]any{"session": r.id, "user": r.user, "memory": resp.Memory, "state_lost": resp.StateLost, "not_kept": resp.NotKept, "cause": cause})
	return resp, nil
}

// pauseIdle pauses r, idle for its sandbox's idle_timeout under
// `on_idle = "pause"`, instead of closing it; r is SessionClosing and its
// op is held. false: it could not be paused (the caller closes it).
func (t *sessionTable) pauseIdle(ctx context.Context, r *sessionRecord) bool {
	sb := r.sb
	gen, ok := sb.inst.liveGen()
	if !ok || gen != r.gen || sb.pauser(ctx, "pause") != nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, reclaimTimeout)
	defer cancel()
	resp, err := sb.pauseOnPlugin(cctx, r.id)
	if err != nil {
		if !errors.Is(err, shared.ErrSessionBusy) {
			t.h.opts.logger.Warn("on_idle pause failed; closing the session instead", "sandbox", sb.Name(), "session", r.id, "error", err)
			return false
		}
		// A call began at the plugin meanwhile: it stays open.
		t.mu.Lock()
		r.state = SessionOpen
		t.mu.Unlock()
		return true
	}
	sb.markPaused(r, resp, ReclaimIdle)
	return true
}

// resumePaused resumes c's session on l after the plugin refused a call
// on it as paused (a pause that ran while the call was on its way); r.op
// orders it after that pause. A session the host does not record as
// paused is left as it is: the refusal stands.
func (s *Sandbox) resumePaused(ctx context.Context, c *sessionCall, l *launched) error {
	t, r := c.t, c.rec
	r.op.Lock()
	defer r.op.Unlock()
	if t.stateOf(r) != SessionPaused {
		return fmt.Errorf("sandbox %q: session %q: the plugin says it is paused: %w", s.Name(), r.id, shared.ErrSessionPaused)
	}
	resp, err := s.resumeOn(ctx, l, r, ReopenPaused)
	if err != nil {
		return err
	}
	c.reopened = c.reopened || resp.StateLost
	return nil
}

// stateOf reads r's state under t.mu.
func (t *sessionTable) stateOf(r *sessionRecord) SessionState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return r.state
}
