package gvisor

// Sessions: one gVisor sandbox per session, running the same agent
// runtime as tier 2's containers (package agent, a static Go binary) and
// kept by the same session kit (internal/session: registry, reopen after
// the sandbox dies, files, the tool library; the hello line with the
// per-session secret, then MCP over the sandbox's stdio, a fresh token on
// every call). This file is the kit's Driver: it starts a sandbox. The plugin starts the sandbox itself with
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
	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/shared"
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

// agent is one session sandbox: `runsc run` of its bundle, with the
// runtime's stdin and stdout on pipes.
type agent struct {
	b         *Backend
	container string // runsc's container id
	user      string
	restored  bool   // started by `runsc restore`: its runtime has had its hello
	dir       string // the session's directory: its bundle
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	stdout    io.ReadCloser
	gone      chan struct{} // closed when runsc run has exited
	egress    *egressSide   // the egress proxy and forwarder (egress.go); nil without a network block
	stopOnce  sync.Once
	stopErr   error
}

var _ session.Agent = (*agent)(nil)

// Name implements session.Agent.
func (a *agent) Name() string { return "the gVisor sandbox " + a.container }

// Done implements session.Agent: runsc run has exited.
func (a *agent) Done() <-chan struct{} { return a.gone }

// Connect implements session.Agent: the hello line and MCP over the
// sandbox's stdio.
func (a *agent) Connect(ctx context.Context, client *mcp.Client, hello rtproto.Hello) (*mcp.ClientSession, error) {
	if a.egress != nil {
		a.egress.Proxy.SetSession(hello.Session, hello.User) // egress.go
	}
	if a.restored {
		return rtclient.Reconnect(ctx, client, a.stdin, a.stdout)
	}
	return rtclient.Bind(ctx, client, hello, a.stdin, a.stdout)
}

// findRuntime resolves the runtime binary: path when set, else next to the
// plugin's executable (bin/ after `make build runtime`), else $PATH. ""
// without an error means none was found: sessions are then not offered.
func findRuntime(path string) (string, error) {
	if path != "" {
		if !filepath.IsAbs(path) {
			return "", configError("runtime", nil, "%q: want an absolute path", path)
		}
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return "", configError("runtime", shared.ErrUnavailable, "runtime %q is not an executable file (build it with `make runtime`)", path)
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

// driver starts the backend's session sandboxes (session.Driver).
type driver struct{ b *Backend }

// Start implements session.Driver: it writes the session's bundle and
// starts `runsc run` on it with pipes for stdin and stdout; the runtime
// waits for its hello line.
func (d driver) Start(ctx context.Context, user, label string) (session.Agent, error) {
	b := d.b
	b.mu.RLock()
	cfg, runsc, state, runtime := b.cfg, b.runsc, b.state, b.runtime
	b.mu.RUnlock()
	if err := configured(runsc, state, runtime); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return b.startSandbox(ctx, cfg, runsc, state, runtime, user, label, "")
}

// configured says why sessions cannot start: runsc not configured, or no
// agent runtime.
func configured(runsc, state, runtime string) error {
	if runsc == "" || state == "" {
		return fmt.Errorf("not configured (Configure finds runsc): %w", shared.ErrFailedPrecondition)
	}
	if runtime == "" {
		return fmt.Errorf("no agent runtime (%s: set config runtime or build it with `make runtime`): %w", RuntimeName, shared.ErrNotSupported)
	}
	return nil
}

// startSandbox writes a session's bundle and starts `runsc run` on it
// with pipes for stdin and stdout, or, with image, `runsc restore` of the
// checkpoint image there (a paused session, on the same bundle).
func (b *Backend) startSandbox(ctx context.Context, cfg Config, runsc, state, runtime, user, label, image string) (*agent, error) {
	data, err := userDir(cfg.DataDir, user)
	if err != nil {
		return nil, fmt.Errorf("open: the user's data directory: %w: %w", err, shared.ErrInternal)
	}
	s := &agent{b: b, container: "orqest-" + randomHex(8), user: user, restored: image != "", gone: make(chan struct{})}
	s.dir = filepath.Join(state, "calls", s.container)
	bundle := filepath.Join(s.dir, "bundle")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return nil, fmt.Errorf("open: session directory: %w: %w", err, shared.ErrInternal)
	}
	if image != "" && cfg.egress != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("resume: a paused session cannot come back under a network block (its checkpoint has no egress forwarder): %w", shared.ErrFailedPrecondition)
	}
	eg, err := b.listenEgress(cfg, user, label) // egress.go
	if err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	closeEgress := func() {
		if eg != nil {
			eg.Endpoint.Close()
		}
	}
	sp, err := sessionSpec(filepath.Join(state, "rootfs"), runtime, data, cfg, eg)
	if err == nil {
		err = os.WriteFile(filepath.Join(bundle, "config.json"), sp, 0o600)
	}
	if err != nil {
		closeEgress()
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("open: session bundle: %w: %w", err, shared.ErrInternal)
	}

	inR, inW, err := os.Pipe()
	if err != nil {
		closeEgress()
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("open: stdin pipe: %w: %w", err, shared.ErrInternal)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		closeEgress()
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("open: stdout pipe: %w: %w", err, shared.ErrInternal)
	}
	logW := &rtclient.LogWriter{Log: b.logger.Named("runtime").With("sandbox", s.container, "label", label)}
	argv := append(b.globals(runsc, cfg, state), "run", "--bundle", bundle, s.container)
	if image != "" {
		argv = append(b.globals(runsc, cfg, state), "restore", "--image-path", image, "--bundle", bundle, s.container)
	}
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
		closeEgress()
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("open: starting runsc: %w: %w", err, shared.ErrUnavailable)
	}
	inR.Close()
	outW.Close()
	s.cmd, s.stdin, s.stdout = cmd, inW, outR
	go func() {
		_ = cmd.Wait()
		logW.Flush()
		close(s.gone)
	}()
	s.egress = eg
	if err := s.startForwarder(ctx, runsc, b.globals(runsc, cfg, state), cfg); err != nil { // egress.go
		_ = s.Stop(ctx)
		return nil, err
	}
	b.logger.Debug("session sandbox started", "label", label, "user", user, "sandbox", s.container)
	return s, nil
}

// globals are runsc's global flags for this plugin's sandboxes (argv[0]
// included).
func (b *Backend) globals(runsc string, cfg Config, state string) []string {
	g := []string{runsc, "--root=" + filepath.Join(state, "runsc"), "--network=none", "--platform=" + cfg.Platform, "--host-fifo=open"}
	g = append(g, egressGlobals(cfg)...) // egress.go
	if os.Geteuid() != 0 {
		g = append(g, "--rootless")
	}
	return g
}

// Stop implements session.Agent: stdin closes (the runtime exits and its
// sandbox with it); a sandbox still there after closeGrace is killed and
// its state deleted (`runsc delete --force`). Safe to call more than once.
func (s *agent) Stop(context.Context) error {
	b := s.b
	s.stopOnce.Do(func() {
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
		s.stopErr = errors.Join(s.stopErr, s.stopEgress()) // egress.go
	})
	return s.stopErr
}

func exitedCleanly(cmd *exec.Cmd) bool {
	return cmd.ProcessState != nil && cmd.ProcessState.Success()
}

// sessionsOffered is why sessions are not offered, if they are not
// (session.Config.Available): no runtime (Info then does not declare
// sessions; ErrNotSupported) or not configured yet.
func (b *Backend) sessionsOffered() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.runtime == "" {
		return fmt.Errorf("no agent runtime (%s: set config runtime or build it with `make runtime`), so no sessions: %w", RuntimeName, shared.ErrNotSupported)
	}
	return nil
}

// The embedded session.Manager serves tokens, tool calls and files
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
