package egress

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

// FuzzParseRule: an entry is accepted or refused with ErrInvalidRule,
// never a panic; an accepted one parses again to the same rule, and a
// policy of it alone decides without a panic, allowing a raw address only
// through an address rule.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"api.example.com:443", "*.internal.example", "10.0.0.0/8:5432", "[fd00::/8]:443", "::ffff:10.0.0.1", "*", "a:0", "[::1", "x..y", "fe80::1%eth0"} {
		f.Add(s, "10.1.2.3", 443)
	}
	f.Fuzz(func(t *testing.T, entry, host string, port int) {
		r, err := ParseRule(entry)
		if err != nil {
			if !errors.Is(err, ErrInvalidRule) {
				t.Fatalf("ParseRule(%q): %v is not ErrInvalidRule", entry, err)
			}
			return
		}
		again, err := ParseRule(r.Entry)
		if err != nil || again != r {
			t.Fatalf("ParseRule(%q) = %+v, again %+v %v", entry, r, again, err)
		}
		if r.String() == "" {
			t.Fatal("empty description")
		}
		p := Policy{Name: "f", Allow: []Rule{r}}
		addrs, err := p.Decide(context.Background(), host, port, func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("203.0.113.1")}, nil
		})
		if err == nil {
			if len(addrs) == 0 {
				t.Fatal("allowed with no address")
			}
			if a, perr := netip.ParseAddr(host); perr == nil && !r.IsAddress() {
				t.Fatalf("raw address %s allowed by the name rule %q", a, entry)
			}
		}
	})
}
