// Package httpauth authenticates the clients of an HTTP MCP endpoint with
// bearer tokens: per-client static tokens from a token file, or JWTs whose
// subject names the client (github.com/golang-jwt/jwt/v5). The verifier
// plugs into the MCP SDK's auth.RequireBearerToken, which puts the client's
// identity in the request's auth.TokenInfo (UserID); Challenge adds the
// WWW-Authenticate header RFC 6750 asks of a 401.
package httpauth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// MinTokenLen is the shortest static token a token file may hold.
const MinTokenLen = 16

// MinHMACKeyLen is the shortest HMAC secret a JWT key file may hold (the
// HS256 key size).
const MinHMACKeyLen = 32

// DefaultClient is the identity of a token file's lone bare token (one
// shared token, no client name).
const DefaultClient = "operator"

// clientPattern is what a client identity must look like: it is also the
// user id the sandbox keeps state under (a tier-1 zygote, a tier-2 volume).
var clientPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)

// ClientID maps a token subject to a client identity: itself when it is a
// valid identifier, else "sub-" and the first 24 hex digits of its SHA-256
// (subjects such as "auth0|5f1c" or e-mail addresses), stable across
// restarts so a client keeps its state.
func ClientID(subject string) string {
	if clientPattern.MatchString(subject) {
		return subject
	}
	sum := sha256.Sum256([]byte(subject))
	return "sub-" + hex.EncodeToString(sum[:12])
}

// ParseTokenFile reads static tokens: one client a line, "NAME TOKEN"
// (NAME a valid identifier), blank lines and lines starting with # ignored.
// A file of one bare token is that token for DefaultClient. It returns
// token -> client.
func ParseTokenFile(data []byte) (map[string]string, error) {
	tokens := map[string]string{}
	clients := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var lines [][]string
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) > 2 {
			return nil, fmt.Errorf("line %d: want NAME TOKEN (or one bare token in the whole file), got %d fields", n, len(f))
		}
		lines = append(lines, append(f, fmt.Sprint(n)))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, errors.New("no token in the file")
	}
	for _, l := range lines {
		client, tok, n := DefaultClient, l[0], l[len(l)-1]
		if len(l) == 3 {
			client, tok = l[0], l[1]
		} else if len(lines) > 1 {
			return nil, fmt.Errorf("line %s: a bare token, but the file has several lines: name each client (NAME TOKEN)", n)
		}
		switch {
		case !clientPattern.MatchString(client):
			return nil, fmt.Errorf("line %s: client name %q must match %s", n, client, clientPattern)
		case len(tok) < MinTokenLen:
			return nil, fmt.Errorf("line %s: the token of %q is %d characters; use at least %d (e.g. `openssl rand -hex 32`)", n, client, len(tok), MinTokenLen)
		case clients[client]:
			return nil, fmt.Errorf("line %s: client %q is named twice", n, client)
		case tokens[tok] != "":
			return nil, fmt.Errorf("line %s: client %q has the same token as %q", n, client, tokens[tok])
		}
		clients[client] = true
		tokens[tok] = client
	}
	return tokens, nil
}

// JWTKey is how JWTs are checked: the key, the signing methods it allows,
// and the audience and issuer a token must carry when set.
type JWTKey struct {
	Key      any
	Methods  []string
	Audience string
	Issuer   string
}

// ParseJWTKey reads a JWT verification key: a PEM public key (RSA, ECDSA
// or Ed25519; RS*/PS*, ES*, EdDSA tokens) or, when the data is no PEM, an
// HMAC secret of at least MinHMACKeyLen bytes (HS256/384/512 tokens).
func ParseJWTKey(data []byte) (JWTKey, error) {
	if block, _ := pem.Decode(data); block != nil {
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return JWTKey{}, fmt.Errorf("PEM block %q is not a public key: %w", block.Type, err)
		}
		var methods []string
		switch pub.(type) {
		case *rsa.PublicKey:
			methods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
		case *ecdsa.PublicKey:
			methods = []string{"ES256", "ES384", "ES512"}
		case ed25519.PublicKey:
			methods = []string{"EdDSA"}
		default:
			return JWTKey{}, fmt.Errorf("public key of type %T: want RSA, ECDSA or Ed25519", pub)
		}
		return JWTKey{Key: pub, Methods: methods}, nil
	}
	secret := bytes.TrimSpace(data)
	if len(secret) < MinHMACKeyLen {
		return JWTKey{}, fmt.Errorf("not a PEM public key, and %d bytes is too short for an HMAC secret (at least %d)", len(secret), MinHMACKeyLen)
	}
	return JWTKey{Key: secret, Methods: []string{"HS256", "HS384", "HS512"}}, nil
}

// Verifier checks bearer tokens against static tokens and, when set, a
// JWT key. Its Verify is an auth.TokenVerifier: the identity it returns in
// TokenInfo.UserID is the client's.
type Verifier struct {
	static map[[32]byte]string // sha256(token) -> client
	jwt    *JWTKey
}

// NewVerifier accepts the static tokens (token -> client, as
// ParseTokenFile returns) and, when jwtKey is not nil, JWTs it verifies.
func NewVerifier(static map[string]string, jwtKey *JWTKey) *Verifier {
	v := &Verifier{static: map[[32]byte]string{}, jwt: jwtKey}
	for tok, client := range static {
		v.static[sha256.Sum256([]byte(tok))] = client
	}
	return v
}

// Verify is the auth.TokenVerifier. A static token is looked up by its
// SHA-256 (so the comparison's timing does not depend on the token); a JWT
// must be signed with an allowed method, unexpired (exp is required), and
// carry the configured audience and issuer and a subject. Every refusal
// wraps auth.ErrInvalidToken.
func (v *Verifier) Verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	if client, ok := v.static[sha256.Sum256([]byte(token))]; ok {
		return &auth.TokenInfo{UserID: client, Expiration: time.Now().Add(time.Hour)}, nil
	}
	if v.jwt == nil || strings.Count(token, ".") != 2 {
		return nil, auth.ErrInvalidToken
	}
	// Strict decoding: a token is accepted only as its issuer encoded it,
	// not as another string with the same bytes.
	opts := []jwt.ParserOption{jwt.WithStrictDecoding(), jwt.WithValidMethods(v.jwt.Methods), jwt.WithExpirationRequired(), jwt.WithLeeway(30 * time.Second)}
	if v.jwt.Audience != "" {
		opts = append(opts, jwt.WithAudience(v.jwt.Audience))
	}
	if v.jwt.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.jwt.Issuer))
	}
	var claims jwt.RegisteredClaims
	if _, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return v.jwt.Key, nil }, opts...); err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	if claims.Subject == "" {
		return nil, fmt.Errorf("%w: the token names no subject (sub)", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: ClientID(claims.Subject), Expiration: claims.ExpiresAt.Time}, nil
}

// Challenge wraps next so that a 401 carries the WWW-Authenticate header
// RFC 6750 (section 3) requires, which the SDK's middleware sets only when
// it has resource metadata or scopes to announce: `Bearer realm="..."`,
// with error="invalid_token" when the request carried a token that failed.
// A 401 also says Connection: close, and the connection is closed after
// it without reading the rest of the request's body (its read deadline is
// now): a client that has not authenticated holds no connection open.
func Challenge(realm string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&challengeWriter{ResponseWriter: w, realm: realm, tokenSent: r.Header.Get("Authorization") != ""}, r)
	})
}

// challengeWriter sets the challenge when a 401 is written without one.
type challengeWriter struct {
	http.ResponseWriter
	realm     string
	tokenSent bool
}

func (c *challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		if c.Header().Get("WWW-Authenticate") == "" {
			v := fmt.Sprintf("Bearer realm=%q", c.realm)
			if c.tokenSent {
				v += `, error="invalid_token"`
			}
			c.Header().Set("WWW-Authenticate", v)
		}
		c.Header().Set("Connection", "close")
		// Without it net/http would wait for up to 256 KB of the unread
		// body after the response, to discard it.
		_ = http.NewResponseController(c.ResponseWriter).SetReadDeadline(time.Now())
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer
// (flushing for streamed responses).
func (c *challengeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Flush forwards to the underlying writer when it can flush.
func (c *challengeWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
