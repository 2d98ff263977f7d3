package docker

// Pause and resume of a session (session.Pauser) without a checkpoint of
// memory (the engine here has no `docker checkpoint`): the runtime saves
// its stateful interpreters' globals that are plain data (save_state: the
// runner's typed encoding, never pickle; rtproto.SavedState), the plugin
// writes them with the kit's record into the session's directory under
// paused_dir with the workspace's files, signed with the plugin's key
// (HMAC-SHA256 over the session id and the file), and removes the
// container: no process of the session runs. The user's volume stays. Resume checks the signature before it
// reads anything, starts a new container for the same session id and user,
// and gives the workspace's files (put_file) and the globals
// (restore_state) back to its runtime once MCP is up. What was not plain data (functions, classes, instances, modules,
// generators, open files) is listed as not kept.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/shared"
)

// The files of the paused directory: the key (one per paused_dir, 0600),
// and per session the saved state and its signature.
const (
	pauseKeyFile   = ".key"
	pausedState    = "state.json"
	pausedSig      = "state.sig"
	pauseKeyBytes  = 32
	pauseSigDomain = "orqest-docker-pause-v1"
)

// pausedRecord is a paused session's saved state.
type pausedRecord struct {
	// Meta is the kit's record (user, tokens' secret), kept as it gave it.
	Meta json.RawMessage `json:"meta"`
	User string          `json:"user"`
	// Globals, Kept and NotKept are the runtime's save_state.
	Globals map[string]json.RawMessage `json:"globals"`
	Kept    []string                   `json:"kept,omitempty"`
	NotKept []string                   `json:"not_kept,omitempty"`
	// Files are the session workspace's files (rtproto.FilesDir, on the
	// container's tmpfs).
	Files []pausedFile `json:"files,omitempty"`
}

// pausedFile is one workspace file saved with a paused session.
type pausedFile struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// saveWorkspace downloads the workspace's files from t. A file over the
// per-file cap of get_file is not kept: it is named in notKept by its
// path in the container.
func saveWorkspace(ctx context.Context, t rtclient.Target) (files []pausedFile, notKept []string, err error) {
	ls, err := t.ListFiles(ctx, shared.ListFilesRequest{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the workspace: %w", err)
	}
	for _, f := range ls.Files {
		if f.Size > shared.DefaultMaxFileBytes {
			notKept = append(notKept, rtproto.FilesDir+"/"+f.Name)
			continue
		}
		got, err := t.GetFile(ctx, shared.GetFileRequest{Path: f.Name})
		if err != nil {
			return nil, nil, fmt.Errorf("saving workspace file %q: %w", f.Name, err)
		}
		files = append(files, pausedFile{Name: f.Name, Data: got.Data})
	}
	return files, notKept, nil
}

var (
	_ session.Pauser  = driver{}
	_ session.Resumed = (*agent)(nil)
)

// normalizePaused sets paused_dir's default (the user cache directory's
// orqest-sandbox/docker-paused) or checks that it is absolute.
func (c *Config) normalizePaused() error {
	if c.PausedDir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return shared.ConfigError("docker", "paused_dir", err, "no default (no user cache directory); set it")
		}
		c.PausedDir = filepath.Join(d, "orqest-sandbox", "docker-paused")
		return nil
	}
	if !filepath.IsAbs(c.PausedDir) {
		return shared.ConfigError("docker", "paused_dir", nil, "%q: want an absolute path", c.PausedDir)
	}
	return nil
}

// pausedDir is session id's directory under the configured paused_dir.
func (d driver) pausedDir(id string) (root, dir string, err error) {
	root = d.b.config().PausedDir
	if root == "" {
		return "", "", fmt.Errorf("paused_dir is not configured: %w", shared.ErrFailedPrecondition)
	}
	if err := rtproto.CheckID("session_id", id); err != nil {
		return "", "", fmt.Errorf("%w: %w", err, shared.ErrInvalidArgument)
	}
	return root, filepath.Join(root, id), nil
}

// pauseKey returns paused_dir's signing key, made (0600) on first use.
func pauseKey(root string) ([]byte, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("paused_dir: %w: %w", err, shared.ErrInternal)
	}
	path := filepath.Join(root, pauseKeyFile)
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, pauseKeyBytes)
		_, _ = rand.Read(key) // crypto/rand.Read never fails on Linux
		f, cerr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(cerr, fs.ErrExist) { // made meanwhile by another process
			key, err = os.ReadFile(path)
		} else if cerr != nil {
			return nil, fmt.Errorf("paused_dir: the signing key: %w: %w", cerr, shared.ErrInternal)
		} else {
			_, err = f.Write(key)
			err = errors.Join(err, f.Close())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("paused_dir: the signing key: %w: %w", err, shared.ErrInternal)
	}
	if len(key) != pauseKeyBytes {
		return nil, fmt.Errorf("paused_dir: the signing key %s is %d bytes, not %d: %w", path, len(key), pauseKeyBytes, shared.ErrInternal)
	}
	return key, nil
}

// signState is the signature of session id's saved state data.
func signState(key []byte, id string, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(pauseSigDomain + "\x00" + id + "\x00"))
	m.Write(data)
	return []byte(hex.EncodeToString(m.Sum(nil)))
}

// Pause implements session.Pauser: the runtime's plain globals saved and
// signed into a fresh directory that becomes the session's, then the
// container removed. A save that fails leaves the container running and
// removes what it wrote.
func (d driver) Pause(ctx context.Context, a session.Agent, id string, meta []byte) (shared.PauseResponse, error) {
	s, ok := a.(*agent)
	if !ok || s.runtime.MCP == nil {
		return shared.PauseResponse{}, fmt.Errorf("not a bound session container: %w", shared.ErrInternal)
	}
	root, dir, err := d.pausedDir(id)
	if err != nil {
		return shared.PauseResponse{}, err
	}
	key, err := pauseKey(root)
	if err != nil {
		return shared.PauseResponse{}, err
	}
	var st rtproto.SavedState
	if err := s.runtime.Call(ctx, rtproto.ToolSaveState, struct{}{}, &st); err != nil {
		return shared.PauseResponse{}, fmt.Errorf("saving the session's globals failed; the session keeps running: %w", err)
	}
	files, big, err := saveWorkspace(ctx, s.runtime)
	if err != nil {
		return shared.PauseResponse{}, fmt.Errorf("saving the session's workspace failed; the session keeps running: %w", err)
	}
	st.NotKept = append(st.NotKept, big...)
	data, err := json.Marshal(pausedRecord{Meta: meta, User: s.user, Globals: st.Agents, Kept: st.Kept, NotKept: st.NotKept, Files: files})
	if err != nil {
		return shared.PauseResponse{}, fmt.Errorf("encoding the saved state: %v: %w", err, shared.ErrInternal)
	}
	tmp, err := os.MkdirTemp(root, "."+id+"-")
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
	}{{pausedState, data}, {pausedSig, signState(key, id, data)}} {
		if err := os.WriteFile(filepath.Join(tmp, f.name), f.data, 0o600); err != nil {
			return shared.PauseResponse{}, fmt.Errorf("saving the session's state: %w: %w", err, shared.ErrInternal)
		}
	}
	if err := os.RemoveAll(dir); err != nil { // a stale copy of an earlier pause that was not forgotten
		return shared.PauseResponse{}, fmt.Errorf("replacing %s: %w: %w", dir, err, shared.ErrInternal)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return shared.PauseResponse{}, fmt.Errorf("saving the session's state: %w: %w", err, shared.ErrInternal)
	}
	if err := s.Stop(ctx); err != nil {
		os.RemoveAll(dir)
		if s.dead() {
			return shared.PauseResponse{}, fmt.Errorf("removing the session container after its state was saved: %w (it has ended; its next call starts a fresh one)", err)
		}
		return shared.PauseResponse{}, fmt.Errorf("removing the session container after its state was saved: %w; the session keeps running", err)
	}
	keep = true
	d.b.logger.Debug("session container paused", "session", id, "container", s.name, "kept", len(st.Kept), "not_kept", len(st.NotKept), "bytes", len(data))
	return shared.PauseResponse{Kept: st.Kept, NotKept: st.NotKept, Bytes: int64(len(data))}, nil
}

// readPaused reads and checks session id's saved state: its signature
// first, then its record.
func (d driver) readPaused(id string) (pausedRecord, error) {
	root, dir, err := d.pausedDir(id)
	if err != nil {
		return pausedRecord{}, err
	}
	data, err := os.ReadFile(filepath.Join(dir, pausedState))
	if errors.Is(err, fs.ErrNotExist) {
		return pausedRecord{}, fmt.Errorf("no paused session %q (never paused here, resumed or closed): %w", id, shared.ErrSessionNotFound)
	}
	if err != nil {
		return pausedRecord{}, fmt.Errorf("reading the paused session's state: %w: %w", err, shared.ErrInternal)
	}
	sig, err := os.ReadFile(filepath.Join(dir, pausedSig))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return pausedRecord{}, fmt.Errorf("reading the paused session's signature: %w: %w", err, shared.ErrInternal)
	}
	key, err := pauseKey(root)
	if err != nil {
		return pausedRecord{}, err
	}
	if !hmac.Equal(bytes.TrimSpace(sig), signState(key, id, data)) {
		return pausedRecord{}, fmt.Errorf("the saved state of paused session %q fails its signature check (it was changed or replaced since the pause, or paused_dir's key was): refused; close the session to remove it: %w", id, shared.ErrPermissionDenied)
	}
	var rec pausedRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return pausedRecord{}, fmt.Errorf("the paused session's state is unreadable: %v: %w", err, shared.ErrInternal)
	}
	if err := rtproto.CheckID("user_id", rec.User); err != nil {
		return pausedRecord{}, fmt.Errorf("the paused session's state: %w: %w", err, shared.ErrInternal)
	}
	return rec, nil
}

// Resume implements session.Pauser: a new container for the session's id
// and user, whose runtime gets the saved globals back when it is bound
// (agent.bound).
func (d driver) Resume(ctx context.Context, id string) (session.Agent, []byte, error) {
	rec, err := d.readPaused(id)
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
	s.restore = &rec
	return s, rec.Meta, nil
}

// Forget implements session.Pauser.
func (d driver) Forget(id string) (bool, error) {
	_, dir, err := d.pausedDir(id)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return true, os.RemoveAll(dir)
}

// bound records the runtime a's MCP session cs reaches (Pause asks it to
// save), and gives a container Resume started its saved globals back; a
// runtime that refuses them fails the resume (the saved state stays).
func (a *agent) bound(ctx context.Context, cs *mcp.ClientSession, hello rtproto.Hello) (*mcp.ClientSession, error) {
	a.runtime = rtclient.Target{MCP: cs, Secret: hello.Secret, User: hello.User, Session: hello.Session, Name: a.Name(), Gone: a.gone}
	rec := a.restore
	if rec == nil {
		return cs, nil
	}
	for _, f := range rec.Files {
		if _, err := a.runtime.PutFile(ctx, shared.PutFileRequest{Path: f.Name, Data: f.Data}); err != nil {
			cs.Close()
			return nil, fmt.Errorf("restoring the paused session's workspace file %q: %w", f.Name, err)
		}
	}
	var r rtproto.RestoreStateResult
	if err := a.runtime.Call(ctx, rtproto.ToolRestoreState, rtproto.SavedState{Agents: rec.Globals}, &r); err != nil {
		cs.Close()
		return nil, fmt.Errorf("restoring the paused session's globals: %w", err)
	}
	kept := slices.Clone(r.Kept)
	for _, n := range rec.Kept { // the pending agents' names, as the pause kept them
		if ag, _, _ := strings.Cut(n, "/"); slices.Contains(r.Pending, ag) {
			kept = append(kept, n)
		}
	}
	notKept := append(slices.Clone(rec.NotKept), r.NotKept...)
	slices.Sort(kept)
	slices.Sort(notKept)
	a.resumed = shared.ResumeResponse{StateLost: true, Kept: kept, NotKept: notKept}
	return cs, nil
}

// Resumed implements session.Resumed: a container comes back with the
// globals restore_state loaded (or keeps for its agents' next calls), not
// with its memory.
func (a *agent) Resumed(resp *shared.ResumeResponse) {
	resp.Memory = false
	resp.StateLost = true
	resp.Kept, resp.NotKept = a.resumed.Kept, a.resumed.NotKept
}
