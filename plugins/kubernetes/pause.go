package kubernetes

// Pause and resume of a session (session.Pauser) without memory: a pod
// has no checkpoint the API server offers, so the runtime's plain globals
// and the workspace's files are saved, signed, into paused_dir on the
// plugin's machine (session.PausedStore, the kit's pause without memory),
// and the pod is deleted: no process of the session runs and the cluster
// holds nothing of it but the user's library claim. Resume creates a new
// pod for the same session id and user and gives the saved state back to
// its runtime once MCP is up.

import (
	"context"
	"fmt"

	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/shared"
)

// pauseSigDomain separates kubernetes' signatures of saved state.
const pauseSigDomain = "orqest-kubernetes-pause-v1"

var (
	_ session.Pauser  = driver{}
	_ session.Resumed = (*agent)(nil)
)

// paused is the configured paused directory.
func (d driver) paused() session.PausedStore {
	return session.PausedStore{Root: d.b.config().PausedDir, Domain: pauseSigDomain}
}

// Pause implements session.Pauser: the runtime's plain globals and
// workspace files saved and signed, then the pod deleted. A save that
// fails leaves the pod running and nothing on disk.
func (d driver) Pause(ctx context.Context, a session.Agent, id string, meta []byte) (shared.PauseResponse, error) {
	s, ok := a.(*agent)
	if !ok {
		return shared.PauseResponse{}, fmt.Errorf("not a session pod: %w", shared.ErrInternal)
	}
	resp, err := d.paused().Pause(ctx, s, s.Runtime, id, s.user, meta)
	if err == nil {
		d.b.logger.Debug("session pod paused", "session", id, "pod", s.pod, "kept", len(resp.Kept), "not_kept", len(resp.NotKept), "bytes", resp.Bytes)
	}
	return resp, err
}

// Resume implements session.Pauser: a new pod for the session's id and
// user, whose runtime gets the saved state back when it is bound.
func (d driver) Resume(ctx context.Context, id string) (session.Agent, []byte, error) {
	rec, err := d.paused().Load(id)
	if err != nil {
		return nil, nil, err
	}
	kc, err := d.b.client()
	if err != nil {
		return nil, nil, fmt.Errorf("resume: %w", err)
	}
	s, err := d.b.prepare(ctx, kc, d.b.config(), rec.User, id)
	if err != nil {
		return nil, nil, err
	}
	s.Restore = &rec
	return s, rec.Meta, nil
}

// Forget implements session.Pauser.
func (d driver) Forget(id string) (bool, error) { return d.paused().Forget(id) }
