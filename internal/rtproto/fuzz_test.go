package rtproto

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// fuzzTokenSeeds are tokens of every shape Verify meets: minted ones (it
// accepts them) and each way a token is wrong.
func fuzzTokenSeeds(t testing.TB) []string {
	signed := func(method jwt.SigningMethod, key any, c Claims) string {
		tok, err := jwt.NewWithClaims(method, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	var seeds []string
	for _, scope := range []string{"", ScopeAgent, ScopeOperator, "root"} {
		tok, err := Mint(secret, user, session, scope, MaxTokenTTL-time.Second)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, tok)
	}
	foreign, _ := Mint(other, user, session, ScopeAgent, time.Minute)
	stranger, _ := Mint(secret, "mallory", session, ScopeAgent, time.Minute)
	seeds = append(seeds, foreign, stranger)
	// The minted token malleated: a line break in the signature (which
	// base64 decoders skip), other unused bits in its last character.
	tok := seeds[0]
	seeds = append(seeds, malleated(tok)...)
	c := claims()
	c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
	seeds = append(seeds, signed(jwt.SigningMethodHS256, secret, c))
	c = claims()
	c.ExpiresAt = nil
	seeds = append(seeds, signed(jwt.SigningMethodHS256, secret, c))
	c = claims()
	c.IssuedAt = nil
	seeds = append(seeds, signed(jwt.SigningMethodHS256, secret, c))
	c = claims()
	c.Issuer, c.Audience = "someone", jwt.ClaimStrings{"else"}
	seeds = append(seeds, signed(jwt.SigningMethodHS256, secret, c))
	seeds = append(seeds,
		signed(jwt.SigningMethodHS384, secret, claims()),
		signed(jwt.SigningMethodHS512, secret, claims()),
		signed(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims()),
		"", ".", "..", "a.b.c", "Bearer x.y.z",
		"eyJhbGciOiJIUzI1NiJ9.e30.",
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsInNpZCI6InMtMSJ9.",
		strings.Repeat("A", 4096)+"."+strings.Repeat("B", 4096)+"."+strings.Repeat("C", 43),
	)
	return seeds
}

// FuzzVerify: Verify accepts a token only when it is what Mint writes for
// the secret: three base64url segments (canonical, nothing else in the
// string), an HS256 header and an HMAC-SHA256 of the first two under the
// secret, claims for this user and session with a known scope, an unexpired
// lifetime of at most MaxTokenTTL. The fuzzer cannot compute an HMAC, so
// every token it accepts is a seed or a malleated copy of one, which these
// properties refuse. No token passes under two secrets.
func FuzzVerify(f *testing.F) {
	for _, s := range fuzzTokenSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify(secret, tok, user, session)
		if _, err2 := Verify(other, tok, user, session); err == nil && err2 == nil {
			t.Fatalf("accepted under two secrets: %q", tok)
		}
		if err != nil {
			if c != nil {
				t.Fatalf("claims %+v with error %v", c, err)
			}
			return
		}
		if why := notMinted(tok, secret); why != "" {
			t.Fatalf("accepted %q: %s", tok, why)
		}
		switch {
		case c.Subject != user || c.Session != session:
			t.Fatalf("accepted a token for %q/%q", c.Subject, c.Session)
		case c.EffectiveScope() != ScopeAgent && c.EffectiveScope() != ScopeOperator:
			t.Fatalf("accepted scope %q", c.Scope)
		case c.Issuer != Issuer || !slices.Equal([]string(c.Audience), []string{Audience}):
			t.Fatalf("accepted issuer %q audience %v", c.Issuer, c.Audience)
		case c.ExpiresAt == nil || c.IssuedAt == nil || c.ExpiresAt.Sub(c.IssuedAt.Time) > MaxTokenTTL:
			t.Fatalf("accepted lifetime %v-%v", c.IssuedAt, c.ExpiresAt)
		case time.Until(c.ExpiresAt.Time) < -5*time.Second:
			t.Fatalf("accepted a token expired at %v", c.ExpiresAt)
		}
	})
}

// notMinted says why tok is not a token Mint writes under secret ("" when
// it is one), without the JWT library.
func notMinted(tok string, secret []byte) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "not three segments"
	}
	var segs [3][]byte
	for i, p := range parts {
		b, err := base64.RawURLEncoding.Strict().DecodeString(p)
		if err != nil {
			return "a segment is not base64url: " + err.Error()
		}
		if base64.RawURLEncoding.EncodeToString(b) != p {
			return "a segment is not canonical base64url"
		}
		segs[i] = b
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(segs[0], &h) != nil || h.Alg != "HS256" {
		return "the header is not HS256"
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(m.Sum(nil), segs[2]) {
		return "the signature is not the secret's HMAC"
	}
	return ""
}

// FuzzCheckID: CheckID accepts exactly ^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$,
// so an accepted id is a single path element that names no directory but
// its own: no separator, NUL, dot or dot-dot, at most 64 bytes.
// CheckToolName accepts exactly ^[a-zA-Z][a-zA-Z0-9_]{0,63}$ minus the
// runtime's own tools.
func FuzzCheckID(f *testing.F) {
	for _, s := range []string{
		"alice", "s-1", "A", "0", strings.Repeat("a", 64), strings.Repeat("a", 65),
		"", ".", "..", "../etc", "a/b", `a\b`, "a\x00", "\x00", "-a", "_a", "a.b", "a b", "a\n", "\na",
		"é", "a\u200b", "ａ", "execute_python", "list_tools", "my_tool", "my-tool", "1tool",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		idOK := CheckID("session", s) == nil
		if want := isID(s); idOK != want {
			t.Fatalf("CheckID(%q) accepted=%v, want %v", s, idOK, want)
		}
		if idOK {
			if len(s) > 64 || strings.ContainsAny(s, "/\\\x00.") || filepath.Base(s) != s || filepath.Clean(s) != s || filepath.IsAbs(s) {
				t.Fatalf("CheckID accepted %q, not a plain path element", s)
			}
		}
		nameOK := CheckToolName(s) == nil
		if want := isToolName(s) && !slices.Contains(ReservedToolNames, s); nameOK != want {
			t.Fatalf("CheckToolName(%q) accepted=%v, want %v", s, nameOK, want)
		}
		if nameOK && !idOK {
			t.Fatalf("CheckToolName accepted %q, which is no identifier", s)
		}
	})
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isID(s string) bool {
	if len(s) < 1 || len(s) > 64 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' && s[i] != '-' {
			return false
		}
	}
	return true
}

func isToolName(s string) bool {
	if len(s) < 1 || len(s) > 64 || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '_' {
			return false
		}
	}
	return true
}
