package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRuleAccepts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // Rule.String
	}{
		{"api.example.com", "name api.example.com, any port"},
		{"API.Example.com.:443", "name api.example.com, port 443"},
		{"*.internal.example", "names under internal.example, any port"},
		{"*.internal.example:8080", "names under internal.example, port 8080"},
		{"10.0.0.0/8:5432", "addresses 10.0.0.0/8, port 5432"},
		{"10.1.2.3", "address 10.1.2.3, any port"},
		{"10.1.2.3:80", "address 10.1.2.3, port 80"},
		{"fd00::/8", "addresses fd00::/8, any port"},
		{"[fd00::/8]:443", "addresses fd00::/8, port 443"},
		{"[::1]:8080", "address ::1, port 8080"},
		{"::ffff:10.0.0.1", "address 10.0.0.1, any port"},
		{"pypi_internal.corp", "name pypi_internal.corp, any port"},
	} {
		r, err := ParseRule(tc.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.in, err)
			continue
		}
		if got := r.String(); got != tc.want {
			t.Errorf("ParseRule(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseRuleRefuses(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"", "empty"},
		{" api.example.com", "spaces"},
		{"*", "allow-everything"},
		{"*.com", "two labels"},
		{"api.*.example", "leading"},
		{"https://api.example.com", "not a URL"},
		{"api.example.com:0", "1 to 65535"},
		{"api.example.com:99999", "1 to 65535"},
		{"api.example.com:http", "1 to 65535"},
		{"api.example.com:", "empty port"},
		{"10.0.0.1/8", "host bits"},
		{"10.0.0.0/33", "CIDR"},
		{"[fd00::1", "unclosed"},
		{"[fd00::1]443", "not :port"},
		{"-bad.example", "start or end"},
		{"bad..example", "1 to 63"},
		{"ex ample.com", "host name character"},
		{"fe80::1%eth0", "zone"},
	} {
		_, err := ParseRule(tc.in)
		if err == nil {
			t.Errorf("ParseRule(%q) accepted", tc.in)
			continue
		}
		if !errors.Is(err, ErrInvalidRule) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("ParseRule(%q) = %v, want ErrInvalidRule saying %q", tc.in, err, tc.why)
		}
	}
}

func TestParsePolicyReportsEveryBadEntry(t *testing.T) {
	_, err := ParsePolicy("p", []string{"ok.example", "*", "x:0"}, []string{"10.0.0.1/8"}, -1)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`"*"`, `"x:0"`, `"10.0.0.1/8"`, "budget_bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// resolver answers from a fixed table.
func resolver(table map[string][]string) LookupFunc {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range table[host] {
			out = append(out, netip.MustParseAddr(s))
		}
		if out == nil {
			return nil, errors.New("no such host")
		}
		return out, nil
	}
}

func mustPolicy(t *testing.T, allow, deny []string) Policy {
	t.Helper()
	p, err := ParsePolicy(`sandbox "s" network {}`, allow, deny, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecide(t *testing.T) {
	p := mustPolicy(t,
		[]string{"api.example.com:443", "*.internal.example", "10.0.0.0/8:5432", "pinned.example", "127.0.0.1:8080", "mixed.example"},
		[]string{"secret.internal.example", "10.9.0.0/16"})
	lookup := resolver(map[string][]string{
		"api.example.com":            {"203.0.113.7"},
		"pypi.internal.example":      {"10.1.2.3"},
		"db.internal.example":        {"10.9.1.1"},        // denied network
		"rebind.internal.example":    {"127.0.0.1"},       // loopback, not listed for port 443
		"meta.internal.example":      {"169.254.169.254"}, // metadata
		"v6meta.internal.example":    {"fd00:ec2::254"},
		"zero.internal.example":      {"0.0.0.0"},
		"linklocal.internal.example": {"fe80::1"},
		"pinned.example":             {"127.0.0.1"},
		"mixed.example":              {"203.0.113.8", "127.0.0.1"},
	})
	ctx := context.Background()
	for _, tc := range []struct {
		host string
		port int
		ok   bool
		why  string
	}{
		{"api.example.com", 443, true, ""},
		{"API.EXAMPLE.COM.", 443, true, ""},
		{"api.example.com", 80, false, "not in allow"},
		{"evil.example", 443, false, "not in allow"},
		{"pypi.internal.example", 443, true, ""},
		{"internal.example", 443, false, "not in allow"}, // the wildcard does not match its apex
		{"secret.internal.example", 443, false, `deny entry "secret.internal.example"`},
		{"db.internal.example", 443, false, `deny entry "10.9.0.0/16"`},
		{"rebind.internal.example", 443, false, "a loopback address"},
		{"meta.internal.example", 80, false, "a cloud metadata address"},
		{"v6meta.internal.example", 80, false, "a cloud metadata address"},
		{"zero.internal.example", 80, false, "the unspecified address"},
		{"linklocal.internal.example", 80, false, "a link-local address"},
		{"pinned.example", 8080, true, ""},                    // listed as an address for this port
		{"pinned.example", 8081, false, "a loopback address"}, // not for another
		{"mixed.example", 443, false, "127.0.0.1"},            // one bad address refuses the name
		{"10.1.2.3", 5432, true, ""},
		{"10.1.2.3", 22, false, "no address or CIDR entry"},
		{"10.9.1.1", 5432, false, `deny entry "10.9.0.0/16"`},
		{"203.0.113.7", 443, false, "no address or CIDR entry"}, // a raw address of an allowed name
		{"169.254.169.254", 80, false, "no address or CIDR entry"},
		{"[::ffff:10.1.2.3]", 5432, true, ""},
		{"127.0.0.1", 8080, true, ""},
	} {
		addrs, err := p.Decide(ctx, tc.host, tc.port, lookup)
		if tc.ok {
			if err != nil || len(addrs) == 0 {
				t.Errorf("Decide(%s:%d) = %v, %v; want allowed", tc.host, tc.port, addrs, err)
			}
			continue
		}
		var ref *Refusal
		if !errors.As(err, &ref) || !errors.Is(err, ErrRefused) {
			t.Errorf("Decide(%s:%d) = %v, %v; want a Refusal", tc.host, tc.port, addrs, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), `sandbox "s" network {}`) {
			t.Errorf("Decide(%s:%d): %q does not name the policy and %q", tc.host, tc.port, err, tc.why)
		}
	}
}

func TestDecideLookupFailureIsNotARefusal(t *testing.T) {
	p := mustPolicy(t, []string{"gone.example"}, nil)
	_, err := p.Decide(context.Background(), "gone.example", 443, resolver(nil))
	if err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("got %v, want a lookup error", err)
	}
}
