package egress

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// A Gateway serves the egress proxies of many sessions on one TCP
// listener, for a backend whose sessions reach the plugin over a network
// rather than through a socket of their own (kubernetes: a pod reaches the
// plugin's machine on the CNI bridge). Each session has a Route: a Proxy
// of its own (its policy, budget and connection slots) and a random
// credential that its HTTP_PROXY carries as user and password
// (http://<id>:<secret>@host:port). A request is served by the proxy of
// the route its Proxy-Authorization names, on plain HTTP requests and on
// CONNECT alike; one without a credential, with a wrong secret or with a
// route that has gone gets 407 and an EventRefused. A route serves once
// it is bound to its source address (the session pod's IP, or any): a
// request with the right credential from another address, or before, is
// refused the same way.

// AuthRefusal starts the Reason of a gateway's refusal of a request no
// route accepts; such an event names no session.
const AuthRefusal = "proxy authentication: "

// gatewayRealm is the realm of the gateway's 407 answers.
const gatewayRealm = `Basic realm="orqest egress"`

// Gateway is one listener serving the proxies of many sessions. It is
// safe for concurrent use.
type Gateway struct {
	l       net.Listener
	srv     *http.Server
	onEvent func(Event)
	served  chan struct{}

	mu     sync.Mutex
	routes map[string]*Route
	closed bool
}

// Route is one session's proxy on a Gateway and the credential that
// selects it.
type Route struct {
	// Proxy is the session's proxy.
	Proxy *Proxy
	// ID names the route; it is the user part of the credential and not
	// secret (a label of the session's pod may carry it).
	ID string

	g      *Gateway
	secret []byte

	mu     sync.Mutex
	bound  bool       // SetSource was called: until then nothing is served
	source netip.Addr // zero: any
}

// ListenGateway serves a Gateway on the TCP address addr (port 0: one the
// kernel picks). onEvent (nil: none) gets the refusals of requests no
// route accepts; the routes' own events go to their Options.OnEvent.
// onErr (nil: ignored) gets an error of the server. Close stops it.
func ListenGateway(addr string, onEvent func(Event), onErr func(error)) (*Gateway, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("egress gateway: %w", err)
	}
	g := &Gateway{l: l, onEvent: onEvent, served: make(chan struct{}), routes: map[string]*Route{}}
	g.srv = newServer(g)
	go func() {
		defer close(g.served)
		if err := g.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) && onErr != nil {
			onErr(fmt.Errorf("egress gateway: %w", err))
		}
	}()
	return g, nil
}

// Addr is the address the gateway listens on.
func (g *Gateway) Addr() netip.AddrPort {
	ap, _ := netip.ParseAddrPort(g.l.Addr().String())
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Add starts a route: a proxy of opts under a fresh random credential.
// Route.Close ends it.
func (g *Gateway) Add(opts Options) (*Route, error) {
	id, secret := make([]byte, 8), make([]byte, 24)
	_, _ = rand.Read(id)
	_, _ = rand.Read(secret)
	r := &Route{Proxy: New(opts), ID: hex.EncodeToString(id), g: g, secret: []byte(hex.EncodeToString(secret))}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errors.New("egress gateway: closed")
	}
	g.routes[r.ID] = r
	return r, nil
}

// URL is the proxy URL of the route, credential included: the session's
// HTTP_PROXY and HTTPS_PROXY (ProxyEnv).
func (r *Route) URL() string {
	return "http://" + r.ID + ":" + string(r.secret) + "@" + r.g.Addr().String()
}

// Addr is the address of the route's gateway.
func (r *Route) Addr() netip.AddrPort { return r.g.Addr() }

// SetSource opens the route to requests from addr alone (a zero addr:
// from anywhere). A route serves nothing before it: a backend learns its
// session's address (a pod's IP) only once the session runs.
func (r *Route) SetSource(addr netip.Addr) {
	r.mu.Lock()
	r.bound, r.source = true, addr.Unmap()
	r.mu.Unlock()
}

// Close removes the route (its credential gets 407 from now on), stops
// its proxy and cuts its tunnels. Safe to call more than once.
func (r *Route) Close() error {
	r.g.mu.Lock()
	if r.g.routes[r.ID] == r {
		delete(r.g.routes, r.ID)
	}
	r.g.mu.Unlock()
	return r.Proxy.Close()
}

// Close stops the listener and every route's proxy.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	routes := g.routes
	g.routes = map[string]*Route{}
	g.mu.Unlock()
	errs := []error{g.srv.Close()}
	<-g.served
	for _, r := range routes {
		errs = append(errs, r.Proxy.Close())
	}
	return errors.Join(errs...)
}

// ServeHTTP implements http.Handler: the request goes to the proxy of the
// route its credential selects, without the credential.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r, why := g.authorize(req)
	if r == nil {
		host, port := requestTarget(req)
		if g.onEvent != nil {
			g.onEvent(Event{Type: EventRefused, Time: time.Now().UTC(), Method: req.Method, Host: host, Port: port, Reason: AuthRefusal + why})
		}
		w.Header().Set("Proxy-Authenticate", gatewayRealm)
		w.Header().Set("X-Orqest-Egress", "refused")
		http.Error(w, "orqest egress: "+AuthRefusal+why, http.StatusProxyAuthRequired)
		return
	}
	req.Header.Del("Proxy-Authorization")
	r.Proxy.ServeHTTP(w, req)
}

// authorize returns the route req's credential selects and accepts, or
// nil and why not.
func (g *Gateway) authorize(req *http.Request) (*Route, string) {
	id, secret, ok := proxyBasicAuth(req.Header.Get("Proxy-Authorization"))
	if !ok {
		return nil, "no Basic Proxy-Authorization credential (the session's HTTP_PROXY carries it)"
	}
	g.mu.Lock()
	r := g.routes[id]
	g.mu.Unlock()
	// The id is not secret; the secret is compared in constant time.
	if r == nil || subtle.ConstantTimeCompare([]byte(secret), r.secret) != 1 {
		return nil, "the credential is not a live session's"
	}
	r.mu.Lock()
	bound, src := r.bound, r.source
	r.mu.Unlock()
	if !bound {
		return nil, "the session's address is not known yet"
	}
	if src.IsValid() {
		from, err := netip.ParseAddrPort(req.RemoteAddr)
		if err != nil || from.Addr().Unmap() != src {
			return nil, fmt.Sprintf("the credential of session route %s came from %s, not from the session's address %s", r.ID, req.RemoteAddr, src)
		}
	}
	return r, ""
}

// proxyBasicAuth parses a Proxy-Authorization header of the Basic scheme.
func proxyBasicAuth(h string) (user, password string, ok bool) {
	scheme, enc, found := strings.Cut(strings.TrimSpace(h), " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// requestTarget is the host and port a proxy request is for.
func requestTarget(req *http.Request) (string, int) {
	if req.Method == http.MethodConnect {
		host, port, err := splitHostPort(req.Host, 0)
		if err != nil {
			return req.Host, 0
		}
		return host, port
	}
	host, port, err := splitHostPort(req.URL.Host, 80)
	if err != nil {
		return req.URL.Host, 0
	}
	return host, port
}
