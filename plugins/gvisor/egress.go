package gvisor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/internal/procfs"
	"github.com/orqest/sandbox/shared"
)

// A session of a sandbox with a network {} block (shared.EgressPolicy)
// keeps --network=none: the Sentry's network stack has a loopback device
// and nothing else, so nothing routes out of the sandbox. A forwarder
// inside the sandbox (egress.ForwarderScript, run by `runsc exec` as uid
// 65534 with the host's /usr/bin/python3) listens on egress.ListenAddr
// and carries each connection to the session's egress proxy in this
// plugin, over a Unix socket whose directory is bound read-only on
// egressSocketDir; runsc runs with --host-uds=open so that the sandbox
// may connect to it. The runtime's environment has HTTP_PROXY and
// HTTPS_PROXY. The forwarder ends with the sandbox, and the socket's
// directory is removed with it. A checkpoint would hold the forwarder's
// connections to a host socket, and the proxy lives in this plugin, so a
// sandbox with egress rules does not declare pause.

// egressSocketDir is where the sandbox sees the proxy's socket.
const egressSocketDir = "/run/orqest-egress"

// configureEgress parses the host's egress policy into cfg.
func configureEgress(cfg *Config, p *shared.EgressPolicy) error {
	if p == nil {
		return nil
	}
	pol, err := egress.PolicyOf(p)
	if err != nil {
		return fmt.Errorf("gvisor config: the network block: %w: %w", err, shared.ErrInvalidArgument)
	}
	cfg.egress = &pol
	return nil
}

// egressCaps adjusts the session capabilities for egress rules: sessions
// enforce them (egress), and a sandbox with them is not paused.
func egressCaps(c []shared.Capability, cfg Config) []shared.Capability {
	if !slices.Contains(c, shared.CapSessions) {
		return c
	}
	c = append(c, shared.CapEgress)
	if cfg.egress != nil {
		c = slices.DeleteFunc(c, func(x shared.Capability) bool { return x == shared.CapPause || x == shared.CapPauseMemory })
	}
	return c
}

// egressGlobals are runsc's flags for egress rules: the sandbox may
// connect to a host Unix socket bound into it.
func egressGlobals(cfg Config) []string {
	if cfg.egress == nil {
		return nil
	}
	return []string{"--host-uds=open"}
}

// egressSpec adds the socket's directory and the proxy environment to a
// session's spec.
func egressSpec(s *specs.Spec, ep *egress.Endpoint) {
	if ep == nil {
		return
	}
	s.Mounts = append(s.Mounts, specs.Mount{Destination: egressSocketDir, Type: "bind", Source: ep.Dir, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
	s.Process.Env = append(s.Process.Env, egress.ProxyEnv(egress.ProxyURL)...)
}

// egressSide is one session sandbox's egress: the proxy on its socket and
// the forwarder's `runsc exec`.
type egressSide struct {
	*egress.Endpoint
	forwarder *exec.Cmd
}

// listenEgress serves the session's proxy on a socket of its own; nil
// without egress rules.
func (b *Backend) listenEgress(cfg Config, user, label string) (*egressSide, error) {
	if cfg.egress == nil {
		return nil, nil
	}
	ep, err := egress.Listen("", os.Getpid(), procfs.StartTime(os.Getpid()), egress.Options{Policy: *cfg.egress, Lookup: b.egressLookup, OnEvent: b.egressEvent},
		func(err error) { b.logger.Warn("egress proxy", "label", label, "error", err) })
	if err != nil {
		return nil, fmt.Errorf("open: the egress proxy: %w: %w", err, shared.ErrUnavailable)
	}
	ep.Proxy.SetSession(label, user)
	return &egressSide{Endpoint: ep}, nil
}

// startForwarder runs the forwarder in the session's sandbox once runsc
// has created it (it retries `runsc exec` until the container exists) and
// returns when it listens.
func (a *agent) startForwarder(ctx context.Context, runsc string, globals []string, cfg Config) error {
	e := a.egress
	if e == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.openTimeout)
	defer cancel()
	_, port, _ := strings.Cut(egress.ListenAddr, ":")
	var last error
	for {
		args := append(slices.Clone(globals[1:]), "exec", "--user", "65534:65534", a.container,
			cfg.Python, "-I", "-S", "-B", "-c", egress.ForwarderScript, egressSocketDir+"/"+e.Socket, port)
		cmd := exec.Command(runsc, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return fmt.Errorf("open: the egress forwarder: %w: %w", err, shared.ErrInternal)
		}
		var stderr strings.Builder
		cmd.Stderr = &limited{w: &stderr, n: 2048}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("open: the egress forwarder: %w: %w", err, shared.ErrUnavailable)
		}
		line, rerr := bufio.NewReader(out).ReadString('\n')
		if rerr == nil && strings.TrimSpace(line) == "ready" {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			e.forwarder = cmd
			return nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		last = fmt.Errorf("%q %v: %s", line, rerr, strings.TrimSpace(stderr.String()))
		select {
		case <-a.gone:
			return fmt.Errorf("open: the egress forwarder: the sandbox ended (%v): %w", last, shared.ErrUnavailable)
		case <-ctx.Done():
			return fmt.Errorf("open: the egress forwarder did not start (%v): %w: %w", last, ctx.Err(), shared.ErrUnavailable)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// stopEgress ends the forwarder (it ends with its sandbox; a straggler is
// killed), stops the proxy and removes the socket's directory.
func (a *agent) stopEgress() error {
	e := a.egress
	if e == nil {
		return nil
	}
	var errs []error
	if c := e.forwarder; c != nil {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	errs = append(errs, e.Endpoint.Close())
	return errors.Join(errs...)
}

// egressEvent keeps a proxy event for the next response and logs it.
func (b *Backend) egressEvent(ev egress.Event) {
	b.egressEvents.Keep(b.logger, ev)
}
