package egress

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// The proxy's cost against the naive baseline, the same request sent
// straight to the server (each with a fresh upstream connection, as the
// proxy opens one per request). Run: go test -bench . -run '^$' ./egress

func benchServer(b *testing.B, size int, tlsOn bool) (*httptest.Server, string) {
	b.Helper()
	body := strings.Repeat("x", size)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body) }))
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	b.Cleanup(srv.Close)
	return srv, srv.Listener.Addr().String()
}

// benchOptions are the options of a proxy that lets allowed.test reach to.
func benchOptions(b *testing.B, to string) Options {
	b.Helper()
	w := &world{routes: map[string]string{}}
	w.routes[fmt.Sprintf("203.0.113.10:%d", netip.MustParseAddrPort(to).Port())] = to
	pol, err := ParsePolicy("bench", []string{"allowed.test"}, nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	return Options{Policy: pol, Lookup: resolver(map[string][]string{"allowed.test": {"203.0.113.10"}}), Dial: w.dial}
}

func benchProxy(b *testing.B, to string) *url.URL {
	b.Helper()
	p := New(benchOptions(b, to))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = p.Serve(l) }()
	b.Cleanup(func() { p.Close() })
	return &url.URL{Scheme: "http", Host: l.Addr().String()}
}

// benchGateway is a route's URL, credential included, on a Gateway among
// 99 other routes.
func benchGateway(b *testing.B, to string) *url.URL {
	b.Helper()
	g, err := ListenGateway("127.0.0.1:0", nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	var r *Route
	for range 100 {
		if r, err = g.Add(benchOptions(b, to)); err != nil {
			b.Fatal(err)
		}
		r.SetSource(netip.MustParseAddr("127.0.0.1"))
	}
	u, err := url.Parse(r.URL())
	if err != nil {
		b.Fatal(err)
	}
	return u
}

func benchGet(b *testing.B, c *http.Client, u string, size int) {
	b.Helper()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != int64(size) {
			b.Fatalf("read %d bytes, want %d", n, size)
		}
	}
}

// BenchmarkGet: a small plain-HTTP GET, direct, through the proxy and
// through a Gateway's route (the credential and source checks added).
func BenchmarkGet(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		srv, addr := benchServer(b, size, false)
		port := netip.MustParseAddrPort(addr).Port()
		b.Run(fmt.Sprintf("direct/%dKiB", size>>10), func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			benchGet(b, c, srv.URL+"/", size)
		})
		b.Run(fmt.Sprintf("proxy/%dKiB", size>>10), func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(benchProxy(b, addr))}}
			benchGet(b, c, fmt.Sprintf("http://allowed.test:%d/", port), size)
		})
		b.Run(fmt.Sprintf("gateway/%dKiB", size>>10), func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(benchGateway(b, addr))}}
			benchGet(b, c, fmt.Sprintf("http://allowed.test:%d/", port), size)
		})
	}
}

// BenchmarkTunnel: an HTTPS GET through a CONNECT tunnel (a new tunnel
// and TLS handshake per request) against the same request direct, and
// through a Gateway's route.
func BenchmarkTunnel(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		srv, addr := benchServer(b, size, true)
		port := netip.MustParseAddrPort(addr).Port()
		tc := &tls.Config{InsecureSkipVerify: true}
		b.Run(fmt.Sprintf("direct/%dKiB", size>>10), func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tc}}
			benchGet(b, c, srv.URL+"/", size)
		})
		b.Run(fmt.Sprintf("proxy/%dKiB", size>>10), func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tc, Proxy: http.ProxyURL(benchProxy(b, addr))}}
			benchGet(b, c, fmt.Sprintf("https://allowed.test:%d/", port), size)
		})
		b.Run(fmt.Sprintf("gateway/%dKiB", size>>10), func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tc, Proxy: http.ProxyURL(benchGateway(b, addr))}}
			benchGet(b, c, fmt.Sprintf("https://allowed.test:%d/", port), size)
		})
	}
}
