//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/internal/httpauth"
)

// slowPolicy lets run_python return a result larger than every socket
// buffer on the way (a stalled reader must be cut off, not absorbed).
const slowPolicy = `
policy "default" {
  allowed_imports  = ["time"]
  timeout          = "10s"
  max_output_bytes = 33554432
}
sandbox "tier1" {
  plugin = "subprocess"
}
`

// startMCPHTTP serves `mcp serve --http`'s handler for policy with lim, as
// cmdMCPServe does (limitPerAddr, newMCPHTTPServer), on 127.0.0.1, with
// metrics at /metrics; it returns host:port. The server is closed when the
// test ends.
func startMCPHTTP(t *testing.T, policy string, lim mcpHTTPLimits, metrics http.Handler) string {
	t.Helper()
	needPlugin(t)
	cfg, diags := host.ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(policy))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ctx := context.Background()
	h, err := host.Load(ctx, cfg, host.WithPluginDirs(binDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sb, err := h.Sandbox(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	clients, err := newMCPClients(ctx, sb, h.Bus())
	if err != nil {
		t.Fatal(err)
	}
	clients.limits = lim
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := newMCPHTTPServer(clients.httpHandler(httpauth.NewVerifier(map[string]string{httpTestToken: "alice"}, nil), metrics), lim)
	go hs.Serve(limitPerAddr(ln, lim.perAddr))
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// healthy asserts that /healthz answers 200 within five seconds (the
// machine may be busy) on a new connection from local (nil: any).
func healthy(t *testing.T, addr string, local net.Addr, when string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{LocalAddr: local}).DialContext,
	}}
	start := time.Now()
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Errorf("/healthz %s: %v after %v", when, err, time.Since(start).Round(time.Millisecond))
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz %s: %s", when, resp.Status)
	}
}

// stalled is a raw connection that stopped sending or reading, and what
// became of it: the bytes the server sent, how the connection ended, when.
type stalled struct {
	kind   string
	opened time.Time
	conn   net.Conn

	got   []byte // the first 4 KB
	n     int    // bytes in all
	err   error  // nil: the server closed the connection (EOF)
	ended time.Time
}

// dialRaw connects to addr; with rcvbuf > 0 the socket's receive buffer is
// that small, so a client that does not read holds little of a response.
func dialRaw(t *testing.T, addr string, rcvbuf int) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			})
			return errors.Join(err, serr)
		}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// await reads s's connection until the server ends it or until limit has
// passed.
func (s *stalled) await(limit time.Duration) {
	s.conn.SetReadDeadline(time.Now().Add(limit))
	var buf [64 << 10]byte
	for {
		n, err := s.conn.Read(buf[:])
		s.n += n
		if len(s.got) < 4096 {
			s.got = append(s.got, buf[:min(n, 4096-len(s.got))]...)
		}
		if err != nil {
			s.ended = time.Now()
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			return
		}
	}
}

// awaitPending waits until c has bytes to read, without reading them.
func awaitPending(c net.Conn, limit time.Duration) error {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var n int
		var ierr error
		if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || ierr != nil {
			return errors.Join(err, ierr)
		}
		if n > 0 {
			return nil
		}
	}
	return fmt.Errorf("no response within %v", limit)
}

// Clients that stop sending their body, their headers, or stop reading
// the response, authenticated or not, are cut off within the timeouts, and
// /healthz answers all along; a long execution's stream that idles longer
// than every timeout still delivers its output and result, and the
// session's standalone stream its notifications.
func TestMCPHTTPSlowClients(t *testing.T) {
	lim := mcpHTTPLimits{header: time.Second, body: time.Second, write: time.Second, idle: 2 * time.Second}
	// /metrics, a non-streaming route, sends 64 MB: a reader that stalls
	// on it must be cut off by the server's WriteTimeout.
	metricsDone := make(chan error, 1)
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		var err error
		for i := 0; i < 64 && err == nil; i++ {
			_, err = w.Write(chunk)
		}
		metricsDone <- err
	})
	addr := startMCPHTTP(t, slowPolicy, lim, big)
	url := "http://" + addr + "/mcp"
	healthy(t, addr, nil, "at start")

	// Two sessions for the stalled readers of a run_python stream.
	var sessions []string
	for range 2 {
		resp, _ := mcpPost(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		sid := resp.Header.Get(mcpSessionHeader)
		if sid == "" {
			t.Fatalf("initialize: %s", resp.Status)
		}
		mcpPost(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		sessions = append(sessions, sid)
	}

	post := func(auth, extra string, contentLength int, body string) string {
		if auth != "" {
			auth = "Authorization: Bearer " + auth + "\r\n"
		}
		return fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\n%s%sContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
			addr, auth, extra, contentLength, body)
	}
	// Those that stop sending are watched from the start. The readers
	// read nothing until the response has begun to arrive and lim.write
	// (and some) has passed, then read what the server left them: its
	// writes stalled on full buffers and gave up.
	var all []*stalled
	var wg sync.WaitGroup
	open := func(kind string, rcvbuf int, send string) {
		s := &stalled{kind: kind, conn: dialRaw(t, addr, rcvbuf), opened: time.Now()}
		if _, err := io.WriteString(s.conn, send); err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rcvbuf > 0 {
				if err := awaitPending(s.conn, 30*time.Second); err != nil {
					s.err = err
					return
				}
				time.Sleep(lim.write + 2*time.Second)
			}
			s.await(30 * time.Second)
		}()
	}
	for range 20 {
		open("unauthenticated body", 0, post("", "", 1000, `{"jsonrpc":`))
	}
	for range 15 {
		open("authenticated body", 0, post(httpTestToken, "", 1000, `{"jsonrpc":`))
	}
	for range 10 {
		open("headers", 0, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\n")
	}
	for _, sid := range sessions {
		call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"return 'x' * 12000000"}}}`
		open("stream reader", 4096, post(httpTestToken, mcpSessionHeader+": "+sid+"\r\n", len(call), call))
	}
	open("metrics reader", 4096, "GET /metrics HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+httpTestToken+"\r\n\r\n")
	healthy(t, addr, nil, fmt.Sprintf("with %d stalled connections", len(all)))

	time.Sleep(lim.write + 500*time.Millisecond)
	healthy(t, addr, nil, "while readers stall")
	wg.Wait()
	for _, s := range all {
		took := s.ended.Sub(s.opened).Round(10 * time.Millisecond)
		if s.err != nil && !errors.Is(s.err, syscall.ECONNRESET) {
			t.Errorf("%s: the server kept the connection: %v after %v (got %.80q)", s.kind, s.err, took, s.got)
			continue
		}
		status, _, _ := strings.Cut(string(s.got), "\r\n")
		switch s.kind {
		case "unauthenticated body":
			if status != "HTTP/1.1 401 Unauthorized" || took > 2*time.Second {
				t.Errorf("%s: %q after %v, want a 401 and the connection closed at once", s.kind, status, took)
			}
		case "authenticated body":
			if status != "HTTP/1.1 408 Request Timeout" || took < lim.body || took > lim.body+3*time.Second {
				t.Errorf("%s: %q after %v, want a 408 and the connection closed after %v", s.kind, status, took, lim.body)
			}
		case "headers":
			if len(s.got) != 0 || took < lim.header || took > lim.header+3*time.Second {
				t.Errorf("%s: %q after %v, want the connection closed after %v", s.kind, s.got, took, lim.header)
			}
		default: // readers: the response was cut off, not delivered whole
			if status != "HTTP/1.1 200 OK" || s.n >= 12000000 {
				t.Errorf("%s: %q, %d bytes: want the response cut off", s.kind, status, s.n)
			}
			t.Logf("%s: the server cut the response off after %d bytes", s.kind, s.n)
		}
	}
	select {
	case err := <-metricsDone:
		if err == nil {
			t.Error("/metrics wrote 64 MB to a client that reads nothing")
		}
	case <-time.After(5 * time.Second):
		t.Error("/metrics' writes to a stalled reader did not fail")
	}
	healthy(t, addr, nil, "after the stalled connections")

	// A stream that idles longer than every timeout: output, then a sleep
	// of 2.5 s, then the result; the standalone stream then still carries
	// list_changed.
	listChanged := make(chan struct{}, 4)
	var progress sync.Map
	client := mcp.NewClient(&mcp.Implementation{Name: "slow-agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress.Store(r.Params.Message, true)
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearer{httpTestToken, http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "import time\nprint('before', flush=True)\ntime.sleep(2.5)\nreturn 42", "allowed_imports": []string{"time"}}}
	params.SetProgressToken("p")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError || text(res) != "42" {
		t.Fatalf("run_python over a stream idle for 2.5 s: %v %+v", err, res)
	}
	if _, ok := progress.Load("before\n"); !ok {
		t.Error("the output before the sleep did not stream")
	}
	if r := call(t, cs, "spawn_tool", map[string]any{"name": "late", "implementation": "return 1"}); r.IsError {
		t.Fatal(text(r))
	}
	select {
	case <-listChanged:
	case <-time.After(5 * time.Second):
		t.Error("no list_changed on the standalone stream after it idled")
	}
}

// A client address holds at most lim.perAddr connections: one more is
// closed as it arrives, another address is served meanwhile, and a place
// freed is taken again.
func TestMCPHTTPConnsPerAddr(t *testing.T) {
	lim := defaultMCPHTTPLimits
	lim.perAddr = 5
	addr := startMCPHTTP(t, mcpPolicy, lim, http.NotFoundHandler())
	var held []net.Conn
	for range lim.perAddr {
		c := dialRaw(t, addr, 0)
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // headers never finished
		held = append(held, c)
	}
	// The server accepts in order: once the last held connection is
	// counted, the next one from this address is over the limit.
	time.Sleep(200 * time.Millisecond)
	extra := dialRaw(t, addr, 0)
	extra.SetReadDeadline(time.Now().Add(3 * time.Second))
	start := time.Now()
	if n, err := extra.Read(make([]byte, 1)); n != 0 || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("connection %d from one address: read %d bytes, %v after %v; want it closed at once", lim.perAddr+1, n, err, time.Since(start))
	}
	// 127.0.0.2 is another client (all of 127.0.0.0/8 is loopback).
	healthy(t, addr, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, "from another address")
	held[0].Close()
	held[1].Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz after two places were freed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Over HTTP/2 (TLS), where http.Server.WriteTimeout resets a stream when it
// expires whether or not a write is pending, a tools/call stream silent for
// longer than the write timeout still returns, and the standalone stream
// still carries list_changed.
func TestMCPHTTP2LongStream(t *testing.T) {
	needPlugin(t)
	lim := mcpHTTPLimits{header: time.Second, body: time.Second, write: time.Second, idle: 2 * time.Second}
	cfg, diags := host.ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(mcpPolicy))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ctx := context.Background()
	h, err := host.Load(ctx, cfg, host.WithPluginDirs(binDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sb, err := h.Sandbox(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	clients, err := newMCPClients(ctx, sb, h.Bus())
	if err != nil {
		t.Fatal(err)
	}
	clients.limits = lim
	handler := clients.httpHandler(httpauth.NewVerifier(map[string]string{httpTestToken: "alice"}, nil), http.NotFoundHandler())
	ts := httptest.NewUnstartedServer(handler)
	ts.Config = newMCPHTTPServer(handler, lim)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)

	base := ts.Client().Transport.(*http.Transport)
	var proto sync.Map
	listChanged := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "h2-agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+httpTestToken)
			resp, err := base.RoundTrip(r)
			if err == nil {
				proto.Store(resp.Proto, true)
			}
			return resp, err
		})},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r := call(t, cs, "run_python", map[string]any{"code": "import time\ntime.sleep(2.5)\nreturn 42", "allowed_imports": []string{"time"}})
	if r.IsError || text(r) != "42" {
		t.Fatalf("run_python over an HTTP/2 stream silent for 2.5 s: %q", text(r))
	}
	if _, ok := proto.Load("HTTP/2.0"); !ok {
		t.Error("the client did not speak HTTP/2")
	}
	if r := call(t, cs, "spawn_tool", map[string]any{"name": "late", "implementation": "return 1"}); r.IsError {
		t.Fatal(text(r))
	}
	select {
	case <-listChanged:
	case <-time.After(5 * time.Second):
		t.Error("no list_changed on the HTTP/2 standalone stream after it idled")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
