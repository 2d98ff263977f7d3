package runner

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

	"github.com/orqest/sandbox/shared"
)

// Egress is a session's egress proxy as the runner's seal uses it
// (Seal.Egress): the kernel layers let user code's process open TCP
// connections, Landlock (ABI >= 4) to Port only, and the runner's view of
// urllib.request sends every request through URL. The proxy decides
// where a request may go (package egress).
type Egress struct {
	// URL is the proxy's URL as the runtime was given it (its HTTP_PROXY),
	// credentials included: the only proxy urllib.request's view uses.
	URL string `json:"url"`
	// Host and Port are URL's host (an IP address or a name) and port:
	// the only address the runner's audit hook lets a socket connect to,
	// and the only port Landlock lets it connect to.
	Host string `json:"host"`
	Port int    `json:"port"`
}

// ParseEgress returns the Egress of the proxy at rawURL (an http:// URL
// with a host and an explicit or default port, as HTTP_PROXY holds it);
// nil for "". The error wraps shared.ErrInvalidArgument.
func ParseEgress(rawURL string) (*Egress, error) {
	if rawURL == "" {
		return nil, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("egress proxy URL: %w: %w", err, shared.ErrInvalidArgument)
	}
	if u.Scheme != "http" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("egress proxy URL %q: want http://[user:password@]host:port: %w", u.Redacted(), shared.ErrInvalidArgument)
	}
	port := 80
	if p := u.Port(); p != "" {
		port, err = strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("egress proxy URL %q: port %q: %w", u.Redacted(), p, shared.ErrInvalidArgument)
		}
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return &Egress{URL: rawURL, Host: host, Port: port}, nil
}

// TrustStorePaths are where Debian's public TLS trust store lives (the CA
// bundle, the directory of hashed links and the certificates they point
// to, and OpenSSL's own names for them): a seal with an egress proxy may
// read them, so HTTPS through the proxy verifies servers as CPython's
// default context does. The seal skips a path that does not exist.
func TrustStorePaths() []string {
	return []string{"/etc/ssl/certs", "/usr/share/ca-certificates", "/usr/lib/ssl/cert.pem", "/usr/lib/ssl/certs"}
}

// SetEgress gives the seal the session's egress proxy e (nil: none, and
// the seal is unchanged). The sandbox then keeps the network namespace it
// starts in, the session's, whose only route out is the proxy: the
// network_namespace layer is no longer required of it (the runner reports
// it missing, with that reason). It may also read TrustStorePaths.
func (s *Seal) SetEgress(e *Egress) {
	if e == nil {
		return
	}
	s.Egress = e
	s.Require = slices.DeleteFunc(slices.Clone(s.Require), func(l string) bool { return l == LayerNetNamespace })
	s.ReadPaths = append(slices.Clone(s.ReadPaths), TrustStorePaths()...)
}
