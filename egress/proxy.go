package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"
)

// Event types of Event.Type.
const (
	// EventAllowed is a connection the policy allowed, reported when it
	// ends, with the bytes it carried.
	EventAllowed = "egress.allowed"
	// EventRefused is a connection the policy refused.
	EventRefused = "egress.refused"
)

// Event is one connection through the proxy, for the audit log and metrics.
type Event struct {
	Type    string    `json:"-"`
	Time    time.Time `json:"time"`
	Session string    `json:"session,omitempty"`
	User    string    `json:"user,omitempty"`
	// Method is "CONNECT" for a tunnel, else the HTTP method.
	Method string `json:"method"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// Addr is the address the proxy dialed ("" when it dialed none).
	Addr string `json:"addr,omitempty"`
	// SNI is the TLS server name of a tunnel's ClientHello.
	SNI string `json:"sni,omitempty"`
	// Reason says why a connection was refused or ended early.
	Reason string `json:"reason,omitempty"`
	// BytesSent and BytesReceived are what went to and came from the
	// destination.
	BytesSent     int64 `json:"bytes_sent"`
	BytesReceived int64 `json:"bytes_received"`
}

// DefaultHandshakeTimeout bounds the wait for a tunnel's TLS ClientHello.
const DefaultHandshakeTimeout = 10 * time.Second

// Options configure a Proxy.
type Options struct {
	// Policy is what the proxy lets through.
	Policy Policy
	// Lookup resolves names (default: net.DefaultResolver).
	Lookup LookupFunc
	// Dial opens a connection to a checked address (default: a
	// net.Dialer with a 10 s timeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnEvent receives every connection's event (nil: none). It is called
	// from the proxy's goroutines and must not block for long.
	OnEvent func(Event)
	// HandshakeTimeout bounds the wait for a tunnel's ClientHello
	// (default DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// IdleTimeout ends a tunnel that carried nothing either way for this
	// long, so an idle one does not hold a connection slot forever
	// (default DefaultIdleTimeout).
	IdleTimeout time.Duration
}

// DefaultIdleTimeout is how long a tunnel may carry nothing.
const DefaultIdleTimeout = 5 * time.Minute

// Proxy is one session's egress proxy. It is an http.Handler; Serve runs
// it on a listener. It is safe for concurrent use.
type Proxy struct {
	opts  Options
	gp    *goproxy.ProxyHttpServer
	slots chan struct{}
	used  atomic.Int64

	mu      sync.Mutex
	session string
	user    string
	srv     *http.Server
	open    map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// ErrBudget is the error of a connection cut at the policy's budget_bytes.
var ErrBudget = errors.New("the session's egress budget_bytes is used up")

// New returns a proxy enforcing opts.Policy.
func New(opts Options) *Proxy {
	if opts.Lookup == nil {
		opts.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		opts.Dial = d.DialContext
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	n := opts.Policy.MaxConns
	if n <= 0 {
		n = DefaultMaxConns
	}
	p := &Proxy{opts: opts, slots: make(chan struct{}, n), open: map[net.Conn]struct{}{}}
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = log.New(io.Discard, "", 0)
	gp.ConnectDial, gp.ConnectDialWithReq = nil, nil
	gp.Tr = &http.Transport{
		Proxy:                 nil, // never another proxy from the environment
		DialContext:           p.dialFlow,
		DisableKeepAlives:     true, // one upstream connection per request: one event with its bytes
		ResponseHeaderTimeout: time.Minute,
	}
	gp.OnRequest().HandleConnectFunc(p.handleConnect)
	gp.OnRequest().DoFunc(p.handleRequest)
	gp.OnResponse().DoFunc(p.handleResponse)
	p.gp = gp
	return p
}

// SetSession names the session and user the proxy's events carry.
func (p *Proxy) SetSession(session, user string) {
	p.mu.Lock()
	p.session, p.user = session, user
	p.mu.Unlock()
}

// Used is how many bytes the session's connections carried so far.
func (p *Proxy) Used() int64 { return p.used.Load() }

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.gp.ServeHTTP(w, r) }

// Serve answers proxy requests on l until Close; it returns nil after
// Close.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return nil
	}
	if p.srv == nil {
		p.srv = newServer(p)
	}
	srv := p.srv
	p.mu.Unlock()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("egress proxy: %w", err)
	}
	return nil
}

// newServer is the HTTP server of a proxy's listener.
func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
}

// Close stops serving, cuts every open tunnel and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	srv := p.srv
	for c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	p.wg.Wait()
	return err
}

// track registers a connection's conns to be cut by Close, which waits
// for untrack; false when the proxy is closed.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	for _, c := range cs {
		p.open[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.open, c)
	}
	p.mu.Unlock()
	p.wg.Done()
}

func (p *Proxy) emit(ev Event) {
	if p.opts.OnEvent == nil {
		return
	}
	p.mu.Lock()
	ev.Session, ev.User = p.session, p.user
	p.mu.Unlock()
	ev.Time = time.Now().UTC()
	p.opts.OnEvent(ev)
}

// admit decides a destination and takes a connection slot. The returned
// release gives the slot back.
func (p *Proxy) admit(ctx context.Context, method, host string, port int) ([]netip.Addr, func(), error) {
	refuse := func(reason string) error {
		return &Refusal{Policy: p.opts.Policy.Name, Host: host, Port: port, Reason: reason}
	}
	if b := p.opts.Policy.BudgetBytes; b > 0 && p.used.Load() >= b {
		return nil, nil, refuse(fmt.Sprintf("budget_bytes %d is used up", b))
	}
	addrs, err := p.opts.Policy.Decide(ctx, host, port, p.opts.Lookup)
	if err != nil {
		return nil, nil, err
	}
	select {
	case p.slots <- struct{}{}:
	default:
		return nil, nil, refuse(fmt.Sprintf("the session has %d connections open, the most it may", cap(p.slots)))
	}
	var once sync.Once
	return addrs, func() { once.Do(func() { <-p.slots }) }, nil
}

// refusalEvent reports a refused (or failed) connection.
func (p *Proxy) refusalEvent(method, host string, port int, err error) {
	p.emit(Event{Type: EventRefused, Method: method, Host: host, Port: port, Reason: err.Error()})
}

// statusLine is a 403 (refusal) or 502 (failure) status line whose reason
// phrase names the policy, so an HTTP client's error shows it (Python's
// "Tunnel connection failed: 403 ...").
func statusOf(err error) (int, string) {
	code := http.StatusBadGateway
	if errors.Is(err, ErrRefused) {
		code = http.StatusForbidden
	}
	var b strings.Builder
	b.WriteString(http.StatusText(code))
	b.WriteString(" (")
	for _, c := range err.Error() {
		if c >= 0x20 && c < 0x7f {
			b.WriteRune(c)
		}
	}
	b.WriteString(")")
	return code, b.String()
}

func writeRefusal(w io.Writer, err error) {
	code, reason := statusOf(err)
	body := "orqest egress: " + err.Error() + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, reason, len(body), body)
}

func splitHostPort(hostport string, defPort int) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if defPort == 0 {
			return "", 0, err
		}
		return strings.Trim(hostport, "[]"), defPort, nil
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", ps, err)
	}
	return host, port, nil
}

// handleConnect decides a CONNECT and hands its connection to tunnel, or
// to a refusal.
func (p *Proxy) handleConnect(hostport string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	host, port, err := splitHostPort(hostport, 0)
	if err != nil {
		err = &Refusal{Policy: p.opts.Policy.Name, Host: hostport, Reason: "CONNECT needs host:port"}
	}
	var addrs []netip.Addr
	var release func()
	if err == nil {
		addrs, release, err = p.admit(ctx.Req.Context(), http.MethodConnect, host, port)
	}
	if err != nil {
		p.refusalEvent(http.MethodConnect, host, port, err)
		return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
			defer c.Close()
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			writeRefusal(c, err)
		}}, hostport
	}
	return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(r *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
		defer release()
		p.tunnel(r.Context(), c, host, port, addrs)
	}}, hostport
}

// dialChecked dials the checked addresses in order.
func (p *Proxy) dialChecked(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, netip.Addr, error) {
	var errs []error
	for _, a := range addrs {
		c, err := p.opts.Dial(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, a, nil
		}
		errs = append(errs, err)
	}
	return nil, netip.Addr{}, fmt.Errorf("dialing %v port %d: %w", addrs, port, errors.Join(errs...))
}

// tunnel carries a CONNECT: it dials the checked address, answers 200,
// checks the ClientHello's server name against a named host, and copies
// both ways within the budget.
func (p *Proxy) tunnel(ctx context.Context, client net.Conn, host string, port int, addrs []netip.Addr) {
	defer client.Close()
	up, addr, err := p.dialChecked(ctx, addrs, port)
	if err != nil {
		err = fmt.Errorf("egress to %s: %w", joinHostPort(host, port), err)
		p.refusalEvent(http.MethodConnect, host, port, err)
		writeRefusal(client, err)
		return
	}
	defer up.Close()
	if !p.track(client, up) {
		return
	}
	defer p.untrack(client, up)
	ev := Event{Type: EventAllowed, Method: http.MethodConnect, Host: host, Port: port, Addr: addr.String()}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	var first []byte
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err != nil {
		// A named host: the tunnel must carry TLS for that name.
		sni, hello, err := readClientHello(client, p.opts.HandshakeTimeout)
		ev.SNI = sni
		want := strings.TrimSuffix(strings.ToLower(host), ".")
		switch {
		case err != nil:
			ev.Type, ev.Reason = EventRefused, (&Refusal{Policy: p.opts.Policy.Name, Host: host, Port: port, Reason: "a tunnel to a host name must carry TLS naming it: " + err.Error()}).Error()
		case strings.TrimSuffix(strings.ToLower(sni), ".") != want:
			ev.Type, ev.Reason = EventRefused, (&Refusal{Policy: p.opts.Policy.Name, Host: host, Port: port, Reason: fmt.Sprintf("the TLS server name %q is not the CONNECT host %q", sni, host)}).Error()
		}
		if ev.Type == EventRefused {
			p.emit(ev)
			return
		}
		first = hello
	}
	f := &flow{p: p, idle: p.opts.IdleTimeout, conns: []net.Conn{client, up}}
	var sent, received atomic.Int64
	defer func() {
		ev.BytesSent, ev.BytesReceived = sent.Load(), received.Load()
		p.emit(ev)
	}()
	if len(first) > 0 {
		if _, err := f.write(up, first, &sent); err != nil {
			ev.Reason = err.Error()
			return
		}
	}
	var wg sync.WaitGroup
	var upErr, downErr error
	wg.Add(2)
	// One direction at its end half-closes the other side; the budget
	// used up cuts both at once.
	cut := func(err error, half net.Conn) {
		if errors.Is(err, ErrBudget) || errors.Is(err, os.ErrDeadlineExceeded) {
			client.Close()
			up.Close()
			return
		}
		closeWrite(half)
	}
	go func() {
		defer wg.Done()
		upErr = f.copy(up, client, &sent)
		cut(upErr, up)
	}()
	go func() {
		defer wg.Done()
		downErr = f.copy(client, up, &received)
		cut(downErr, client)
	}()
	wg.Wait()
	switch {
	case errors.Is(upErr, ErrBudget) || errors.Is(downErr, ErrBudget):
		ev.Reason = ErrBudget.Error()
	case errors.Is(upErr, os.ErrDeadlineExceeded) || errors.Is(downErr, os.ErrDeadlineExceeded):
		ev.Reason = fmt.Sprintf("idle for %s", p.opts.IdleTimeout)
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// errHelloRead stops the TLS server once the ClientHello is parsed.
var errHelloRead = errors.New("client hello read")

// readClientHello reads a TLS ClientHello from c (within timeout) and
// returns its server name and the bytes read, to be sent on unchanged.
func readClientHello(c net.Conn, timeout time.Duration) (string, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	var buf bytes.Buffer
	var sni string
	got := false
	err := tls.Server(readOnlyConn{r: io.TeeReader(c, &buf)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, got = h.ServerName, true
			return nil, errHelloRead
		},
	}).Handshake()
	if !got {
		return "", nil, fmt.Errorf("no TLS ClientHello: %w", err)
	}
	if sni == "" {
		return "", nil, errors.New("the ClientHello names no server (SNI)")
	}
	return sni, buf.Bytes(), nil
}

// readOnlyConn lets crypto/tls parse a ClientHello without answering it.
type readOnlyConn struct{ r io.Reader }

func (c readOnlyConn) Read(b []byte) (int, error)     { return c.r.Read(b) }
func (readOnlyConn) Write(b []byte) (int, error)      { return 0, io.ErrClosedPipe }
func (readOnlyConn) Close() error                     { return nil }
func (readOnlyConn) LocalAddr() net.Addr              { return nil }
func (readOnlyConn) RemoteAddr() net.Addr             { return nil }
func (readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (readOnlyConn) SetWriteDeadline(time.Time) error { return nil }

// flow charges a connection's bytes to the proxy's budget. A tunnel's
// flow (idle > 0) also keeps its conns' deadlines idle ahead while bytes
// move, either way.
type flow struct {
	p     *Proxy
	idle  time.Duration
	conns []net.Conn
}

// touch moves the tunnel's idle deadline on.
func (f *flow) touch() {
	if f.idle <= 0 {
		return
	}
	d := time.Now().Add(f.idle)
	for _, c := range f.conns {
		_ = c.SetDeadline(d)
	}
}

// take reserves up to n bytes of the budget and returns how many.
func (f *flow) take(n int) int {
	b := f.p.opts.Policy.BudgetBytes
	if b <= 0 {
		f.p.used.Add(int64(n))
		return n
	}
	for {
		u := f.p.used.Load()
		left := b - u
		if left <= 0 {
			return 0
		}
		k := int64(n)
		if k > left {
			k = left
		}
		if f.p.used.CompareAndSwap(u, u+k) {
			return int(k)
		}
	}
}

// write writes b to w within the budget, adding what it wrote to count.
// The bytes are counted before they are written, so whoever sees the
// peer's answer sees them counted.
func (f *flow) write(w io.Writer, b []byte, count *atomic.Int64) (int, error) {
	k := f.take(len(b))
	count.Add(int64(k))
	n, err := w.Write(b[:k])
	if n < k { // give back what was reserved and not written
		count.Add(int64(n - k))
		f.p.used.Add(int64(n - k))
	}
	if err == nil && k < len(b) {
		err = ErrBudget
	}
	return n, err
}

// copy copies src to dst within the budget.
func (f *flow) copy(dst io.Writer, src io.Reader, count *atomic.Int64) error {
	buf := make([]byte, 32<<10)
	f.touch()
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			f.touch()
			if _, err := f.write(dst, buf[:n], count); err != nil {
				return err
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return nil
			}
			return rerr
		}
	}
}

// httpFlow is a plain HTTP request's admission, carried to the dial in
// the request's context.
type httpFlow struct {
	host    string
	port    int
	addrs   []netip.Addr
	release func()

	mu   sync.Mutex
	conn *countedConn
	addr netip.Addr
}

type flowKey struct{}

// handleRequest decides a plain HTTP request.
func (p *Proxy) handleRequest(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	host, port := r.URL.Hostname(), 80
	var err error
	if r.URL.Scheme != "http" {
		err = &Refusal{Policy: p.opts.Policy.Name, Host: r.URL.Host, Reason: fmt.Sprintf("scheme %q through the proxy: use https over CONNECT", r.URL.Scheme)}
	} else if ps := r.URL.Port(); ps != "" {
		port, err = strconv.Atoi(ps)
		if err != nil {
			err = &Refusal{Policy: p.opts.Policy.Name, Host: r.URL.Host, Reason: "a bad port"}
		}
	}
	var f *httpFlow
	if err == nil {
		f = &httpFlow{host: host, port: port}
		f.addrs, f.release, err = p.admit(r.Context(), r.Method, host, port)
	}
	if err != nil {
		p.refusalEvent(r.Method, host, port, err)
		code, _ := statusOf(err)
		resp := goproxy.NewResponse(r, goproxy.ContentTypeText, code, "orqest egress: "+err.Error()+"\n")
		resp.Header.Set("X-Orqest-Egress", "refused")
		return r, resp
	}
	ctx.UserData = f
	return r.WithContext(context.WithValue(r.Context(), flowKey{}, f)), nil
}

// handleResponse reports an admitted request when its response body is
// closed (or at once when there is no response).
func (p *Proxy) handleResponse(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
	f, ok := ctx.UserData.(*httpFlow)
	if !ok {
		return resp
	}
	ctx.UserData = nil
	done := func(reason string) {
		f.release()
		ev := Event{Type: EventAllowed, Method: ctx.Req.Method, Host: f.host, Port: f.port, Reason: reason}
		f.mu.Lock()
		if f.conn != nil {
			ev.Addr = f.addr.String()
			ev.BytesSent, ev.BytesReceived = f.conn.sent.Load(), f.conn.recv.Load()
			if f.conn.budgetHit.Load() {
				ev.Reason = ErrBudget.Error()
			}
		}
		f.mu.Unlock()
		p.emit(ev)
	}
	if resp == nil {
		reason := "no response"
		if ctx.Error != nil {
			reason = ctx.Error.Error()
		}
		done(reason)
		return resp
	}
	resp.Body = &reportingBody{ReadCloser: resp.Body, done: func() { done("") }}
	return resp
}

type reportingBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *reportingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// dialFlow is the transport's dial: it dials only the addresses the
// request's admission checked.
func (p *Proxy) dialFlow(ctx context.Context, network, _ string) (net.Conn, error) {
	f, ok := ctx.Value(flowKey{}).(*httpFlow)
	if !ok {
		return nil, fmt.Errorf("egress: a dial without an admitted request: %w", ErrRefused)
	}
	c, a, err := p.dialChecked(ctx, f.addrs, f.port)
	if err != nil {
		return nil, err
	}
	cc := &countedConn{Conn: c, f: &flow{p: p}}
	f.mu.Lock()
	f.conn, f.addr = cc, a
	f.mu.Unlock()
	return cc, nil
}

// countedConn charges an upstream HTTP connection's bytes to the budget.
type countedConn struct {
	net.Conn
	f          *flow
	sent, recv atomic.Int64
	budgetHit  atomic.Bool
}

func (c *countedConn) Read(b []byte) (int, error) {
	k := c.f.take(len(b))
	if k == 0 && len(b) > 0 {
		c.budgetHit.Store(true)
		return 0, ErrBudget
	}
	n, err := c.Conn.Read(b[:k])
	c.recv.Add(int64(n))
	if n < k { // give back what was reserved and not read
		c.f.p.used.Add(int64(n - k))
	}
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.f.write(c.Conn, b, &c.sent)
	if errors.Is(err, ErrBudget) {
		c.budgetHit.Store(true)
	}
	return n, err
}
