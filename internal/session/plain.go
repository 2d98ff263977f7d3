package session

// Pause without a memory checkpoint, for the backends whose engine has none
// (docker without `docker checkpoint`, kubernetes): the runtime saves its
// stateful interpreters' globals that are plain data (save_state: the
// runner's typed encoding, never pickle; rtproto.SavedState) and the
// workspace's files, the backend writes them with the kit's record into
// the session's directory under its paused directory, signed with the
// directory's key (HMAC-SHA256 over the session id and the file), and ends
// the agent: no process of the session runs. Resume checks the signature
// before it reads anything, the backend starts a fresh agent for the same
// session id and user, and once MCP is up the files (put_file) and the
// globals (restore_state) go back to its runtime. What was not plain data
// (functions, classes, instances, modules, generators, open files) is
// listed as not kept.

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
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// The files of a paused directory: the key (one per directory, 0600), and
// per session the saved state and its signature.
const (
	PausedKeyFile   = ".key"
	PausedStateFile = "state.json"
	PausedSigFile   = "state.sig"
	pausedKeyBytes  = 32
)

// PausedRecord is a paused session's saved state.
type PausedRecord struct {
	// Meta is the kit's record (user, tokens' secret), kept as it gave it.
	Meta json.RawMessage `json:"meta"`
	User string          `json:"user"`
	// Globals, Kept and NotKept are the runtime's save_state.
	Globals map[string]json.RawMessage `json:"globals"`
	Kept    []string                   `json:"kept,omitempty"`
	NotKept []string                   `json:"not_kept,omitempty"`
	// Files are the session workspace's files (rtproto.FilesDir).
	Files []PausedFile `json:"files,omitempty"`
}

// PausedFile is one workspace file saved with a paused session.
type PausedFile struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// PausedStore is a backend's paused directory: one 0700 directory per
// paused session id, kept across plugin and host restarts.
type PausedStore struct {
	// Root is the directory (absolute); empty: pausing is not configured.
	Root string
	// Domain separates this backend's signatures from another's that
	// shares a key (e.g. "orqest-docker-pause-v1").
	Domain string
}

// NormalizePausedDir sets a backend's paused_dir attribute *dir to its
// default, or checks that it is absolute (an error is shared.ConfigError
// of plugin's attribute). The default is the user cache directory's
// orqest-sandbox/name; a plugin launched without $HOME and $XDG_CACHE_HOME
// (a host passes plugins a clean environment) uses the account's home
// directory's .cache. With neither, *dir stays empty: the plugin serves,
// and a pause is refused as not configured (ErrFailedPrecondition).
func NormalizePausedDir(plugin string, dir *string, name string) error {
	if *dir != "" {
		if !filepath.IsAbs(*dir) {
			return shared.ConfigError(plugin, "paused_dir", nil, "%q: want an absolute path", *dir)
		}
		return nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		u, uerr := user.Current()
		if uerr != nil || !filepath.IsAbs(u.HomeDir) {
			return nil
		}
		c = filepath.Join(u.HomeDir, ".cache")
	}
	*dir = filepath.Join(c, "orqest-sandbox", name)
	return nil
}

// dir is session id's directory.
func (p PausedStore) dir(id string) (string, error) {
	if p.Root == "" {
		return "", fmt.Errorf("paused_dir is not configured (no default: the plugin has no home directory); set it in the config block: %w", shared.ErrFailedPrecondition)
	}
	if err := rtproto.CheckID("session_id", id); err != nil {
		return "", fmt.Errorf("%w: %w", err, shared.ErrInvalidArgument)
	}
	return filepath.Join(p.Root, id), nil
}

// key returns the directory's signing key, made (0600) on first use.
func (p PausedStore) key() ([]byte, error) {
	if err := os.MkdirAll(p.Root, 0o700); err != nil {
		return nil, fmt.Errorf("paused_dir: %w: %w", err, shared.ErrInternal)
	}
	path := filepath.Join(p.Root, PausedKeyFile)
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, pausedKeyBytes)
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
	if len(key) != pausedKeyBytes {
		return nil, fmt.Errorf("paused_dir: the signing key %s is %d bytes, not %d: %w", path, len(key), pausedKeyBytes, shared.ErrInternal)
	}
	return key, nil
}

// sign is the signature of session id's saved state data.
func (p PausedStore) sign(key []byte, id string, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(p.Domain + "\x00" + id + "\x00"))
	m.Write(data)
	return []byte(hex.EncodeToString(m.Sum(nil)))
}

// SaveRuntime asks the runtime t reaches for its plain globals and its
// workspace's files; a file over get_file's per-file cap is not kept and
// is named in NotKept. The agent is not changed.
func SaveRuntime(ctx context.Context, t rtclient.Target, user string, meta []byte) (PausedRecord, error) {
	var st rtproto.SavedState
	if err := t.Call(ctx, rtproto.ToolSaveState, struct{}{}, &st); err != nil {
		return PausedRecord{}, fmt.Errorf("saving the session's globals failed; the session keeps running: %w", err)
	}
	rec := PausedRecord{Meta: meta, User: user, Globals: st.Agents, Kept: st.Kept, NotKept: st.NotKept}
	ls, err := t.ListFiles(ctx, shared.ListFilesRequest{})
	if err != nil {
		return PausedRecord{}, fmt.Errorf("saving the session's workspace failed; the session keeps running: listing it: %w", err)
	}
	for _, f := range ls.Files {
		if f.Size > shared.DefaultMaxFileBytes {
			rec.NotKept = append(rec.NotKept, rtproto.FilesDir+"/"+f.Name)
			continue
		}
		got, err := t.GetFile(ctx, shared.GetFileRequest{Path: f.Name})
		if err != nil {
			return PausedRecord{}, fmt.Errorf("saving the session's workspace failed; the session keeps running: file %q: %w", f.Name, err)
		}
		rec.Files = append(rec.Files, PausedFile{Name: f.Name, Data: got.Data})
	}
	return rec, nil
}

// Save writes rec, signed, as session id's saved state (replacing an
// earlier one), all or nothing, and returns its size.
func (p PausedStore) Save(id string, rec PausedRecord) (int64, error) {
	dir, err := p.dir(id)
	if err != nil {
		return 0, err
	}
	key, err := p.key()
	if err != nil {
		return 0, err
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encoding the saved state: %v: %w", err, shared.ErrInternal)
	}
	tmp, err := os.MkdirTemp(p.Root, "."+id+"-")
	if err != nil {
		return 0, fmt.Errorf("paused_dir: %w: %w", err, shared.ErrInternal)
	}
	defer os.RemoveAll(tmp) // gone after the rename; what is left on an error
	for _, f := range []struct {
		name string
		data []byte
	}{{PausedStateFile, data}, {PausedSigFile, p.sign(key, id, data)}} {
		if err := os.WriteFile(filepath.Join(tmp, f.name), f.data, 0o600); err != nil {
			return 0, fmt.Errorf("saving the session's state: %w: %w", err, shared.ErrInternal)
		}
	}
	if err := os.RemoveAll(dir); err != nil { // a stale copy of an earlier pause that was not forgotten
		return 0, fmt.Errorf("replacing %s: %w: %w", dir, err, shared.ErrInternal)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return 0, fmt.Errorf("saving the session's state: %w: %w", err, shared.ErrInternal)
	}
	return int64(len(data)), nil
}

// Pause saves what the runtime a reaches through t holds (SaveRuntime) as
// session id's state, with user and the kit's meta, and then stops a: no
// process of the session runs afterwards. A save that fails leaves a
// running and nothing on disk; so does a stop that fails, unless a has
// ended meanwhile (its next call then starts a fresh one).
func (p PausedStore) Pause(ctx context.Context, a Agent, t rtclient.Target, id, user string, meta []byte) (shared.PauseResponse, error) {
	if t.MCP == nil {
		return shared.PauseResponse{}, fmt.Errorf("%s is not bound to its runtime: %w", a.Name(), shared.ErrInternal)
	}
	rec, err := SaveRuntime(ctx, t, user, meta)
	if err != nil {
		return shared.PauseResponse{}, err
	}
	n, err := p.Save(id, rec)
	if err != nil {
		return shared.PauseResponse{}, err
	}
	if err := a.Stop(ctx); err != nil {
		_, _ = p.Forget(id)
		select {
		case <-a.Done():
			return shared.PauseResponse{}, fmt.Errorf("stopping %s after its state was saved: %w (it has ended; its next call starts a fresh one)", a.Name(), err)
		default:
			return shared.PauseResponse{}, fmt.Errorf("stopping %s after its state was saved: %w; the session keeps running", a.Name(), err)
		}
	}
	return shared.PauseResponse{Kept: rec.Kept, NotKept: rec.NotKept, Bytes: n}, nil
}

// Load reads and checks session id's saved state: its signature first,
// then its record. Nothing saved is an error wrapping
// shared.ErrSessionNotFound; a bad signature one wrapping
// shared.ErrPermissionDenied.
func (p PausedStore) Load(id string) (PausedRecord, error) {
	dir, err := p.dir(id)
	if err != nil {
		return PausedRecord{}, err
	}
	data, err := os.ReadFile(filepath.Join(dir, PausedStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return PausedRecord{}, fmt.Errorf("no paused session %q (never paused here, resumed or closed): %w", id, shared.ErrSessionNotFound)
	}
	if err != nil {
		return PausedRecord{}, fmt.Errorf("reading the paused session's state: %w: %w", err, shared.ErrInternal)
	}
	sig, err := os.ReadFile(filepath.Join(dir, PausedSigFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return PausedRecord{}, fmt.Errorf("reading the paused session's signature: %w: %w", err, shared.ErrInternal)
	}
	key, err := p.key()
	if err != nil {
		return PausedRecord{}, err
	}
	if !hmac.Equal(bytes.TrimSpace(sig), p.sign(key, id, data)) {
		return PausedRecord{}, fmt.Errorf("the saved state of paused session %q fails its signature check (it was changed or replaced since the pause, or paused_dir's key was): refused; close the session to remove it: %w", id, shared.ErrPermissionDenied)
	}
	var rec PausedRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return PausedRecord{}, fmt.Errorf("the paused session's state is unreadable: %v: %w", err, shared.ErrInternal)
	}
	if err := rtproto.CheckID("user_id", rec.User); err != nil {
		return PausedRecord{}, fmt.Errorf("the paused session's state: %w: %w", err, shared.ErrInternal)
	}
	return rec, nil
}

// Forget removes what was saved for session id and reports whether there
// was anything.
func (p PausedStore) Forget(id string) (bool, error) {
	dir, err := p.dir(id)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return true, os.RemoveAll(dir)
}

// RestoreRuntime gives the runtime t reaches rec's workspace files and
// globals back, and returns what came back: StateLost (no memory was
// kept), the globals loaded now or pending for an agent's first call
// (Kept), and those not kept at the pause or refused now (NotKept). An
// error leaves the saved state as it was.
func RestoreRuntime(ctx context.Context, t rtclient.Target, rec PausedRecord) (shared.ResumeResponse, error) {
	for _, f := range rec.Files {
		if _, err := t.PutFile(ctx, shared.PutFileRequest{Path: f.Name, Data: f.Data}); err != nil {
			return shared.ResumeResponse{}, fmt.Errorf("restoring the paused session's workspace file %q: %w", f.Name, err)
		}
	}
	var r rtproto.RestoreStateResult
	if err := t.Call(ctx, rtproto.ToolRestoreState, rtproto.SavedState{Agents: rec.Globals}, &r); err != nil {
		return shared.ResumeResponse{}, fmt.Errorf("restoring the paused session's globals: %w", err)
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
	return shared.ResumeResponse{StateLost: true, Kept: kept, NotKept: notKept}, nil
}

// PlainResume is embedded in a backend's agent that pauses without
// memory: Bound records the runtime the agent reaches (SaveRuntime asks
// it) and gives an agent the backend resumed (Restore set) its saved state
// back; Resumed reports what came back.
type PlainResume struct {
	// Runtime is the bound runtime; zero until Bound.
	Runtime rtclient.Target
	// Restore is the saved state a resumed agent gets back; nil for an
	// agent that was opened, not resumed.
	Restore *PausedRecord
	resumed shared.ResumeResponse
}

// Bound is called by the agent's Connect once MCP is up on cs: t is the
// runtime as the kit will reach it. A runtime that refuses the saved state
// fails the resume (cs is closed; the saved state stays).
func (p *PlainResume) Bound(ctx context.Context, cs *mcp.ClientSession, t rtclient.Target) (*mcp.ClientSession, error) {
	p.Runtime = t
	if p.Restore == nil {
		return cs, nil
	}
	r, err := RestoreRuntime(ctx, t, *p.Restore)
	if err != nil {
		cs.Close()
		return nil, err
	}
	p.resumed = r
	return cs, nil
}

// Resumed implements Resumed: the agent came back with the globals
// restore_state loaded (or keeps for its agents' next calls), not with its
// memory.
func (p *PlainResume) Resumed(resp *shared.ResumeResponse) {
	resp.Memory = false
	resp.StateLost = true
	resp.Kept, resp.NotKept = p.resumed.Kept, p.resumed.NotKept
}
