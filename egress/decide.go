package egress

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrRefused is wrapped by every refusal of the policy (a *Refusal).
var ErrRefused = errors.New("refused by the egress policy")

// Refusal is a destination the policy refuses, and why.
type Refusal struct {
	// Policy names the policy (Policy.Name).
	Policy string
	// Host and Port are the destination as the client named it.
	Host string
	Port int
	// Reason says what refused it, e.g. "evil.example is not in allow".
	Reason string
}

// Error names the policy, the destination and the reason.
func (e *Refusal) Error() string {
	return fmt.Sprintf("egress to %s refused by %s: %s", joinHostPort(e.Host, e.Port), e.Policy, e.Reason)
}

// Unwrap makes a Refusal an ErrRefused.
func (e *Refusal) Unwrap() error { return ErrRefused }

// LookupFunc resolves a host name to its addresses.
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// Decide checks a destination against the policy and returns the
// addresses the proxy may dial, each checked. A raw address must be
// listed by an address or CIDR entry; a name must be allowed by a host
// entry, and every address it resolves to must pass: none denied, and
// none loopback, link-local, multicast, unspecified or a metadata address
// unless an address entry lists it. A refusal is a *Refusal; a lookup
// that fails is an error wrapping lookup's.
func (p Policy) Decide(ctx context.Context, host string, port int, lookup LookupFunc) ([]netip.Addr, error) {
	refuse := func(format string, args ...any) error {
		return &Refusal{Policy: p.Name, Host: host, Port: port, Reason: fmt.Sprintf(format, args...)}
	}
	if port < 1 || port > 65535 {
		return nil, refuse("port %d is out of range", port)
	}
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return nil, refuse("an address with a zone")
		}
		a = a.Unmap()
		if r, ok := p.denyAddr(a, port); ok {
			return nil, refuse("deny entry %q matches %s", r.Entry, a)
		}
		if _, ok := p.allowAddr(a, port); !ok {
			return nil, refuse("no address or CIDR entry of allow lists %s", joinHostPort(a.String(), port))
		}
		return []netip.Addr{a}, nil
	}
	if err := checkHostName(h); err != nil {
		return nil, refuse("%q is not a host name: %v", host, err)
	}
	for _, r := range p.Deny {
		if r.matchesName(h, port) {
			return nil, refuse("deny entry %q matches it", r.Entry)
		}
	}
	allowed := false
	for _, r := range p.Allow {
		if r.matchesName(h, port) {
			allowed = true
			break
		}
	}
	if !allowed {
		return nil, refuse("%s is not in allow", joinHostPort(h, port))
	}
	addrs, err := lookup(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("egress to %s: resolving %s: %w", joinHostPort(h, port), h, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("egress to %s: %s has no addresses", joinHostPort(h, port), h)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if r, ok := p.denyAddr(a, port); ok {
			return nil, refuse("%s resolves to %s, which deny entry %q matches", h, a, r.Entry)
		}
		if why := special(a); why != "" {
			if _, ok := p.allowAddr(a, port); !ok {
				return nil, refuse("%s resolves to %s, %s; a name may reach it only when an address entry of allow lists it", h, a, why)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func (p Policy) denyAddr(a netip.Addr, port int) (Rule, bool) {
	for _, r := range p.Deny {
		if r.matchesAddr(a, port) {
			return r, true
		}
	}
	return Rule{}, false
}

func (p Policy) allowAddr(a netip.Addr, port int) (Rule, bool) {
	for _, r := range p.Allow {
		if r.matchesAddr(a, port) {
			return r, true
		}
	}
	return Rule{}, false
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}
