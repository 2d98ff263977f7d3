package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/shared"
)

// A session of a sandbox with a network {} block (shared.EgressPolicy)
// keeps its container on network "none": its network namespace has only
// a loopback interface, so the kernel routes nothing out of it. A second,
// small container, the forwarder, joins that namespace (network mode
// container:<session>) and listens on EgressProxyAddr inside it; each
// connection it accepts it carries to the session's egress proxy, which
// runs in this plugin behind a Unix socket bind-mounted into the
// forwarder alone. HTTP_PROXY and HTTPS_PROXY of the session point at
// EgressProxyAddr. The forwarder is removed with the session, and the
// socket's directory with it.

// EgressProxyAddr is where a session reaches its egress proxy, inside its
// own network namespace.
const EgressProxyAddr = egress.ListenAddr

// LabelRole marks the forwarder container (value roleForwarder); it
// carries the owner labels of its session too, so the reaper removes it
// when its owner is gone.
const LabelRole = "org.orqest.sandbox.role"

const (
	roleForwarder = "egress-forwarder"
	// forwarderSocketDir is where the forwarder sees the proxy's socket.
	forwarderSocketDir = "/run/orqest-egress"
)

// egressEnv is the proxy environment of a session container with egress
// rules; nil without.
func egressEnv(cfg Config) []string {
	if cfg.egress == nil {
		return nil
	}
	return egress.ProxyEnv(egress.ProxyURL)
}

// configureEgress parses the host's egress policy into cfg: a session
// container on a network other than "none" could bypass the proxy, so
// the two are refused together.
func configureEgress(cfg *Config, p *shared.EgressPolicy) error {
	if p == nil {
		return nil
	}
	if cfg.Network != NetworkNone {
		return shared.ConfigError("docker", "network", nil, "%q with a network {} block: the session's only route out must be the egress proxy, so its container stays on network %q (leave network out)", cfg.Network, NetworkNone)
	}
	switch cfg.Runtime {
	case "", "runc", "crun":
	default:
		// A runtime with a network stack of its own (runsc's netstack)
		// does not see the forwarder's listener in the shared namespace.
		return shared.ConfigError("docker", "runtime", nil, "%q with a network {} block: the forwarder shares the session's kernel network namespace, which a runtime with its own network stack does not use; leave runtime out (runc)", cfg.Runtime)
	}
	if cfg.Endpoint != "" && !strings.HasPrefix(cfg.Endpoint, "unix://") {
		return shared.ConfigError("docker", "endpoint", nil, "%q with a network {} block: the egress proxy's socket is bind-mounted from this machine, so the engine must be local", cfg.Endpoint)
	}
	pol, err := egress.PolicyOf(p)
	if err != nil {
		return fmt.Errorf("docker config: the network block: %w: %w", err, shared.ErrInvalidArgument)
	}
	cfg.egress = &pol
	return nil
}

// egressSide is one session container's egress: its proxy on its socket,
// and the forwarder container.
type egressSide struct {
	*egress.Endpoint
	forwarder string // container id
}

// startEgress starts the proxy of session container a and its forwarder
// (a must be running: the forwarder joins its network namespace). It
// returns once the forwarder listens.
func (b *Backend) startEgress(ctx context.Context, cfg Config, dc *client.Client, a *agent) (retErr error) {
	if cfg.egress == nil {
		return nil
	}
	e := &egressSide{}
	a.egress = e
	defer func() {
		if retErr != nil {
			retErr = fmt.Errorf("open: the egress proxy: %w", retErr)
		}
	}()
	ep, err := egress.Listen("", b.owner.pid, b.owner.start, egress.Options{Policy: *cfg.egress, Lookup: b.egressLookup, OnEvent: b.egressEvent},
		func(err error) { b.logger.Warn("egress proxy", "container", a.name, "error", err) })
	if err != nil {
		return fmt.Errorf("%w: %w", err, shared.ErrUnavailable)
	}
	e.Endpoint = ep
	ep.Proxy.SetSession(a.label, a.user)
	_, port, _ := net.SplitHostPort(EgressProxyAddr)
	pids := int64(2*maxConns(cfg.egress) + 16) // a thread per direction of each connection
	mem := int64(64 << 20)
	labels := map[string]string{
		LabelTier: tierValue, LabelOwnerPID: strconv.Itoa(b.owner.pid), LabelOwnerStart: b.owner.start,
		LabelOwnerHost: b.owner.host, LabelUser: a.user, LabelSession: a.label, LabelRole: roleForwarder,
	}
	cc := &container.Config{
		Image:        cfg.Image,
		User:         "65534:65534",
		Entrypoint:   []string{"python3"},
		Cmd:          []string{"-I", "-S", "-B", "-c", egress.ForwarderScript, forwarderSocketDir + "/" + ep.Socket, port},
		Env:          []string{},
		Labels:       labels,
		AttachStdout: true,
		AttachStderr: true,
	}
	hc := &container.HostConfig{
		Runtime:        cfg.Runtime,
		NetworkMode:    container.NetworkMode("container:" + a.containerID),
		AutoRemove:     true,
		CapDrop:        []string{"ALL"},
		ReadonlyRootfs: true,
		SecurityOpt:    []string{"no-new-privileges:true"},
		Mounts:         []mount.Mount{{Type: mount.TypeBind, Source: ep.Dir, Target: forwarderSocketDir, ReadOnly: true}},
		Resources:      container.Resources{Memory: mem, MemorySwap: mem, NanoCPUs: 5e8, PidsLimit: &pids},
	}
	created, err := dc.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cc, HostConfig: hc, Name: a.name + "-egress"})
	if err != nil {
		return classifyDocker("creating the forwarder container", err)
	}
	e.forwarder = created.ID
	att, err := dc.ContainerAttach(ctx, e.forwarder, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return classifyDocker("attaching to the forwarder container", err)
	}
	defer att.Close()
	if _, err := dc.ContainerStart(ctx, e.forwarder, client.ContainerStartOptions{}); err != nil {
		return classifyDocker("starting the forwarder container", err)
	}
	return waitReady(ctx, att.Reader)
}

func maxConns(p *egress.Policy) int {
	if p.MaxConns > 0 {
		return p.MaxConns
	}
	return egress.DefaultMaxConns
}

// waitReady reads the forwarder's attached output until its "ready" line.
func waitReady(ctx context.Context, r io.Reader) error {
	pr, pw := io.Pipe()
	var stderr strings.Builder
	go func() {
		_, err := stdcopy.StdCopy(pw, &limitedWriter{w: &stderr, n: 4096}, r)
		pw.CloseWithError(err)
	}()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(pr).ReadString('\n')
		if err == nil && strings.TrimSpace(line) == "ready" {
			ready <- nil
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return
		}
		ready <- fmt.Errorf("the forwarder did not start (%q, %v)", line, err)
	}()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("%w: stderr %q: %w", err, stderr.String(), shared.ErrUnavailable)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the forwarder: %w", ctx.Err())
	}
}

type limitedWriter struct {
	mu sync.Mutex
	w  io.Writer
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// bindEgress names the session the proxy's events carry once the agent
// is bound to one (a warm container learns its session only then).
func (a *agent) bindEgress(session, user string) {
	if a.egress != nil && a.egress.Endpoint != nil {
		a.egress.Proxy.SetSession(session, user)
	}
}

// stopEgress removes the forwarder, stops the proxy (cutting its tunnels)
// and removes the socket's directory. Safe on an agent without egress.
func (a *agent) stopEgress(ctx context.Context) error {
	e := a.egress
	if e == nil {
		return nil
	}
	var errs []error
	if e.forwarder != "" {
		errs = append(errs, a.b.removeContainer(ctx, e.forwarder))
	}
	if e.Endpoint != nil {
		errs = append(errs, e.Endpoint.Close())
	}
	return errors.Join(errs...)
}

// egressEvent keeps a proxy event for the host (the next response's
// Events) and logs it.
func (b *Backend) egressEvent(ev egress.Event) {
	b.egressEvents.Keep(b.logger, ev)
}

// Execute runs req (session.Manager.Execute) and reports the egress
// events of every session since the last response.
func (b *Backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	return b.egressEvents.Respond(b.Manager.Execute(ctx, req))
}

// ExecuteStream is Execute with the output streamed (shared.Streamer).
func (b *Backend) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk) error) (shared.ExecuteResponse, error) {
	return b.egressEvents.Respond(b.Manager.ExecuteStream(ctx, req, send))
}
