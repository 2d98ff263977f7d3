package agent

import (
	"context"
	"testing"
)

// egressProxy takes the runtime's HTTP_PROXY as the children's seal wants
// it: nil without, the URL's host and port, a host name resolved to an
// address (the children cannot resolve), credentials kept; a URL that is
// not an http proxy's is an error.
func TestEgressProxy(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "HTTP_PROXY" {
				return v
			}
			return ""
		}
	}
	ctx := context.Background()
	if eg, err := egressProxy(ctx, env("")); eg != nil || err != nil {
		t.Errorf(`"": %+v, %v`, eg, err)
	}
	eg, err := egressProxy(ctx, env("http://u:p@127.0.0.1:3128"))
	if err != nil || eg.Host != "127.0.0.1" || eg.Port != 3128 || eg.URL != "http://u:p@127.0.0.1:3128" {
		t.Errorf("an address: %+v, %v", eg, err)
	}
	eg, err = egressProxy(ctx, env("http://u:p@localhost:3128"))
	if err != nil || (eg.Host != "127.0.0.1" && eg.Host != "::1") || eg.Port != 3128 || eg.URL != "http://u:p@"+hostPort(eg.Host)+":3128" {
		t.Errorf("a name: %+v, %v", eg, err)
	}
	for _, bad := range []string{"socks5://127.0.0.1:1080", "http://127.0.0.1:3128/x", "http://no-such-host.invalid:3128"} {
		if eg, err := egressProxy(ctx, env(bad)); err == nil {
			t.Errorf("%s: %+v, want an error", bad, eg)
		}
	}
}

// hostPort is host as a URL holds it (an IPv6 address in brackets).
func hostPort(host string) string {
	for _, c := range host {
		if c == ':' {
			return "[" + host + "]"
		}
	}
	return host
}
