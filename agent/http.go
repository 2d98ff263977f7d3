package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/httpauth"
	"github.com/orqest/sandbox/internal/rtproto"
)

// The optional HTTP transport (policy `network = "bridge"`): MCP over
// Streamable HTTP on --listen, published by the plugin on 127.0.0.1 only.
// The bearer token travels in the Authorization header and is checked by
// the SDK's auth.RequireBearerToken with the same verifier as the stdio
// path; a browser Origin outside ORQEST_ALLOWED_ORIGINS is refused
// (DNS-rebinding defence).

// defaultAllowedOrigins applies when ORQEST_ALLOWED_ORIGINS is unset. Set it
// to "" to disable the Origin check.
const defaultAllowedOrigins = "http://127.0.0.1,http://localhost"

// allowedOrigins returns the allowed origins and whether the check is on.
func allowedOrigins() ([]string, bool) {
	v, set := os.LookupEnv("ORQEST_ALLOWED_ORIGINS")
	if !set {
		v = defaultAllowedOrigins
	}
	if strings.TrimSpace(v) == "" {
		return nil, false
	}
	var out []string
	for _, o := range strings.Split(v, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, strings.TrimRight(o, "/"))
		}
	}
	return out, true
}

// originAllowed matches scheme and host; an allowed origin without a port
// admits any port ("http://localhost" admits "http://localhost:5173").
func originAllowed(origin string, allowed []string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return false
	}
	for _, a := range allowed {
		au, err := url.Parse(a)
		if err != nil || !strings.EqualFold(au.Scheme, u.Scheme) {
			continue
		}
		if au.Port() == "" {
			if strings.EqualFold(au.Hostname(), u.Hostname()) {
				return true
			}
		} else if strings.EqualFold(au.Host, u.Host) {
			return true
		}
	}
	return false
}

// originCheck refuses requests whose Origin header is not allowed. Requests
// without Origin (non-browser clients such as the plugin) pass.
func originCheck(next http.Handler) http.Handler {
	allowed, on := allowedOrigins()
	if !on {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !originAllowed(o, allowed) {
			http.Error(w, "forbidden origin", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// verifier adapts rtproto.Verify to the SDK's TokenVerifier.
func (rt *runtime) verifier(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
	c, err := rtproto.Verify(rt.hello.Secret, tok, rt.hello.User, rt.hello.Session)
	if err != nil {
		rt.log.Warn("http call refused", "error", err)
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	return &auth.TokenInfo{Scopes: []string{c.EffectiveScope()}, Expiration: c.ExpiresAt.Time, UserID: c.Subject}, nil
}

// httpHandler is the whole HTTP stack: Origin check, bearer token (with
// its challenge), MCP.
func (rt *runtime) httpHandler() http.Handler {
	srv := rt.server()
	mcpH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	return originCheck(httpauth.Challenge(bearerRealm, auth.RequireBearerToken(rt.verifier, nil)(mcpH)))
}

// bearerRealm names the protection space in the 401 challenge.
const bearerRealm = "orqest-agent-runtime"

// serveHTTP serves MCP on addr until ctx ends (stdin closed or a signal).
func (rt *runtime) serveHTTP(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: rt.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	rt.log.Info("serving MCP over HTTP", "addr", ln.Addr().String())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
