package docker

// Pause and resume of a session (session.Pauser) without a checkpoint of
// memory (the engine here has no `docker checkpoint`): the runtime saves
// its stateful interpreters' globals that are plain data and the
// workspace's files, signed into paused_dir (session.PausedStore, the
// kit's pause without memory), and the container is removed: no process of
// the session runs. The user's volume stays. Resume starts a new container
// for the same session id and user and gives the saved state back to its
// runtime once MCP is up.

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/shared"
)

// pauseSigDomain separates docker's signatures of saved state.
const pauseSigDomain = "orqest-docker-pause-v1"

var (
	_ session.Pauser  = driver{}
	_ session.Resumed = (*agent)(nil)
)

// normalizePaused sets paused_dir's default (the user cache directory's
// orqest-sandbox/docker-paused) or checks that it is absolute.
func (c *Config) normalizePaused() error {
	return session.NormalizePausedDir("docker", &c.PausedDir, "docker-paused")
}

// paused is the configured paused directory.
func (d driver) paused() session.PausedStore {
	return session.PausedStore{Root: d.b.config().PausedDir, Domain: pauseSigDomain}
}

// Pause implements session.Pauser: the runtime's plain globals and
// workspace files saved and signed (session.PausedStore), then the
// container removed. A save that fails leaves the container running and
// nothing on disk.
func (d driver) Pause(ctx context.Context, a session.Agent, id string, meta []byte) (shared.PauseResponse, error) {
	s, ok := a.(*agent)
	if !ok {
		return shared.PauseResponse{}, fmt.Errorf("not a session container: %w", shared.ErrInternal)
	}
	resp, err := d.paused().Pause(ctx, s, s.Runtime, id, s.user, meta)
	if err == nil {
		d.b.logger.Debug("session container paused", "session", id, "container", s.name, "kept", len(resp.Kept), "not_kept", len(resp.NotKept), "bytes", resp.Bytes)
	}
	return resp, err
}

// Resume implements session.Pauser: a new container for the session's id
// and user, whose runtime gets the saved state back when it is bound
// (agent.bound).
func (d driver) Resume(ctx context.Context, id string) (session.Agent, []byte, error) {
	rec, err := d.paused().Load(id)
	if err != nil {
		return nil, nil, err
	}
	b := d.b
	b.reapOnce(ctx)
	dc, err := b.client()
	if err != nil {
		return nil, nil, err
	}
	s, err := b.prepare(ctx, b.config(), dc, rec.User, id)
	if err != nil {
		return nil, nil, err
	}
	s.Restore = &rec
	return s, rec.Meta, nil
}

// Forget implements session.Pauser.
func (d driver) Forget(id string) (bool, error) { return d.paused().Forget(id) }

// bound gives the kit's PlainResume the runtime a's MCP session cs
// reaches; a container Resume started gets its saved state back.
func (a *agent) bound(ctx context.Context, cs *mcp.ClientSession, hello rtproto.Hello) (*mcp.ClientSession, error) {
	return a.Bound(ctx, cs, rtclient.Target{MCP: cs, Secret: hello.Secret, User: hello.User, Session: hello.Session, Name: a.Name(), Gone: a.gone})
}
