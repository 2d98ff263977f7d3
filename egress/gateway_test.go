package egress

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// gatewayClient is an HTTP client whose proxy is proxyURL.
func gatewayClient(t *testing.T, proxyURL string) *http.Client {
	t.Helper()
	u, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(u),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}, Timeout: 10 * time.Second}
}

// A Gateway serves a request with the proxy of the route whose credential
// it carries, on plain HTTP and on CONNECT, and strips the credential; a
// request without a credential, with a wrong secret, with another
// session's credential (from an address that is not that session's) or
// with a closed route's gets 407 and a refusal event, and reaches nothing.
// The right credential passes on to the policy check: a forbidden host
// still gets the policy's 403.
func TestGatewayCredentials(t *testing.T) {
	var base Options
	f := newFixture(t, 0, 0, func(o *Options) { base = *o })
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "proxy-authorization=%q", r.Header.Get("Proxy-Authorization"))
	}))
	t.Cleanup(echo.Close)
	f.w.mu.Lock()
	f.w.routes[fmt.Sprintf("203.0.113.10:%d", port(t, echo.Listener.Addr().String()))] = echo.Listener.Addr().String()
	f.w.mu.Unlock()

	gwEvents := &world{}
	g, err := ListenGateway("127.0.0.1:0", gwEvents.onEvent, func(err error) { t.Errorf("gateway: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	a, err := g.Add(base)
	if err != nil {
		t.Fatal(err)
	}
	a.Proxy.SetSession("s-a", "alice")
	b, err := g.Add(base)
	if err != nil {
		t.Fatal(err)
	}
	b.Proxy.SetSession("s-b", "bob")
	b.SetSource(netip.MustParseAddr("10.244.0.99")) // another pod's address
	if a.ID == b.ID || a.URL() == b.URL() {
		t.Fatalf("two routes share a credential: %s %s", a.URL(), b.URL())
	}
	ua, err := url.Parse(a.URL())
	if err != nil || ua.User == nil || ua.Host != g.Addr().String() {
		t.Fatalf("route URL %q: %v", a.URL(), err)
	}
	secretA, _ := ua.User.Password()
	bare := "http://" + g.Addr().String()

	allowed := f.url("http", "allowed.test", f.plain, "/")
	// Before SetSource the route serves nothing.
	resp, err := gatewayClient(t, a.URL()).Get(allowed)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("a route not bound to its source yet: %d, want 407", resp.StatusCode)
	}
	gwEvents.mu.Lock()
	gwEvents.events = nil
	gwEvents.mu.Unlock()
	a.SetSource(netip.MustParseAddr("127.0.0.1"))
	refusedCases := []struct{ name, proxy, want string }{
		{"no credential", bare, "no Basic Proxy-Authorization"},
		{"wrong secret", "http://" + a.ID + ":" + strings.Repeat("0", len(secretA)) + "@" + g.Addr().String(), "not a live session's"},
		{"unknown id", "http://nobody:" + secretA + "@" + g.Addr().String(), "not a live session's"},
		{"another session's credential", b.URL(), "not from the session's address 10.244.0.99"},
	}
	for _, c := range refusedCases {
		resp, err := gatewayClient(t, c.proxy).Get(allowed)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusProxyAuthRequired || !strings.Contains(string(body), c.want) || resp.Header.Get("Proxy-Authenticate") == "" {
			t.Errorf("%s: %d %q (Proxy-Authenticate %q); want 407 with %q", c.name, resp.StatusCode, body, resp.Header.Get("Proxy-Authenticate"), c.want)
		}
		// CONNECT is checked the same way.
		_, err = gatewayClient(t, c.proxy).Get(f.url("https", "allowed.test", f.tlsSrv, "/"))
		if err == nil || !strings.Contains(err.Error(), "Proxy Authentication Required") {
			t.Errorf("%s over CONNECT: %v; want 407", c.name, err)
		}
	}
	evs := gwEvents.eventsSnapshot()
	if len(evs) != 2*len(refusedCases) {
		t.Fatalf("%d gateway refusal events, want %d: %+v", len(evs), 2*len(refusedCases), evs)
	}
	for _, ev := range evs {
		if ev.Type != EventRefused || !strings.HasPrefix(ev.Reason, AuthRefusal) || ev.Host != "allowed.test" || ev.Session != "" {
			t.Errorf("gateway event %+v", ev)
		}
	}
	if evs[1].Method != http.MethodConnect || evs[1].Port != port(t, f.tlsSrv.Listener.Addr().String()) {
		t.Errorf("CONNECT refusal event %+v", evs[1])
	}
	if got := f.w.eventsSnapshot(); len(got) != 0 {
		t.Errorf("a refused credential reached a session's proxy: %+v", got)
	}
	f.w.mu.Lock()
	dialed := append([]string(nil), f.w.dialed...)
	f.w.mu.Unlock()
	if len(dialed) != 0 {
		t.Errorf("a refused credential dialed %v", dialed)
	}

	// The right credential: the policy decides, and the credential does
	// not travel on.
	c := gatewayClient(t, a.URL())
	if code, body := get(t, c, allowed); code != 200 || body != "hello from "+strings.TrimPrefix(allowed[:len(allowed)-1], "http://") {
		t.Errorf("allowed: %d %q", code, body)
	}
	if code, body := get(t, c, f.url("https", "allowed.test", f.tlsSrv, "/")); code != 200 || !strings.HasPrefix(body, "hello from") {
		t.Errorf("allowed over CONNECT: %d %q", code, body)
	}
	if code, body := get(t, c, fmt.Sprintf("http://allowed.test:%d/", port(t, echo.Listener.Addr().String()))); code != 200 || body != `proxy-authorization=""` {
		t.Errorf("the upstream saw: %d %q", code, body)
	}
	if code, body := get(t, c, f.url("http", "forbidden.test", f.other, "/")); code != 403 || !strings.Contains(body, `sandbox "test" network {}`) {
		t.Errorf("forbidden with the right credential: %d %q", code, body)
	}
	c.CloseIdleConnections() // a tunnel reports when it ends
	for _, ev := range f.w.waitEvents(t, 4) {
		if ev.Session != "s-a" || ev.User != "alice" {
			t.Errorf("event of route a names %q %q: %+v", ev.Session, ev.User, ev)
		}
	}

	// A closed route's credential is refused.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err = gatewayClient(t, a.URL()).Get(allowed)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("a closed route: %d, want 407", resp.StatusCode)
	}
}
