package gvisor

// Pause and resume of a session (session.Pauser): `runsc checkpoint`
// saves the whole sandbox — the agent runtime, its stateful interpreters
// with every global, the /workspace tmpfs — to an image in the session's
// directory under paused_dir and ends it, so no process of the session
// runs; `runsc restore` of that image on a fresh bundle brings it back on
// new stdio pipes, and the kit initializes MCP again (the runtime keeps
// its hello: secret, user, session). The directory is keyed by the
// session id and outlives the plugin: a later plugin process resumes it.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/shared"
)

// pausedRecord is the plugin's file in a paused session's directory,
// beside the kit's (kitRecord) and the checkpoint (imageDir).
const (
	pausedRecord = "user"
	kitRecord    = "session.json"
	imageDir     = "image"
)

// checkpointTimeout bounds `runsc checkpoint` and the end of the sandbox
// it saved.
const checkpointTimeout = 2 * time.Minute

var _ session.Pauser = driver{}

// pausedDir is session id's directory under the configured paused_dir.
func (d driver) pausedDir(id string) (string, error) {
	d.b.mu.RLock()
	dir := d.b.cfg.PausedDir
	d.b.mu.RUnlock()
	if dir == "" {
		return "", fmt.Errorf("not configured: %w", shared.ErrFailedPrecondition)
	}
	return filepath.Join(dir, id), nil
}

// Pause implements session.Pauser: `runsc checkpoint` of a's sandbox into
// a fresh directory that becomes the session's once the checkpoint is
// complete and the sandbox has ended. A checkpoint that fails leaves the
// sandbox running and removes what it wrote.
func (d driver) Pause(ctx context.Context, a session.Agent, id string, meta []byte) (shared.PauseResponse, error) {
	s, ok := a.(*agent)
	if !ok {
		return shared.PauseResponse{}, fmt.Errorf("not a gVisor session sandbox: %w", shared.ErrInternal)
	}
	b := d.b
	b.mu.RLock()
	runsc, cfg, state := b.runsc, b.cfg, b.state
	b.mu.RUnlock()
	dir, err := d.pausedDir(id)
	if err != nil {
		return shared.PauseResponse{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return shared.PauseResponse{}, fmt.Errorf("paused_dir: %w: %w", err, shared.ErrInternal)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+id+"-")
	if err != nil {
		return shared.PauseResponse{}, fmt.Errorf("paused_dir: %w: %w", err, shared.ErrInternal)
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	for _, f := range []struct {
		name string
		data []byte
	}{{kitRecord, meta}, {pausedRecord, []byte(s.user)}} {
		if err := os.WriteFile(filepath.Join(tmp, f.name), f.data, 0o600); err != nil {
			return shared.PauseResponse{}, fmt.Errorf("saving the session's record: %w: %w", err, shared.ErrInternal)
		}
	}
	image := filepath.Join(tmp, imageDir)
	if err := os.Mkdir(image, 0o700); err != nil {
		return shared.PauseResponse{}, fmt.Errorf("image directory: %w: %w", err, shared.ErrInternal)
	}
	cctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
	defer cancel()
	argv := append(b.globals(runsc, cfg, state), "checkpoint", "--image-path", image, s.container)
	if out, err := exec.CommandContext(cctx, runsc, argv[1:]...).CombinedOutput(); err != nil {
		if s.dead() {
			return shared.PauseResponse{}, fmt.Errorf("runsc checkpoint of %s failed and the sandbox has ended (its state is lost): %v: %s: %w", s.container, err, strings.TrimSpace(string(out)), shared.ErrUnavailable)
		}
		return shared.PauseResponse{}, fmt.Errorf("runsc checkpoint of %s failed; the session keeps running: %v: %s: %w", s.container, err, strings.TrimSpace(string(out)), shared.ErrUnavailable)
	}
	// The checkpoint ends the sandbox: `runsc run` returns.
	select {
	case <-s.gone:
	case <-cctx.Done():
		killSandbox(s.container)
		<-s.gone
	}
	size, err := dirSize(image)
	if err != nil || size == 0 {
		s.finish()
		return shared.PauseResponse{}, fmt.Errorf("runsc checkpoint of %s wrote no image (%v); the sandbox has ended and its state is lost: %w", s.container, err, shared.ErrInternal)
	}
	if err := os.RemoveAll(dir); err != nil { // a stale copy of an earlier pause that was not forgotten
		s.finish()
		return shared.PauseResponse{}, fmt.Errorf("replacing %s: %w: %w", dir, err, shared.ErrInternal)
	}
	if err := os.Rename(tmp, dir); err != nil {
		s.finish()
		return shared.PauseResponse{}, fmt.Errorf("saving the checkpoint: %w: %w", err, shared.ErrInternal)
	}
	keep = true
	s.finish()
	b.logger.Debug("session sandbox checkpointed", "session", id, "sandbox", s.container, "bytes", size)
	return shared.PauseResponse{Memory: true, Bytes: size}, nil
}

// Resume implements session.Pauser: `runsc restore` of the session's image
// on a bundle written for it now (this process's rootfs and runtime; the
// user's data directory as before).
func (d driver) Resume(ctx context.Context, id string) (session.Agent, []byte, error) {
	dir, err := d.pausedDir(id)
	if err != nil {
		return nil, nil, err
	}
	meta, err := os.ReadFile(filepath.Join(dir, kitRecord))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("no paused session %q (never paused here, resumed or closed): %w", id, shared.ErrSessionNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the paused session's record: %w: %w", err, shared.ErrInternal)
	}
	user, err := os.ReadFile(filepath.Join(dir, pausedRecord))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the paused session's record: %w: %w", err, shared.ErrInternal)
	}
	b := d.b
	b.mu.RLock()
	cfg, runsc, state, runtime := b.cfg, b.runsc, b.state, b.runtime
	b.mu.RUnlock()
	if err := configured(runsc, state, runtime); err != nil {
		return nil, nil, err
	}
	a, err := b.startSandbox(ctx, cfg, runsc, state, runtime, string(user), id, filepath.Join(dir, imageDir))
	if err != nil {
		return nil, nil, err
	}
	return a, meta, nil
}

// Forget implements session.Pauser.
func (d driver) Forget(id string) (bool, error) {
	dir, err := d.pausedDir(id)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return true, os.RemoveAll(dir)
}

// dead reports whether the sandbox's `runsc run` has exited.
func (s *agent) dead() bool {
	select {
	case <-s.gone:
		return true
	default:
		return false
	}
}

// finish releases what a sandbox that ended by a checkpoint held (its
// pipes and call directory; runsc has removed its container), as Stop
// would; a later Stop does nothing.
func (s *agent) finish() {
	s.stopOnce.Do(func() {
		s.stdin.Close()
		s.stdout.Close()
		os.RemoveAll(s.dir)
	})
}

// dirSize sums the sizes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}
