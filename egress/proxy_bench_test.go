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

func benchProxy(b *testing.B, to string) *url.URL {
	b.Helper()
	w := &world{routes: map[string]string{}}
	w.routes[fmt.Sprintf("203.0.113.10:%d", netip.MustParseAddrPort(to).Port())] = to
	pol, err := ParsePolicy("bench", []string{"allowed.test"}, nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	p := New(Options{Policy: pol, Lookup: resolver(map[string][]string{"allowed.test": {"203.0.113.10"}}), Dial: w.dial})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = p.Serve(l) }()
	b.Cleanup(func() { p.Close() })
	return &url.URL{Scheme: "http", Host: l.Addr().String()}
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

// BenchmarkGet: a small plain-HTTP GET, direct and through the proxy.
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
	}
}

// BenchmarkTunnel: an HTTPS GET through a CONNECT tunnel (a new tunnel
// and TLS handshake per request) against the same request direct.
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
	}
}
