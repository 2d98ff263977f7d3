package httpauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

func TestParseTokenFile(t *testing.T) {
	const a, b = "aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb"
	got, err := ParseTokenFile([]byte("# clients\n\nalice " + a + "\nbob\t" + b + "\n"))
	if err != nil || len(got) != 2 || got[a] != "alice" || got[b] != "bob" {
		t.Fatalf("%v %v", got, err)
	}
	got, err = ParseTokenFile([]byte(a + "\n"))
	if err != nil || got[a] != DefaultClient {
		t.Fatalf("bare token: %v %v", got, err)
	}
	for src, want := range map[string]string{
		"":                            "no token",
		"alice short\n":               "at least 16",
		"alice " + a + "\nalice " + b: "named twice",
		"alice " + a + "\nbob " + a:   "same token",
		"al ice " + a:                 "NAME TOKEN",
		"-x " + a:                     "must match",
		a + "\nbob " + b:              "bare token, but the file has several lines",
	} {
		if _, err := ParseTokenFile([]byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", src, err, want)
		}
	}
}

func pemPublic(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// A JWT is accepted only when signed by the key with an allowed method,
// unexpired, for the audience and issuer; its subject becomes the client.
func TestVerifyJWT(t *testing.T) {
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecJWT, err := ParseJWTKey(pemPublic(t, &ecKey.PublicKey))
	if err != nil || ecJWT.Methods[0] != "ES256" {
		t.Fatalf("ECDSA key: %+v %v", ecJWT, err)
	}
	edJWT, err := ParseJWTKey(pemPublic(t, edPub))
	if err != nil || edJWT.Methods[0] != "EdDSA" {
		t.Fatalf("Ed25519 key: %+v %v", edJWT, err)
	}
	if _, err := ParseJWTKey([]byte("too-short-secret")); err == nil {
		t.Error("a 16-byte HMAC secret was accepted")
	}
	ecJWT.Audience, ecJWT.Issuer = "orqest", "idp"
	v := NewVerifier(nil, &ecJWT)
	claims := func(sub, aud, iss string, exp time.Time) jwt.RegisteredClaims {
		return jwt.RegisteredClaims{Subject: sub, Audience: jwt.ClaimStrings{aud}, Issuer: iss, ExpiresAt: jwt.NewNumericDate(exp)}
	}
	sign := func(m jwt.SigningMethod, key any, c jwt.Claims) string {
		s, err := jwt.NewWithClaims(m, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hour := time.Now().Add(time.Hour)
	info, err := v.Verify(context.Background(), sign(jwt.SigningMethodES256, ecKey, claims("auth0|42", "orqest", "idp", hour)), nil)
	if err != nil || info.UserID != ClientID("auth0|42") || !strings.HasPrefix(info.UserID, "sub-") {
		t.Fatalf("good token: %+v %v", info, err)
	}
	// The good token with its signature's unused bits changed: the same
	// bytes, another string.
	good := sign(jwt.SigningMethodES256, ecKey, claims("a", "orqest", "idp", hour))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	reencoded := good[:len(good)-1] + string(alphabet[strings.IndexByte(alphabet, good[len(good)-1])^1])
	for name, tok := range map[string]string{
		"re-encoded":     reencoded,
		"expired":        sign(jwt.SigningMethodES256, ecKey, claims("a", "orqest", "idp", time.Now().Add(-time.Hour))),
		"no exp":         sign(jwt.SigningMethodES256, ecKey, jwt.RegisteredClaims{Subject: "a", Audience: jwt.ClaimStrings{"orqest"}, Issuer: "idp"}),
		"audience":       sign(jwt.SigningMethodES256, ecKey, claims("a", "other", "idp", hour)),
		"issuer":         sign(jwt.SigningMethodES256, ecKey, claims("a", "orqest", "evil", hour)),
		"no subject":     sign(jwt.SigningMethodES256, ecKey, claims("", "orqest", "idp", hour)),
		"other key":      sign(jwt.SigningMethodES256, otherEC, claims("a", "orqest", "idp", hour)),
		"other method":   sign(jwt.SigningMethodEdDSA, edPriv, claims("a", "orqest", "idp", hour)),
		"alg none":       sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("a", "orqest", "idp", hour)),
		"not a jwt":      "aaaaaaaaaaaaaaaaaaaaaaaa",
		"static unknown": "bbbbbbbbbbbbbbbbbbbb",
	} {
		if _, err := v.Verify(context.Background(), tok, nil); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
		}
	}
}

func TestClientID(t *testing.T) {
	first, again := ClientID("a@b.c"), ClientID("a@b.c")
	if ClientID("alice") != "alice" || first == "a@b.c" || first != again || first == ClientID("a@b.d") {
		t.Error("ClientID: identifiers pass, others map stably and distinctly")
	}
}

func TestChallenge(t *testing.T) {
	h := Challenge("r", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	for authz, want := range map[string]string{"": `Bearer realm="r"`, "Bearer x": `Bearer realm="r", error="invalid_token"`} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("WWW-Authenticate"); got != want {
			t.Errorf("Authorization %q: %q, want %q", authz, got, want)
		}
		if got := rec.Header().Get("Connection"); got != "close" {
			t.Errorf("Authorization %q: Connection %q, want close", authz, got)
		}
	}
}

// A client that sends a body it never finishes, without a valid token,
// gets its 401 at once and the server closes the connection: it does not
// wait for (or try to discard) the rest of the body.
func TestChallengeClosesStalledBody(t *testing.T) {
	h := Challenge("r", auth.RequireBearerToken(NewVerifier(map[string]string{"0123456789abcdef": "a"}, nil).Verify, nil)(http.NotFoundHandler()))
	ts := httptest.NewServer(h)
	defer ts.Close()
	for _, authz := range []string{"", "Authorization: Bearer wrong-wrong-wrong\r\n"} {
		c, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Under maxPostHandlerReadBytes (256 KB): net/http would wait to
		// discard it all before answering if the 401 did not close.
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"js", authz)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		b, err := io.ReadAll(c)
		if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 401") || !strings.Contains(string(b), "Connection: close") {
			t.Errorf("%q: after %v: %v %q, want a 401 and the connection closed", authz, time.Since(start).Round(time.Millisecond), err, b)
		}
	}
}
