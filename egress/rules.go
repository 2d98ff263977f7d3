// Package egress is the outbound-network gate of a sandbox session: a
// policy of allow and deny entries (host names with an optional port,
// `*.` wildcards, IP addresses and CIDRs with an optional port) and an
// HTTP proxy (github.com/elazarl/goproxy) that lets a session reach only
// what the policy names, over HTTP CONNECT (TLS, its ClientHello's SNI
// checked against the CONNECT host) and plain HTTP.
//
// A name is resolved once, every address it resolves to is checked, and
// the proxy dials the checked address itself, so a name that answers a
// second lookup differently (DNS rebinding) gains nothing. A name that
// resolves to a loopback, link-local, multicast, unspecified or cloud
// metadata address is refused unless an address entry lists that address.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/orqest/sandbox/shared"
)

// ErrInvalidRule is wrapped by every error of ParseRule: the entry is not
// a host pattern, address or CIDR with an optional port.
var ErrInvalidRule = errors.New("invalid egress entry")

// Rule is one parsed allow or deny entry.
type Rule struct {
	// Entry is the entry as written.
	Entry string
	// Host is a lower-case host name without a trailing dot ("" for an
	// address rule). With Wildcard it is the suffix after "*.".
	Host string
	// Wildcard: the rule matches every name below Host (one label or
	// more), not Host itself.
	Wildcard bool
	// Prefix is the address rule's network (a single address is a /32 or
	// a /128); invalid for a host rule.
	Prefix netip.Prefix
	// Port is the only port the rule matches; 0 matches every port.
	Port int
}

// IsAddress reports whether r is an address or CIDR rule.
func (r Rule) IsAddress() bool { return r.Prefix.IsValid() }

// String describes what the rule matches, e.g. "*.internal.example, any
// port" or "10.0.0.0/8, port 5432".
func (r Rule) String() string {
	var what string
	switch {
	case r.IsAddress() && r.Prefix.IsSingleIP():
		what = "address " + r.Prefix.Addr().String()
	case r.IsAddress():
		what = "addresses " + r.Prefix.String()
	case r.Wildcard:
		what = "names under " + r.Host
	default:
		what = "name " + r.Host
	}
	if r.Port == 0 {
		return what + ", any port"
	}
	return what + ", port " + strconv.Itoa(r.Port)
}

// ParseRule parses one entry: "api.example.com", "api.example.com:443",
// "*.internal.example", "10.0.0.0/8:5432", "10.1.2.3", "[fd00::/8]:443",
// "fd00::1". Errors wrap ErrInvalidRule and say what is wrong.
func ParseRule(entry string) (Rule, error) {
	r := Rule{Entry: entry}
	s := strings.TrimSpace(entry)
	if s != entry || s == "" {
		return r, fmt.Errorf("%w %q: empty or surrounded by spaces", ErrInvalidRule, entry)
	}
	if strings.Contains(s, "://") {
		return r, fmt.Errorf("%w %q: write a host, not a URL (e.g. %q)", ErrInvalidRule, entry, "api.example.com:443")
	}
	hostPart, portPart, err := splitPort(s)
	if err != nil {
		return r, fmt.Errorf("%w %q: %v", ErrInvalidRule, entry, err)
	}
	if portPart != "" {
		p, err := strconv.Atoi(portPart)
		if err != nil || p < 1 || p > 65535 {
			return r, fmt.Errorf("%w %q: port %q is not a number from 1 to 65535", ErrInvalidRule, entry, portPart)
		}
		r.Port = p
	}
	if strings.Contains(hostPart, "/") {
		pfx, err := netip.ParsePrefix(hostPart)
		if err != nil {
			return r, fmt.Errorf("%w %q: %q is not a CIDR such as 10.0.0.0/8: %v", ErrInvalidRule, entry, hostPart, err)
		}
		if pfx.Addr().Zone() != "" {
			return r, fmt.Errorf("%w %q: an address zone is not allowed", ErrInvalidRule, entry)
		}
		if pfx.Masked() != pfx {
			return r, fmt.Errorf("%w %q: %s has host bits set; the network is %s", ErrInvalidRule, entry, pfx, pfx.Masked())
		}
		r.Prefix = unmapPrefix(pfx)
		return r, nil
	}
	if a, err := netip.ParseAddr(hostPart); err == nil {
		if a.Zone() != "" {
			return r, fmt.Errorf("%w %q: an address zone is not allowed", ErrInvalidRule, entry)
		}
		a = a.Unmap()
		r.Prefix = netip.PrefixFrom(a, a.BitLen())
		return r, nil
	}
	name := strings.ToLower(strings.TrimSuffix(hostPart, "."))
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		r.Wildcard = true
		name = rest
	}
	if err := checkHostName(name); err != nil {
		return r, fmt.Errorf("%w %q: %v", ErrInvalidRule, entry, err)
	}
	if r.Wildcard && !strings.Contains(name, ".") {
		return r, fmt.Errorf("%w %q: a wildcard must keep at least two labels (*.example.com, not *.com)", ErrInvalidRule, entry)
	}
	r.Host = name
	return r, nil
}

// splitPort splits "host:port", "[v6]:port", "[v6/len]:port", a bare IPv6
// address or CIDR, or a bare host.
func splitPort(s string) (host, port string, err error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		i := strings.IndexByte(rest, ']')
		if i < 0 {
			return "", "", errors.New("an unclosed '['")
		}
		host, after := rest[:i], rest[i+1:]
		if after == "" {
			return host, "", nil
		}
		p, ok := strings.CutPrefix(after, ":")
		if !ok || p == "" {
			return "", "", fmt.Errorf("%q after ']' is not :port", after)
		}
		return host, p, nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", nil
	case 1:
		i := strings.IndexByte(s, ':')
		if s[i+1:] == "" {
			return "", "", errors.New("an empty port after ':'")
		}
		return s[:i], s[i+1:], nil
	default: // a bare IPv6 address or CIDR; with a port it needs brackets
		return s, "", nil
	}
}

// checkHostName accepts DNS names of letters, digits and '-' (and '_',
// which some internal names use), labels of 1 to 63 characters, 253 in all.
func checkHostName(name string) error {
	if name == "" {
		return errors.New("no host name")
	}
	if name == "*" || strings.Contains(name, "*") {
		return errors.New(`'*' is only allowed as a leading "*." (e.g. *.internal.example); there is no allow-everything entry`)
	}
	if len(name) > 253 {
		return errors.New("the host name is longer than 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q must be 1 to 63 characters", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q must not start or end with '-'", label)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not a host name character", c)
			}
		}
	}
	return nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if !p.Addr().Is4In6() {
		return p
	}
	bits := p.Bits() - 96
	if bits < 0 {
		bits = 0
	}
	return netip.PrefixFrom(p.Addr().Unmap(), bits).Masked()
}

// matchesName reports whether host rule r matches name (lower case, no
// trailing dot) on port.
func (r Rule) matchesName(name string, port int) bool {
	if r.IsAddress() || (r.Port != 0 && r.Port != port) {
		return false
	}
	if r.Wildcard {
		return strings.HasSuffix(name, "."+r.Host)
	}
	return name == r.Host
}

// matchesAddr reports whether address rule r matches a on port.
func (r Rule) matchesAddr(a netip.Addr, port int) bool {
	if !r.IsAddress() || (r.Port != 0 && r.Port != port) {
		return false
	}
	return r.Prefix.Contains(a.Unmap())
}

// Policy is a parsed `network {}` block.
type Policy struct {
	// Name says where the policy comes from in refusals, e.g. `sandbox
	// "docker" network {}`.
	Name string
	// Allow and Deny are the parsed entries; a destination any Deny rule
	// matches is refused whatever Allow says.
	Allow, Deny []Rule
	// BudgetBytes caps the bytes a session sends and receives through the
	// proxy in all (0: no cap).
	BudgetBytes int64
	// MaxConns caps the connections of a session open at once (0:
	// DefaultMaxConns).
	MaxConns int
}

// DefaultMaxConns is a session's connection cap when the policy sets none.
const DefaultMaxConns = 32

// PolicyOf parses the network block a backend is handed
// (ConfigureRequest.Egress) into what its sessions' proxies enforce.
func PolicyOf(p *shared.EgressPolicy) (Policy, error) {
	pol, err := ParsePolicy(p.Name, p.Allow, p.Deny, p.BudgetBytes)
	if err != nil {
		return Policy{}, err
	}
	pol.MaxConns = p.MaxConnections
	return pol, nil
}

// ParsePolicy parses the entries of a network block. Every malformed
// entry is reported (errors.Join of ParseRule's errors).
func ParsePolicy(name string, allow, deny []string, budgetBytes int64) (Policy, error) {
	p := Policy{Name: name, BudgetBytes: budgetBytes}
	var errs []error
	for _, list := range []struct {
		in  []string
		out *[]Rule
	}{{allow, &p.Allow}, {deny, &p.Deny}} {
		for _, e := range list.in {
			r, err := ParseRule(e)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			*list.out = append(*list.out, r)
		}
	}
	if budgetBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: budget_bytes %d is negative", ErrInvalidRule, budgetBytes))
	}
	return p, errors.Join(errs...)
}

// metadataAddrs are cloud instance-metadata addresses outside the special
// ranges below: AWS's IPv6 one is a unique-local address.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
}

// special says why a is an address no name may resolve to unless an
// address rule lists it ("" for an ordinary address).
func special(a netip.Addr) string {
	a = a.Unmap()
	for _, m := range metadataAddrs {
		if a == m {
			return "a cloud metadata address"
		}
	}
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a.Is4() && a.As4()[0] == 0:
		return "an address of network 0.0.0.0/8"
	}
	return ""
}
