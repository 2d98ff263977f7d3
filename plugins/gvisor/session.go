package gvisor

// Sessions: one gVisor sandbox per session, running the same agent
// runtime as tier 2's containers (plugins/docker/runtime, a static Go
// binary) and spoken to the same way (internal/rtclient: the hello line
// with the per-session secret, then MCP over the sandbox's stdio, a fresh
// token on every call). The plugin starts the sandbox itself with
// `runsc run` of a per-session OCI bundle: the read-only root skeleton of
// the sessionless path (host /usr and the loader's files bound read-only),
// the runtime binary bound read-only at RuntimePath, the user's data
// directory on the host (data_dir/<user>, 0700) bound on /data and a tmpfs
// on /workspace; no network device (--network=none), no other host path.
// The runtime runs as the Sentry's root with CAP_CHOWN, CAP_KILL,
// CAP_SETUID and CAP_SETGID only (not the host's root: every system call
// it and its children make is served by the Sentry), exactly as it runs in
// the tier-2 container, and drops every Python child to 65534.
//
// runsc's stdin and stdout are pipes the sandbox inherits (runsc hands its
// stdio to the container's process): nothing listens anywhere. When the
// plugin dies, stdin closes, the runtime exits and its sandbox with it;
// runsc is also started with a parent-death signal, and the reaper
// (SweepStale, at startup and Configure) kills and deletes what a plugin
// killed mid-way left in its runsc root.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// RuntimeName is the agent runtime's file name (`make runtime` builds it
// into bin/, beside the plugins).
const RuntimeName = "orqest-agent-runtime"

// RuntimePath is where the runtime binary is bound (read-only) inside a
// session's sandbox.
const RuntimePath = "/opt/orqest/" + RuntimeName

// Defaults of the session part of the `config {}` block.
const (
	DefaultWorkspaceMB = 64
	DefaultSessionMB   = 512
	DefaultOpenTimeout = 30 * time.Second
	// closeGrace is how long Close waits for the runtime to exit after its
	// stdin closed before it kills the sandbox.
	closeGrace = 2 * time.Second
)

// session is one open sandbox and its MCP connection.
type session struct {
	id, user  string
	container string // runsc's container id
	dir       string // the session's directory: its bundle
	secret    []byte
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	stdout    io.ReadCloser
	mcp       *mcp.ClientSession
	streams   rtclient.Streams // the runtime's streamed output, per call
	gone      chan struct{}    // closed when runsc run has exited
	stopOnce  sync.Once
	stopErr   error
}

func (s *session) target() rtclient.Target {
	return rtclient.Target{MCP: s.mcp, Secret: s.secret, User: s.user, Session: s.id, Name: "the gVisor sandbox " + s.container, Gone: s.gone, Streams: &s.streams}
}

func (s *session) dead() bool { return s.target().Dead() }

// findRuntime resolves the runtime binary: path when set, else next to the
// plugin's executable (bin/ after `make build runtime`), else $PATH. ""
// without an error means none was found: sessions are then not offered.
func findRuntime(path string) (string, error) {
	if path != "" {
		if !filepath.IsAbs(path) {
			return "", &shared.FieldError{Field: "runtime", Reason: fmt.Sprintf("%q: want an absolute path", path)}
		}
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("gvisor config: runtime %q is not an executable file (build it with `make runtime`): %w", path, shared.ErrUnavailable)
		}
		return path, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), RuntimeName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(RuntimeName); err == nil {
		return filepath.Abs(p)
	}
	return "", nil
}

// defaultDataDir is where the per-user data directories live when data_dir
// is not set: the user cache directory ($XDG_CACHE_HOME or ~/.cache), so
// a user's library outlives the plugin process. A plugin usually runs
// with the host's narrowed environment (no HOME): the home directory then
// comes from the user database.
func defaultDataDir() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		u, uerr := user.Current()
		if uerr != nil || u.HomeDir == "" || !filepath.IsAbs(u.HomeDir) {
			return "", fmt.Errorf("gvisor config: no data_dir and no user cache directory (%v; %v): %w", err, uerr, shared.ErrFailedPrecondition)
		}
		c = filepath.Join(u.HomeDir, ".cache")
	}
	return filepath.Join(c, "orqest-sandbox", "gvisor-users"), nil
}

// userDir returns (creating it, 0700) the host directory bound on /data for
// user.
func userDir(dataDir, user string) (string, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	d := filepath.Join(dataDir, user)
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := os.Chmod(d, 0o700); err != nil {
		return "", err
	}
	return d, nil
}

// Open starts a session: a gVisor sandbox running the agent runtime for
// req.UserID. An empty SessionID gets a fresh random one.
func (b *Backend) Open(ctx context.Context, req shared.OpenRequest) (shared.OpenResponse, error) {
	b.mu.RLock()
	cfg, runsc, state, runtime := b.cfg, b.runsc, b.state, b.runtime
	b.mu.RUnlock()
	if runsc == "" || state == "" {
		return shared.OpenResponse{}, fmt.Errorf("open: not configured (Configure finds runsc): %w", shared.ErrFailedPrecondition)
	}
	if runtime == "" {
		return shared.OpenResponse{}, fmt.Errorf("open: no agent runtime (%s: set config runtime or build it with `make runtime`): %w", RuntimeName, shared.ErrNotSupported)
	}
	if req.SessionID == "" {
		req.SessionID = "s-" + randomHex(8)
	}
	if err := errors.Join(rtproto.CheckID("user_id", req.UserID), rtproto.CheckID("session_id", req.SessionID)); err != nil {
		return shared.OpenResponse{}, fmt.Errorf("open: %v: %w", err, shared.ErrInvalidArgument)
	}
	b.mu.Lock()
	if _, ok := b.sessions[req.SessionID]; ok {
		b.mu.Unlock()
		return shared.OpenResponse{}, fmt.Errorf("open: session %q is already open: %w", req.SessionID, shared.ErrFailedPrecondition)
	}
	b.sessions[req.SessionID] = nil // reserve the id while the sandbox starts
	b.mu.Unlock()

	s, err := b.startSession(ctx, cfg, runsc, state, runtime, req.UserID, req.SessionID)
	b.mu.Lock()
	if err != nil {
		delete(b.sessions, req.SessionID)
	} else {
		b.sessions[req.SessionID] = s
	}
	b.mu.Unlock()
	if err != nil {
		return shared.OpenResponse{}, err
	}
	return shared.OpenResponse{SessionID: req.SessionID}, nil
}

// startSession writes the session's bundle, starts `runsc run` on it with
// pipes for stdin and stdout, and binds the runtime (hello line, MCP).
func (b *Backend) startSession(ctx context.Context, cfg Config, runsc, state, runtime, user, sessionID string) (_ *session, retErr error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("open: minting the session secret: %v: %w", err, shared.ErrInternal)
	}
	data, err := userDir(cfg.DataDir, user)
	if err != nil {
		return nil, fmt.Errorf("open: the user's data directory: %v: %w", err, shared.ErrInternal)
	}
	s := &session{id: sessionID, user: user, container: "orqest-" + randomHex(8), secret: secret, gone: make(chan struct{})}
	s.dir = filepath.Join(state, "calls", s.container)
	bundle := filepath.Join(s.dir, "bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return nil, fmt.Errorf("open: session directory: %v: %w", err, shared.ErrInternal)
	}
	sp, err := sessionSpec(filepath.Join(state, "rootfs"), runtime, data, cfg)
	if err == nil {
		err = os.WriteFile(filepath.Join(bundle, "config.json"), sp, 0o600)
	}
	if err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("open: session bundle: %v: %w", err, shared.ErrInternal)
	}

	inR, inW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("open: stdin pipe: %v: %w", err, shared.ErrInternal)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("open: stdout pipe: %v: %w", err, shared.ErrInternal)
	}
	logW := &rtclient.LogWriter{Log: b.logger.Named("runtime").With("sandbox", s.container, "session", sessionID)}
	argv := append(b.globals(runsc, cfg, state), "run", "--bundle", bundle, s.container)
	cmd := exec.Command(runsc, argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, logW
	cmd.Dir = s.dir
	// Its own process group (a signal to the plugin's group does not
	// reach it before the plugin decides), and killed with the plugin.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("open: starting runsc: %v: %w", err, shared.ErrUnavailable)
	}
	inR.Close()
	outW.Close()
	s.cmd, s.stdin, s.stdout = cmd, inW, outR
	go func() {
		_ = cmd.Wait()
		logW.Flush()
		close(s.gone)
	}()
	defer func() {
		if retErr != nil {
			b.stopSession(s)
		}
	}()

	octx, cancel := context.WithTimeout(ctx, cfg.openTimeout)
	defer cancel()
	hello := rtproto.Hello{Secret: secret, User: user, Session: sessionID, Promotion: cfg.Promotion}
	impl := &mcp.Implementation{Name: "orqest-sandbox-plugin-gvisor", Version: Version}
	type bound struct {
		cs  *mcp.ClientSession
		err error
	}
	done := make(chan bound, 1)
	go func() {
		cs, err := rtclient.Bind(octx, impl, s.streams.Options(), hello, inW, outR)
		done <- bound{cs, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("open: %s: %w", s.target().Name, r.err)
		}
		s.mcp = r.cs
	case <-s.gone:
		return nil, fmt.Errorf("open: runsc exited before the runtime answered (%v): %w", cmd.ProcessState, shared.ErrUnavailable)
	case <-octx.Done():
		return nil, fmt.Errorf("open: the runtime did not answer within %v: %w", cfg.openTimeout, shared.ErrUnavailable)
	}
	b.logger.Debug("session open", "session", sessionID, "user", user, "sandbox", s.container)
	return s, nil
}

// globals are runsc's global flags for this plugin's sandboxes (argv[0]
// included).
func (b *Backend) globals(runsc string, cfg Config, state string) []string {
	g := []string{runsc, "--root=" + filepath.Join(state, "runsc"), "--network=none", "--platform=" + cfg.Platform, "--host-fifo=open"}
	if os.Geteuid() != 0 {
		g = append(g, "--rootless")
	}
	return g
}

// stopSession ends a session's sandbox: stdin closes (the runtime exits
// and its sandbox with it); a sandbox still there after closeGrace is
// killed and its state deleted (`runsc delete --force`). Safe to call more
// than once.
func (b *Backend) stopSession(s *session) error {
	s.stopOnce.Do(func() {
		if s.mcp != nil {
			go s.mcp.Close()
		}
		s.stdin.Close()
		select {
		case <-s.gone:
		case <-time.After(closeGrace):
			killSandbox(s.container)
			select {
			case <-s.gone:
			case <-time.After(5 * time.Second):
				s.stopErr = fmt.Errorf("close: runsc of %s did not exit: %w", s.container, shared.ErrUnavailable)
			}
		}
		b.mu.RLock()
		runsc, cfg, state := b.runsc, b.cfg, b.state
		b.mu.RUnlock()
		// A runsc run that ended normally has deleted its container; one
		// that was killed leaves its state files.
		if state != "" && !exitedCleanly(s.cmd) {
			g := b.globals(runsc, cfg, state)
			if err := deleteContainer(runsc, g[1:], s.container); err != nil {
				b.logger.Debug("removing a killed session sandbox's state", "sandbox", s.container, "error", err)
			}
		}
		s.stdout.Close()
		os.RemoveAll(s.dir)
	})
	return s.stopErr
}

func exitedCleanly(cmd *exec.Cmd) bool {
	return cmd.ProcessState != nil && cmd.ProcessState.Success()
}

// Close ends the session's sandbox; the user's data directory persists.
func (b *Backend) Close(_ context.Context, req shared.CloseRequest) (shared.CloseResponse, error) {
	if err := b.sessionsOffered(); err != nil {
		return shared.CloseResponse{}, fmt.Errorf("close: %w", err)
	}
	if err := rtproto.CheckID("session_id", req.SessionID); err != nil {
		return shared.CloseResponse{}, fmt.Errorf("close: %v: %w", err, shared.ErrInvalidArgument)
	}
	b.mu.Lock()
	s, ok := b.sessions[req.SessionID]
	if ok && s != nil {
		delete(b.sessions, req.SessionID)
	}
	b.mu.Unlock()
	if !ok || s == nil {
		return shared.CloseResponse{}, fmt.Errorf("close: no open session %q: %w", req.SessionID, shared.ErrNotFound)
	}
	return shared.CloseResponse{}, b.stopSession(s)
}

// closeAll ends every open session (Shutdown).
func (b *Backend) closeAll() {
	b.mu.Lock()
	var all []*session
	for id, s := range b.sessions {
		if s != nil {
			all = append(all, s)
		}
		delete(b.sessions, id)
	}
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.stopSession(s); err != nil {
				b.logger.Warn("shutdown: ending a session sandbox", "session", s.id, "error", err)
			}
		}()
	}
	wg.Wait()
}

// sessionsOffered is ErrNotSupported when the backend has no runtime (Info
// then does not declare sessions).
func (b *Backend) sessionsOffered() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.runtime == "" {
		return fmt.Errorf("no agent runtime (%s: set config runtime or build it with `make runtime`), so no sessions: %w", RuntimeName, shared.ErrNotSupported)
	}
	return nil
}

func (b *Backend) openSession(id string) (*session, error) {
	if err := b.sessionsOffered(); err != nil {
		return nil, err
	}
	if err := rtproto.CheckID("session_id", id); err != nil {
		return nil, fmt.Errorf("%v: %w", err, shared.ErrInvalidArgument)
	}
	b.mu.RLock()
	s := b.sessions[id]
	b.mu.RUnlock()
	if s == nil {
		return nil, fmt.Errorf("no open session %q (call Open first): %w", id, shared.ErrNotFound)
	}
	return s, nil
}

// executeInSession validates req.Code in Go and runs it in the session's
// runtime. A sandbox that died during the call (killed, crashed) is an
// infrastructure error (shared.ErrUnavailable) and ends the session.
func (b *Backend) executeInSession(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk)) (shared.ExecuteResponse, error) {
	start := time.Now()
	// Zero limits stay zero here: the runtime applies its defaults.
	p, err := shared.Prepare(req, shared.Defaults{MaxCodeBytes: b.maxCodeBytes, MaxArgsBytes: shared.DefaultMaxArgsBytes})
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	if req.ToolName != "" {
		if err := rtproto.CheckToolName(req.ToolName); err != nil {
			return shared.ExecuteResponse{}, fmt.Errorf("execute: %v: %w", err, shared.ErrInvalidArgument)
		}
	}
	for kind, id := range map[string]string{"agent_id": req.AgentID, "user_id": req.UserID} {
		if id == "" {
			continue
		}
		if err := rtproto.CheckID(kind, id); err != nil {
			return shared.ExecuteResponse{}, fmt.Errorf("execute: %v: %w", err, shared.ErrInvalidArgument)
		}
	}
	if len(req.Dependencies) > 0 {
		return shared.ExecuteResponse{}, fmt.Errorf("execute: dependencies are not installed by the gvisor backend: %w", shared.ErrNotSupported)
	}
	s, err := b.openSession(req.SessionID)
	if err != nil {
		return shared.ExecuteResponse{}, fmt.Errorf("execute: %w", err)
	}
	if req.UserID != "" && req.UserID != s.user {
		return shared.ExecuteResponse{}, fmt.Errorf("execute: session %q belongs to another user: %w", req.SessionID, shared.ErrInvalidArgument)
	}
	b.mu.RLock()
	classes := b.classes
	b.mu.RUnlock()
	if findings := b.validator.CheckWith(ctx, req.Code, req.AllowedImports, validator.Features{Classes: classes}); len(findings) > 0 {
		timeout, memMB, maxOut := req.Timeout, req.MemoryMB, req.MaxOutputBytes
		if timeout == 0 {
			timeout = shared.DefaultTimeout
		}
		if memMB == 0 {
			memMB = shared.DefaultMemoryMB
		}
		if maxOut == 0 {
			maxOut = shared.DefaultMaxOutputBytes
		}
		res := shared.Rejected(findings, shared.Limits{TimeoutMS: timeout.Milliseconds(), MemoryMB: memMB, MaxOutputBytes: maxOut})
		res.DurationMS = msSince(start)
		return shared.ExecuteResponse{Result: res}, nil
	}
	res, events, err := s.target().ExecuteStream(ctx, rtproto.ExecuteArgs{
		Code:           req.Code,
		Args:           p.Args,
		AllowedImports: req.AllowedImports,
		AgentID:        req.AgentID,
		TimeoutS:       req.Timeout.Seconds(),
		MemoryMB:       req.MemoryMB,
		MaxOutputBytes: req.MaxOutputBytes,
		ToolName:       req.ToolName,
		Stateful:       req.Stateful,
	}, req.Timeout, send)
	if err != nil {
		if s.dead() {
			b.mu.Lock()
			if b.sessions[s.id] == s {
				delete(b.sessions, s.id)
			}
			b.mu.Unlock()
			if rerr := b.stopSession(s); rerr != nil {
				b.logger.Warn("ending a dead session sandbox", "session", s.id, "error", rerr)
			}
		}
		return shared.ExecuteResponse{}, err
	}
	return shared.ExecuteResponse{Result: res, Events: events}, nil
}

// The embedded rtclient.SessionAPI serves tokens, tool calls and files
// through the session's runtime.
var (
	_ shared.SessionTools        = (*Backend)(nil)
	_ shared.SessionToolStreamer = (*Backend)(nil)
)

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}

// memLimit renders MB for a tmpfs size option.
func memLimit(mb int) string { return strconv.Itoa(mb) + "m" }
