package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/shared"
)

// Labels every session container carries. The reaper finds containers by
// LabelTier and removes those whose owner process is gone.
const (
	LabelTier       = "org.orqest.sandbox.tier"
	LabelOwnerPID   = "org.orqest.sandbox.owner-pid"
	LabelOwnerStart = "org.orqest.sandbox.owner-start"
	LabelOwnerHost  = "org.orqest.sandbox.owner-host"
	LabelUser       = "org.orqest.sandbox.user"
	LabelSession    = "org.orqest.sandbox.session"
	tierValue       = "docker"
)

// VolumeName is the per-user named volume mounted at /data.
func VolumeName(user string) string { return "orqest-user-" + user }

// agent is one session container: the agent runtime in it, attached
// (stdin carries MCP frames after the hello line, stdout MCP, stderr the
// runtime's JSON log) or, in bridge mode, reached over HTTP on a port
// published on 127.0.0.1.
type agent struct {
	b           *Backend
	bridge      bool
	user, label string
	containerID string
	name        string
	hijack      client.HijackedResponse
	gone        chan struct{}  // closed when the attach stream ends
	stdout      *io.PipeReader // the runtime's stdout (MCP), demultiplexed from the attach stream
	endpoint    string         // bridge mode: the runtime's MCP URL on 127.0.0.1
	hello       rtproto.Hello  // bridge mode: the ids and secret its HTTP tokens carry
	egress      *egressSide    // the egress proxy and forwarder (egress.go); nil without a network block
	stopOnce    sync.Once
	stopErr     error
	// PlainResume: the bound runtime (Pause asks it to save) and, for a
	// resumed container, the saved state it gets back (pause.go).
	session.PlainResume
}

var _ session.Agent = (*agent)(nil)

// Name implements session.Agent.
func (a *agent) Name() string { return "the session container " + a.name }

// Done implements session.Agent: the attach stream has ended.
func (a *agent) Done() <-chan struct{} { return a.gone }

// ContainerID is the engine's id of the container.
func (a *agent) ContainerID() string { return a.containerID }

func (a *agent) dead() bool {
	select {
	case <-a.gone:
		return true
	default:
		return false
	}
}

// RuntimeUser is the container's user: the runtime starts as root (uid 0
// with only the capabilities of RuntimeCaps, no-new-privileges) so that it
// owns /data alone, and every Python process it starts drops to an unused
// uid (65534, the runner's seal) before any user code exists. The user's
// code and the tool library therefore never share a uid.
const RuntimeUser = "0:0"

// RuntimeCaps returns the capabilities the container adds back after
// dropping ALL: SETUID and SETGID let the runtime's Python processes drop
// from root to 65534 (setgroups, setresgid, setresuid); KILL lets the
// runtime (root) kill those children, now on another uid, at their wall
// clock (pidfd_send_signal, kill of the process group); CHOWN lets the
// runtime take over a volume an older image left owned by uid 1000. A
// process that drops to 65534 loses every capability.
func RuntimeCaps() []string { return []string{"CHOWN", "KILL", "SETGID", "SETUID"} }

// hardenedConfig returns the container and host configuration of a session.
func hardenedConfig(cfg Config, owner ownerInfo, user, sessionID string) (*container.Config, *container.HostConfig) {
	pids := int64(cfg.PidsLimit)
	mem := int64(cfg.MemoryMB) << 20
	init := true
	labels := map[string]string{
		LabelTier:       tierValue,
		LabelOwnerPID:   strconv.Itoa(owner.pid),
		LabelOwnerStart: owner.start,
		LabelOwnerHost:  owner.host,
		LabelUser:       user,
		LabelSession:    sessionID,
	}
	cc := &container.Config{
		Image:        cfg.Image,
		User:         RuntimeUser,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true, // stdin closes when the plugin detaches: the runtime exits
		Env:          []string{},
		Labels:       labels,
		WorkingDir:   "/workspace",
	}
	cc.Env = append(cc.Env, egressEnv(cfg)...) // egress.go
	cc.Cmd = cfg.runtimeFlags().Args()
	if cfg.Network == NetworkBridge {
		cc.Cmd = append(cc.Cmd, "--listen", ":"+runtimePort)
		cc.ExposedPorts = network.PortSet{network.MustParsePort(runtimePort + "/tcp"): {}}
		if cfg.AllowedOrigins != nil {
			cc.Env = append(cc.Env, "ORQEST_ALLOWED_ORIGINS="+*cfg.AllowedOrigins)
		}
	}
	hc := &container.HostConfig{
		Runtime:        cfg.Runtime, // "" = the engine's default
		NetworkMode:    container.NetworkMode(cfg.Network),
		AutoRemove:     true, // a runtime that exits (plugin died) takes its container with it
		CapDrop:        []string{"ALL"},
		CapAdd:         RuntimeCaps(),
		ReadonlyRootfs: true,
		SecurityOpt:    []string{"no-new-privileges:true"},
		Init:           &init, // docker-init as PID 1 reaps what user code orphans
		Tmpfs: nativeTmpfs(cfg, map[string]string{ // and native wheels' (deps_plugin.go)
			"/workspace": fmt.Sprintf("rw,nosuid,nodev,noexec,size=%dm,uid=0,gid=0,mode=0711", cfg.WorkspaceMB),
		}),
		Mounts: append([]mount.Mount{{
			Type:   mount.TypeVolume,
			Source: VolumeName(user),
			Target: "/data",
		}}, wheelMounts(cfg)...), // the operator's wheel_dir, read-only (deps_plugin.go)
		PortBindings: bridgePorts(cfg),
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem, // no swap on top
			NanoCPUs:   int64(cfg.CPUs * 1e9),
			PidsLimit:  &pids,
		},
	}
	return cc, hc
}

// runtimePort is the runtime's HTTP port inside the container (bridge mode).
const runtimePort = "8000"

// bridgePorts publishes the runtime's port on 127.0.0.1 at a random host
// port (127.0.0.1:0 → 8000); nil without bridge mode.
func bridgePorts(cfg Config) network.PortMap {
	if cfg.Network != NetworkBridge {
		return nil
	}
	return network.PortMap{network.MustParsePort(runtimePort + "/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: ""}}}
}

// driver starts the backend's session containers (session.Driver).
type driver struct{ b *Backend }

// Start implements session.Driver: a container of user whose LabelSession
// is label, started and attached; the runtime in it waits for its hello
// line. Containers a dead owner left behind are reaped first, once.
func (d driver) Start(ctx context.Context, user, label string) (session.Agent, error) {
	b := d.b
	b.reapOnce(ctx)
	dc, err := b.client()
	if err != nil {
		return nil, err
	}
	a, err := b.prepare(ctx, b.config(), dc, user, label)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// prepare creates, attaches and starts a container of user whose
// LabelSession is label. The runtime in it waits for its hello line (bind)
// before it does anything.
func (b *Backend) prepare(ctx context.Context, cfg Config, dc *client.Client, user, label string) (_ *agent, retErr error) {
	s := &agent{
		b:      b,
		bridge: cfg.Network == NetworkBridge,
		label:  label,
		user:   user,
		name:   "orqest-" + user + "-" + label + "-" + randomHex(3),
		gone:   make(chan struct{}),
	}
	cc, hc := hardenedConfig(cfg, b.owner, user, label)
	created, err := dc.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cc, HostConfig: hc, Name: s.name})
	if err != nil {
		return nil, classifyDocker("open: creating the container", err)
	}
	s.containerID = created.ID
	defer func() {
		if retErr != nil {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer rcancel()
			if err := s.Stop(rctx); err != nil {
				b.logger.Warn("open failed; removing its container", "container", s.containerID, "error", err)
			}
		}
	}()

	// Attach before start so no output is lost; stdout carries MCP, stderr
	// the runtime's JSON log.
	att, err := dc.ContainerAttach(ctx, s.containerID, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		close(s.gone)
		return nil, classifyDocker("open: attaching to the container", err)
	}
	s.hijack = att.HijackedResponse
	pr, pw := io.Pipe()
	s.stdout = pr
	logW := &rtclient.LogWriter{Log: b.logger.Named("runtime").With("container", s.name)}
	go func() {
		_, err := stdcopy.StdCopy(pw, logW, s.hijack.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
		logW.Flush()
		close(s.gone)
	}()

	if _, err := dc.ContainerStart(ctx, s.containerID, client.ContainerStartOptions{}); err != nil {
		return nil, classifyDocker("open: starting the container", err)
	}
	if err := b.startEgress(ctx, cfg, dc, s); err != nil { // egress.go
		return nil, err
	}
	return s, nil
}

// Connect implements session.Agent: the hello line on the container's
// stdin, then MCP over its attached stdio or, in bridge mode, over
// Streamable HTTP on the published port; a resumed container then gets its
// saved globals back (pause.go).
func (a *agent) Connect(ctx context.Context, mc *mcp.Client, hello rtproto.Hello) (*mcp.ClientSession, error) {
	a.bindEgress(hello.Session, hello.User) // egress.go
	cs, err := a.connect(ctx, mc, hello)
	if err != nil {
		return nil, err
	}
	return a.bound(ctx, cs, hello)
}

func (a *agent) connect(ctx context.Context, mc *mcp.Client, hello rtproto.Hello) (*mcp.ClientSession, error) {
	if !a.bridge {
		return rtclient.Bind(ctx, mc, hello, &stdinWriter{s: a}, a.stdout)
	}
	a.hello = hello
	line, err := json.Marshal(hello)
	if err != nil {
		return nil, fmt.Errorf("encoding the hello line: %w: %w", err, shared.ErrInternal)
	}
	if _, err := a.hijack.Conn.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("sending the session secret to the runtime: %w: %w", err, shared.ErrUnavailable)
	}
	go func() { _, _ = io.Copy(io.Discard, a.stdout) }() // stdout is unused over HTTP
	dc, err := a.b.client()
	if err != nil {
		return nil, err
	}
	cs, err := a.b.connectHTTP(ctx, dc, a, mc)
	if err != nil {
		return nil, fmt.Errorf("MCP initialize with the runtime: %w: %w", err, shared.ErrUnavailable)
	}
	return cs, nil
}

// connectHTTP finds the published port and connects MCP over Streamable
// HTTP, minting a fresh agent-scope token for every HTTP request. The
// runtime starts listening right after the hello line, so it retries briefly.
func (b *Backend) connectHTTP(ctx context.Context, dc *client.Client, s *agent, mc *mcp.Client) (*mcp.ClientSession, error) {
	ins, err := dc.ContainerInspect(ctx, s.containerID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, classifyDocker("open: inspecting the container", err)
	}
	var hostPort string
	if ns := ins.Container.NetworkSettings; ns != nil {
		for _, pb := range ns.Ports[network.MustParsePort(runtimePort+"/tcp")] {
			if pb.HostPort != "" {
				hostPort = pb.HostPort
				break
			}
		}
	}
	if hostPort == "" {
		return nil, fmt.Errorf("open: the runtime's port %s is not published: %w", runtimePort, shared.ErrUnavailable)
	}
	s.endpoint = "http://127.0.0.1:" + hostPort + "/"
	httpc := &http.Client{Transport: &tokenTransport{s: s, base: http.DefaultTransport}}
	for {
		cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.endpoint, HTTPClient: httpc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err == nil {
			return cs, nil
		}
		if s.dead() {
			return nil, fmt.Errorf("the runtime exited: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tokenTransport adds a fresh agent-scope bearer token to every request.
type tokenTransport struct {
	s    *agent
	base http.RoundTripper
}

func (t *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h := t.s.hello
	tok, err := rtproto.Mint(h.Secret, h.User, h.Session, rtproto.ScopeAgent, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(r)
}

// stdinWriter writes MCP frames to the container's stdin; Close half-closes
// it, which ends the runtime.
type stdinWriter struct{ s *agent }

func (w *stdinWriter) Write(p []byte) (int, error) { return w.s.hijack.Conn.Write(p) }
func (w *stdinWriter) Close() error                { return w.s.hijack.CloseWrite() }

// Stop implements session.Agent: it force-removes the container (and its
// egress forwarder, proxy and socket, egress.go), waiting
// until the engine no longer lists it, and closes the attach stream. The
// user's volume stays. Safe to call more than once.
func (a *agent) Stop(ctx context.Context) error {
	a.stopOnce.Do(func() {
		a.stopErr = a.b.removeContainer(ctx, a.containerID)
		if a.hijack.Conn != nil {
			a.hijack.Close()
		}
		a.stopErr = errors.Join(a.stopErr, a.stopEgress(ctx)) // egress.go
	})
	return a.stopErr
}

// removeContainer force-removes id and waits until it is gone. With
// AutoRemove the engine may already be removing it ("removal in progress").
func (b *Backend) removeContainer(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	dc, err := b.client()
	if err != nil {
		return err
	}
	for {
		_, err := dc.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		// A removal already in progress is a 409 Conflict: wait for it.
		if !cerrdefs.IsConflict(err) {
			return classifyDocker("removing container "+shortID(id), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing container %s: %w: %w", shortID(id), ctx.Err(), shared.ErrUnavailable)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// classifyDocker wraps an engine error in a shared error class.
func classifyDocker(what string, err error) error {
	switch {
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%s: %w: %w", what, err, shared.ErrNotFound)
	case cerrdefs.IsInvalidArgument(err):
		return fmt.Errorf("%s: %w: %w", what, err, shared.ErrInvalidArgument)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, err, shared.ErrUnavailable)
}
