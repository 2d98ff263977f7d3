package agent

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// egressProxy returns the egress proxy this runtime was started with (the
// plugin sets HTTP_PROXY in its environment for a sandbox with a network
// {} block; getenv reads it) as the runner's seal takes it, nil without.
// A proxy named by host name is resolved here, once: the sealed children
// cannot resolve names (no UDP), and their audit hook and Landlock rule
// name the address they may connect to.
func egressProxy(ctx context.Context, getenv func(string) string) (*runner.Egress, error) {
	eg, err := runner.ParseEgress(getenv("HTTP_PROXY"))
	if err != nil || eg == nil || net.ParseIP(eg.Host) != nil {
		return eg, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, eg.Host)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("egress proxy %s: resolving its host: %v: %w", eg.Host, err, shared.ErrUnavailable)
	}
	u, err := url.Parse(eg.URL)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w: %w", err, shared.ErrInvalidArgument)
	}
	u.Host = net.JoinHostPort(ips[0].IP.String(), strconv.Itoa(eg.Port))
	return runner.ParseEgress(u.String())
}

// childSeal is the seal of every Python child of this runtime: the layers
// the probe found (required), the workspace writable, readPath readable,
// and the session's egress proxy when it has one.
func (e *executor) childSeal(s *pyproc.SealInfo, readPath []string) *runner.Seal {
	seal := s.SealWriting(e.disable, e.writePaths(), readPath...)
	seal.SetEgress(e.egress)
	return seal
}
