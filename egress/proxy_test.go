package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// world stands for the network: names resolve to documentation addresses
// (TEST-NET-3), which the dial maps to real local servers; any other dial
// is recorded and fails, so a test sees what the proxy tried to reach.
type world struct {
	mu     sync.Mutex
	routes map[string]string // "203.0.113.10:80" -> a local listener's address
	dialed []string
	events []Event
}

func (w *world) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	w.mu.Lock()
	w.dialed = append(w.dialed, addr)
	to, ok := w.routes[addr]
	w.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no route to %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (w *world) onEvent(ev Event) {
	w.mu.Lock()
	w.events = append(w.events, ev)
	w.mu.Unlock()
}

func (w *world) eventsSnapshot() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Event(nil), w.events...)
}

// waitEvents waits until n events arrived (a tunnel reports when it ends).
func (w *world) waitEvents(t *testing.T, n int) []Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs := w.eventsSnapshot()
		if len(evs) >= n || time.Now().After(deadline) {
			if len(evs) < n {
				t.Fatalf("got %d events, want %d: %+v", len(evs), n, evs)
			}
			return evs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// port returns the port of a listener address.
func port(t *testing.T, addr string) int {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return int(ap.Port())
}

type fixture struct {
	w        *world
	proxy    *Proxy
	proxyURL *url.URL
	plain    *httptest.Server // "allowed.test" over HTTP
	tlsSrv   *httptest.Server // "allowed.test" over TLS
	other    *httptest.Server // "forbidden.test"
}

func newFixture(t *testing.T, budget int64, maxConns int, opts ...func(*Options)) *fixture {
	t.Helper()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write([]byte(strings.Repeat("x", 64<<10)))
			return
		}
		fmt.Fprintf(w, "hello from %s", r.Host)
	})
	f := &fixture{w: &world{routes: map[string]string{}}}
	f.plain = httptest.NewServer(hello)
	f.tlsSrv = httptest.NewUnstartedServer(hello)
	f.tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	f.tlsSrv.StartTLS()
	f.other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "the forbidden server answered")
	}))
	t.Cleanup(f.plain.Close)
	t.Cleanup(f.tlsSrv.Close)
	t.Cleanup(f.other.Close)
	pp := port(t, f.plain.Listener.Addr().String())
	tp := port(t, f.tlsSrv.Listener.Addr().String())
	op := port(t, f.other.Listener.Addr().String())
	f.w.routes[fmt.Sprintf("203.0.113.10:%d", pp)] = f.plain.Listener.Addr().String()
	f.w.routes[fmt.Sprintf("203.0.113.10:%d", tp)] = f.tlsSrv.Listener.Addr().String()
	f.w.routes[fmt.Sprintf("203.0.113.20:%d", op)] = f.other.Listener.Addr().String()
	f.w.routes[fmt.Sprintf("127.0.0.1:%d", op)] = f.other.Listener.Addr().String()

	pol, err := ParsePolicy(`sandbox "test" network {}`, []string{"allowed.test", "rebind.test", "sni.test"}, nil, budget)
	if err != nil {
		t.Fatal(err)
	}
	pol.MaxConns = maxConns
	po := Options{
		Policy: pol,
		Lookup: resolver(map[string][]string{
			"allowed.test":   {"203.0.113.10"},
			"sni.test":       {"203.0.113.10"},
			"forbidden.test": {"203.0.113.20"},
			"rebind.test":    {"127.0.0.1"},
			"meta.test":      {"169.254.169.254"},
		}),
		Dial:    f.w.dial,
		OnEvent: f.w.onEvent,
	}
	for _, o := range opts {
		o(&po)
	}
	f.proxy = New(po)
	f.proxy.SetSession("s-1", "alice")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.proxy.Serve(l) }()
	t.Cleanup(func() {
		if err := f.proxy.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	f.proxyURL = &url.URL{Scheme: "http", Host: l.Addr().String()}
	return f
}

func (f *fixture) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(f.proxyURL),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the test server's certificate names example.com
	}, Timeout: 10 * time.Second}
}

func (f *fixture) url(scheme, host string, srv *httptest.Server, path string) string {
	return fmt.Sprintf("%s://%s:%d%s", scheme, host, srv.Listener.Addr().(*net.TCPAddr).Port, path)
}

// get fetches url with c and returns the status and body.
func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestProxyPlainHTTP(t *testing.T) {
	f := newFixture(t, 0, 0)
	c := f.client()
	if code, body := get(t, c, f.url("http", "allowed.test", f.plain, "/")); code != 200 || !strings.Contains(body, "hello from allowed.test") {
		t.Fatalf("allowed: %d %q", code, body)
	}

	for _, tc := range []struct{ url, why string }{
		{f.url("http", "forbidden.test", f.other, "/"), "is not in allow"},
		{f.url("http", "203.0.113.20", f.other, "/"), "no address or CIDR entry"},
		{"http://169.254.169.254/latest/meta-data/", "no address or CIDR entry"},
		{f.url("http", "rebind.test", f.other, "/"), "127.0.0.1, a loopback address"},
	} {
		code, body := get(t, c, tc.url)
		if code != http.StatusForbidden || !strings.Contains(body, `sandbox "test" network {}`) || !strings.Contains(body, tc.why) {
			t.Errorf("%s: %d %q; want 403 naming the policy and %q", tc.url, code, body, tc.why)
		}
	}
	evs := f.w.waitEvents(t, 5)
	if evs[0].Type != EventAllowed || evs[0].Host != "allowed.test" || evs[0].BytesReceived == 0 || evs[0].BytesSent == 0 || evs[0].Session != "s-1" || evs[0].User != "alice" {
		t.Errorf("allowed event: %+v", evs[0])
	}
	for _, ev := range evs[1:] {
		if ev.Type != EventRefused || ev.Reason == "" {
			t.Errorf("refused event: %+v", ev)
		}
	}
	// Nothing but the allowed server's checked address was dialed: not
	// the forbidden server, not 127.0.0.1 for the rebinding name.
	f.w.mu.Lock()
	dialed := append([]string(nil), f.w.dialed...)
	f.w.mu.Unlock()
	if len(dialed) != 1 || !strings.HasPrefix(dialed[0], "203.0.113.10:") {
		t.Errorf("dialed %v, want only the allowed server", dialed)
	}
}

func TestProxyConnectTLS(t *testing.T) {
	f := newFixture(t, 0, 0)
	c := f.client()
	if code, body := get(t, c, f.url("https", "allowed.test", f.tlsSrv, "/")); code != 200 || !strings.Contains(body, "hello from allowed.test") {
		t.Fatalf("allowed: %d %q", code, body)
	}
	c.CloseIdleConnections()

	for _, tc := range []struct{ url, why string }{
		{f.url("https", "forbidden.test", f.other, "/"), "is not in allow"},
		{f.url("https", "203.0.113.20", f.other, "/"), "no address or CIDR entry"},
		{"https://169.254.169.254/", "no address or CIDR entry"},
		{f.url("https", "rebind.test", f.other, "/"), "a loopback address"},
		{f.url("https", "meta.test", f.other, "/"), "not in allow"},
	} {
		_, err := c.Get(tc.url)
		// The client's error carries the proxy's reason phrase, which
		// names the policy and the reason.
		if err == nil || !strings.Contains(err.Error(), "Forbidden (") || !strings.Contains(err.Error(), `sandbox "test" network {}`) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v; want a 403 naming the policy and %q", tc.url, err, tc.why)
		}
	}
	// The allowed tunnel reports when it ends, which may be after the
	// refusals.
	evs := f.w.waitEvents(t, 6)
	allowed := 0
	for _, ev := range evs {
		if ev.Type != EventAllowed {
			continue
		}
		allowed++
		if ev.Method != "CONNECT" || ev.SNI != "allowed.test" || ev.BytesReceived == 0 || ev.BytesSent == 0 || !strings.HasPrefix(ev.Addr, "203.0.113.10") {
			t.Errorf("allowed tunnel event: %+v", ev)
		}
	}
	if allowed != 1 {
		t.Errorf("%d allowed events, want 1: %+v", allowed, evs)
	}
}

// connect opens a tunnel by hand and returns the connection after the
// proxy's answer, and the status line.
func connect(t *testing.T, proxy *url.URL, target string) (net.Conn, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	return c, strings.TrimSpace(line)
}

func TestProxyConnectChecksSNI(t *testing.T) {
	f := newFixture(t, 0, 0)
	target := f.url("", "sni.test", f.tlsSrv, "")[len("://"):]
	c, status := connect(t, f.proxyURL, target)
	defer c.Close()
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("CONNECT: %s", status)
	}
	// The tunnel was asked for sni.test but the TLS client names another
	// (allowed) host: a domain-fronting attempt.
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", InsecureSkipVerify: true})
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err == nil {
		t.Fatal("a handshake naming another host went through the tunnel")
	}
	evs := f.w.waitEvents(t, 1)
	if evs[0].Type != EventRefused || evs[0].SNI != "allowed.test" || !strings.Contains(evs[0].Reason, `TLS server name "allowed.test" is not the CONNECT host "sni.test"`) {
		t.Errorf("event: %+v", evs[0])
	}

	// Plain bytes through a tunnel to a name are refused too.
	c2, status := connect(t, f.proxyURL, target)
	defer c2.Close()
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("CONNECT: %s", status)
	}
	fmt.Fprint(c2, "GET / HTTP/1.1\r\nHost: sni.test\r\n\r\n")
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, _ := io.ReadAll(c2); len(b) != 0 {
		t.Errorf("a non-TLS tunnel answered %q", b)
	}
	evs = f.w.waitEvents(t, 2)
	if evs[1].Type != EventRefused || !strings.Contains(evs[1].Reason, "must carry TLS") {
		t.Errorf("event: %+v", evs[1])
	}
}

func TestProxyBudget(t *testing.T) {
	f := newFixture(t, 16<<10, 0)
	c := f.client()
	resp, err := c.Get(f.url("http", "allowed.test", f.plain, "/big"))
	if err == nil {
		n, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if rerr == nil && n == 64<<10 {
			t.Fatalf("read all %d bytes with a budget of 16 KiB", n)
		}
	}
	if used := f.proxy.Used(); used > 16<<10 {
		t.Errorf("used %d bytes, budget 16384", used)
	}
	if code, body := get(t, c, f.url("http", "allowed.test", f.plain, "/")); code != http.StatusForbidden || !strings.Contains(body, "budget_bytes 16384 is used up") {
		t.Errorf("after the budget: %d %q", code, body)
	}
	evs := f.w.waitEvents(t, 2)
	if evs[0].Reason != ErrBudget.Error() {
		t.Errorf("the cut connection's event: %+v", evs[0])
	}
}

func TestProxyConnectionCap(t *testing.T) {
	f := newFixture(t, 0, 1)
	target := f.url("", "allowed.test", f.tlsSrv, "")[len("://"):]
	held, status := connect(t, f.proxyURL, target)
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("first CONNECT: %s", status)
	}
	c2, status := connect(t, f.proxyURL, target)
	c2.Close()
	if !strings.HasPrefix(status, "HTTP/1.1 403") || !strings.Contains(status, "1 connections open, the most it may") {
		t.Errorf("second CONNECT: %s", status)
	}
	held.Close()
	// The slot comes back when the tunnel ends.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c3, status := connect(t, f.proxyURL, target)
		c3.Close()
		if strings.HasPrefix(status, "HTTP/1.1 200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot did not come back: %s", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProxyCloseCutsTunnels(t *testing.T) {
	f := newFixture(t, 0, 0)
	target := f.url("", "allowed.test", f.tlsSrv, "")[len("://"):]
	c, status := connect(t, f.proxyURL, target)
	defer c.Close()
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("CONNECT: %s", status)
	}
	closed := make(chan error, 1)
	go func() { closed <- f.proxy.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited on an open tunnel")
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("the tunnel is still open after Close: %v", err)
	}
}

// TestProxyPlainHTTPHostHeader: a request for an allowed URL whose Host
// header names another site (fronting through a shared address) reaches
// the allowed address with the URL's host: the header is not what is
// checked, nor what is sent.
func TestProxyPlainHTTPHostHeader(t *testing.T) {
	f := newFixture(t, 0, 0)
	c, err := net.Dial("tcp", f.proxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	u := f.url("http", "allowed.test", f.plain, "/")
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: forbidden.test\r\nConnection: close\r\n\r\n", u)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "hello from allowed.test:") {
		t.Errorf("%d %q; want the allowed server, asked for allowed.test", resp.StatusCode, body)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestProxyTunnelBudget: a tunnel that reaches the budget is cut both
// ways at once, though the client keeps its side open, and the slot and
// the event come back.
func TestProxyTunnelBudget(t *testing.T) {
	f := newFixture(t, 32<<10, 1)
	target := f.url("", "allowed.test", f.tlsSrv, "")[len("://"):]
	c, status := connect(t, f.proxyURL, target)
	defer c.Close()
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("CONNECT: %s", status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", InsecureSkipVerify: true})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(tc, "GET /big HTTP/1.1\r\nHost: allowed.test\r\n\r\n") // 64 KiB answer, the connection kept open
	n, err := io.Copy(io.Discard, tc)
	if err == nil && n >= 64<<10 {
		t.Fatalf("read %d bytes through a 32 KiB budget", n)
	}
	evs := f.w.waitEvents(t, 1)
	if evs[0].Type != EventAllowed || evs[0].Reason != ErrBudget.Error() || evs[0].BytesSent+evs[0].BytesReceived > 32<<10 {
		t.Errorf("event: %+v", evs[0])
	}
}

// TestProxyTunnelIdle: a tunnel that carries nothing for IdleTimeout ends,
// and its slot comes back.
func TestProxyTunnelIdle(t *testing.T) {
	f := newFixture(t, 0, 1, func(o *Options) { o.IdleTimeout = 200 * time.Millisecond })
	target := f.url("", "allowed.test", f.tlsSrv, "")[len("://"):]
	c, status := connect(t, f.proxyURL, target)
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", InsecureSkipVerify: true})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if !strings.HasPrefix(status, "HTTP/1.1 200") || tc.Handshake() != nil {
		t.Fatalf("CONNECT: %s", status)
	}
	// Then nothing: the proxy ends the tunnel.
	if _, err := tc.Read(make([]byte, 1)); err == nil {
		t.Fatal("read a byte from an idle tunnel")
	}
	evs := f.w.waitEvents(t, 1)
	if !strings.Contains(evs[0].Reason, "idle for 200ms") {
		t.Errorf("event: %+v", evs[0])
	}
	c2, status := connect(t, f.proxyURL, target)
	c2.Close()
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Errorf("the slot did not come back: %s", status)
	}
}

// TestProxyIgnoresItsEnvironment: a proxy environment of the plugin
// (HTTP_PROXY, HTTPS_PROXY: goproxy's defaults read them) is not a route:
// the proxy dials the checked address itself.
func TestProxyIgnoresItsEnvironment(t *testing.T) {
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		t.Setenv(k, "http://127.0.0.1:9") // the discard port: nothing listens
	}
	f := newFixture(t, 0, 0)
	c := f.client()
	if code, body := get(t, c, f.url("http", "allowed.test", f.plain, "/")); code != 200 || !strings.Contains(body, "hello from allowed.test") {
		t.Errorf("plain: %d %q", code, body)
	}
	if code, body := get(t, c, f.url("https", "allowed.test", f.tlsSrv, "/")); code != 200 || !strings.Contains(body, "hello from allowed.test") {
		t.Errorf("tunnel: %d %q", code, body)
	}
}
