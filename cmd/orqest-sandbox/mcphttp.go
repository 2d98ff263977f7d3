package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// The HTTP face of `mcp serve --http`, around the SDK's Streamable handler.

// mcpSessionHeader is the Streamable HTTP transport's session header.
const mcpSessionHeader = "Mcp-Session-Id"

// jsonrpcInvalidRequest is JSON-RPC 2.0's "Invalid Request" error code.
const jsonrpcInvalidRequest = -32600

// requireMCPSession refuses a POST without an Mcp-Session-Id header unless
// it opens a session, as the Streamable HTTP transport says a server that
// keeps sessions does: HTTP 400, here with a JSON-RPC error (-32600,
// Invalid Request) naming the header. Left to the SDK, such a request
// would open a throwaway session and answer 200 with an error of code 0.
// What opens a session is an initialize request; the server/discover
// probe of protocol revisions without sessions goes on to the SDK too,
// which refuses it (UnsupportedProtocolVersion naming the revisions this
// server speaks over HTTP, statefulHTTPProtocolVersions) so that its
// client initializes. A body that is no JSON-RPC goes on to the SDK,
// which refuses it itself.
func requireMCPSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get(mcpSessionHeader) != "" || r.Body == nil || sdkRefusesFirst(r) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcpMaxRequestBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		id, opens := opensMCPSession(body)
		if opens {
			next.ServeHTTP(w, r)
			return
		}
		writeJSONRPCError(w, http.StatusBadRequest, id, jsonrpcInvalidRequest,
			"Bad Request: "+mcpSessionHeader+" header is required: send initialize first, then every request with the Mcp-Session-Id its response carries")
	})
}

// sdkRefusesFirst reports whether the SDK's handler refuses r before it
// looks at sessions, so that its answer stands: a request reaching a
// loopback listener with a Host that is not loopback (DNS rebinding: 403),
// a Content-Type other than application/json (415), an Accept without
// both application/json and text/event-stream (400).
func sdkRefusesFirst(r *http.Request) bool {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopback(local.String()) && !isLoopback(r.Host) {
		return true
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return true
	}
	var jsonOK, streamOK bool
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return !jsonOK || !streamOK
}

// isLoopback reports whether addr (host or host:port) is localhost or a
// loopback address.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// opensMCPSession reports whether the JSON-RPC message or batch body may go
// without a session (an initialize or server/discover among them, or a
// body that is not JSON-RPC, which the SDK refuses), and the id of a lone
// request, for the error response (null otherwise).
func opensMCPSession(body []byte) (id json.RawMessage, opens bool) {
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var msgs []message
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &msgs) != nil {
			return nil, true
		}
	} else {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return nil, true
		}
		msgs = []message{m}
	}
	for _, m := range msgs {
		if m.Method == "initialize" || m.Method == "server/discover" {
			return nil, true
		}
	}
	if len(msgs) == 1 {
		id = msgs[0].ID
	}
	return id, false
}

// jsonrpcErrorResponse is a JSON-RPC 2.0 error response.
type jsonrpcErrorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   jsonrpcError    `json:"error"`
}

type jsonrpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeJSONRPCError writes a JSON-RPC error response with HTTP status
// code; id is the request's (nil: null).
func writeJSONRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(jsonrpcErrorResponse{JSONRPC: "2.0", ID: id, Error: jsonrpcError{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// mcpHTTPLimits bounds what one connection of `mcp serve --http` may hold,
// and for how long, so that clients that stop sending or stop reading,
// authenticated or not, cannot pile up connections (and file descriptors)
// until the server answers no one, /healthz included.
type mcpHTTPLimits struct {
	// header bounds the request line and headers
	// (http.Server.ReadHeaderTimeout).
	header time.Duration
	// body bounds a request's whole body, from the end of its headers. It
	// is a read deadline set per request (http.ResponseController) and
	// lifted once the body is in, not http.Server.ReadTimeout: that one
	// stays armed while the response streams, and when it fires the
	// connection's background read fails and cancels the request's
	// context, ending a long execution's stream.
	body time.Duration
	// write bounds writing a response. http.Server.WriteTimeout gives the
	// whole response this long from the end of its request's headers:
	// right for /healthz, /metrics, a 401, the SDK's refusals. The MCP
	// endpoint's responses are streams (SSE) that last as long as the
	// execution they report on, and its standalone GET stream as long as
	// the session, so there each write gets this long to complete instead,
	// and no deadline runs between writes (mcpStreamDeadlines): a stream
	// may idle as long as it needs, a client that stops reading is cut
	// off once the socket's buffers are full and a write stalls.
	write time.Duration
	// idle bounds a keep-alive connection waiting for its next request.
	idle time.Duration
	// perAddr is how many connections one client address may hold at
	// once, counted as they are accepted, before any authentication
	// (limitPerAddr); 0 is no limit.
	perAddr int
}

// defaultMCPHTTPLimits are the limits of `mcp serve --http`. The body's
// allows a request of mcpMaxRequestBytes (a put_file of the largest file)
// at about 200 KB/s.
var defaultMCPHTTPLimits = mcpHTTPLimits{
	header:  10 * time.Second,
	body:    60 * time.Second,
	write:   30 * time.Second,
	idle:    2 * time.Minute,
	perAddr: 64,
}

// newMCPHTTPServer is the http.Server of `mcp serve --http` around h (the
// handler of mcpClients.httpHandler, built with the same limits). Its
// listener should come through limitPerAddr.
func newMCPHTTPServer(h http.Handler, lim mcpHTTPLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.header,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    64 << 10,
	}
}

// bodyDeadline gives a request's body d to arrive: a read deadline from
// now, which a handler that reads the whole body lifts (readMCPBody). A
// handler that leaves the body unread answers under it, and the server's
// discarding of the rest gives up at it and closes the connection.
func bodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d > 0 && r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

// readMCPBody reads the request's whole body (at most
// mcpMaxRequestBytes) under bodyDeadline's deadline, lifts the deadline,
// and hands next the body from memory: the SDK reads it whole anyway, and
// a response that streams for minutes must not run under a read deadline.
// The response's write deadline then starts afresh (lim.write): a body
// that took longer to arrive than the server's WriteTimeout still gets its
// answer. A body that does not arrive in time is a 408, one too large a
// 413; both close the connection.
func readMCPBody(lim mcpHTTPLimits, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcpMaxRequestBytes))
		if lim.write > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(lim.write))
		}
		if err != nil {
			w.Header().Set("Connection", "close")
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			case errors.Is(err, os.ErrDeadlineExceeded):
				http.Error(w, fmt.Sprintf("request body not received within %s", lim.body), http.StatusRequestTimeout)
			default:
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			}
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// mcpStreamDeadlines replaces the server's WriteTimeout, a deadline on the
// whole response, with one on each write: the write, or flush, must
// complete within d, and between writes none runs (mcpHTTPLimits.write).
// After next returns, what the server still flushes gets d.
func mcpStreamDeadlines(d time.Duration, next http.Handler) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{})
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, d: d}, r)
		_ = rc.SetWriteDeadline(time.Now().Add(d))
	})
}

// deadlineWriter arms a write deadline around each Write and Flush.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
	mu sync.Mutex // a ResponseWriter takes one write at a time; so do the deadlines
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.ResponseWriter.Write(p)
}

// FlushError flushes under a deadline (http.ResponseController.Flush
// calls it).
func (w *deadlineWriter) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	defer w.rc.SetWriteDeadline(time.Time{})
	return w.rc.Flush()
}

// Flush is FlushError for callers of http.Flusher.
func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// limitPerAddr returns ln with at most max connections open at once from
// one client address (the remote IP): a connection beyond it is closed as
// it is accepted, before a byte is read, so clients that hold connections
// open use up their own share and not the process's file descriptors.
// Behind a reverse proxy every client has the proxy's address: raise max
// or set 0 (ln itself).
func limitPerAddr(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &perAddrListener{Listener: ln, max: max, open: map[string]int{}}
}

type perAddrListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[string]int
}

// Accept returns the next connection whose address holds fewer than max.
func (l *perAddrListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
		l.mu.Lock()
		if l.open[addr] >= l.max {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open[addr]++
		l.mu.Unlock()
		return &addrConn{Conn: c, l: l, addr: addr}, nil
	}
}

func (l *perAddrListener) release(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[addr]--; l.open[addr] <= 0 {
		delete(l.open, addr)
	}
}

// addrConn gives its address's place back when it is closed.
type addrConn struct {
	net.Conn
	l    *perAddrListener
	addr string
	once sync.Once
}

func (c *addrConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}

// CloseWrite half-closes a TCP connection: net/http sends its last
// response, half-closes and waits a moment before closing when the request
// body was left unread, so the client reads the response before a reset.
func (c *addrConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
