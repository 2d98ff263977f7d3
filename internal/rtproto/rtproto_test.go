package rtproto

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/orqest/sandbox/shared/toollib"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef")
	other  = []byte("fedcba9876543210fedcba9876543210")
)

const (
	user    = "alice"
	session = "s-1"
)

func mint(t *testing.T, scope string, ttl time.Duration) string {
	t.Helper()
	tok, err := Mint(secret, user, session, scope, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// claims are valid claims for user and session, for tests to spoil.
func claims() Claims {
	now := time.Now()
	return Claims{
		Session: session,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   user,
			Audience:  jwt.ClaimStrings{Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now.Add(-5 * time.Second)),
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute)),
		},
	}
}

// sign signs c with method and key.
func sign(t *testing.T, method jwt.SigningMethod, key any, c Claims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestMintVerify(t *testing.T) {
	for _, scope := range []string{"", ScopeAgent, ScopeOperator} {
		c, err := Verify(secret, mint(t, scope, time.Minute), user, session)
		if err != nil {
			t.Fatalf("scope %q: %v", scope, err)
		}
		want := scope
		if want == "" {
			want = ScopeAgent
		}
		if c.Subject != user || c.Session != session || c.Scope != scope || c.EffectiveScope() != want {
			t.Errorf("scope %q: claims %+v, effective scope %q", scope, c, c.EffectiveScope())
		}
		if c.Issuer != Issuer || !slices.Equal([]string(c.Audience), []string{Audience}) {
			t.Errorf("issuer %q audience %v", c.Issuer, c.Audience)
		}
	}
}

func TestMintedTokenIsHS256(t *testing.T) {
	tok := mint(t, ScopeAgent, time.Minute)
	p, _, err := jwt.NewParser().ParseUnverified(tok, &Claims{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Method.Alg() != "HS256" || p.Header["alg"] != "HS256" {
		t.Errorf("alg %v", p.Header["alg"])
	}
}

// refused checks that Verify refuses tok (for user and session) as
// ErrUnauthorized.
func refused(t *testing.T, what, tok string) {
	t.Helper()
	c, err := Verify(secret, tok, user, session)
	if err == nil {
		t.Errorf("%s: accepted (%+v)", what, c)
		return
	}
	if !errors.Is(err, ErrUnauthorized) || c != nil {
		t.Errorf("%s: %v (claims %v), want ErrUnauthorized and no claims", what, err, c)
	}
}

func TestVerifyRefusesExpiredAndLongLived(t *testing.T) {
	refused(t, "expired a minute ago", mint(t, ScopeAgent, -time.Minute))
	refused(t, "expired past the leeway", mint(t, ScopeAgent, -5*time.Second))
	refused(t, "lifetime over MaxTokenTTL", mint(t, ScopeAgent, MaxTokenTTL+time.Minute))
	if _, err := Verify(secret, mint(t, ScopeAgent, MaxTokenTTL), user, session); err != nil {
		t.Errorf("a token of exactly MaxTokenTTL: %v", err)
	}

	c := claims()
	c.ExpiresAt = nil
	refused(t, "no exp", sign(t, jwt.SigningMethodHS256, secret, c))
	c = claims()
	c.IssuedAt = nil
	refused(t, "no iat (its lifetime is unknown)", sign(t, jwt.SigningMethodHS256, secret, c))
	c = claims()
	c.IssuedAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
	c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour + time.Minute))
	refused(t, "issued in the future", sign(t, jwt.SigningMethodHS256, secret, c))
	c = claims()
	c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Minute))
	refused(t, "not valid yet", sign(t, jwt.SigningMethodHS256, secret, c))
}

func TestVerifyRefusesWrongSecretAndTampering(t *testing.T) {
	tok, err := Mint(other, user, session, ScopeAgent, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, "signed with another secret", tok)

	// The payload rewritten to another user, the signature kept.
	good := mint(t, ScopeOperator, time.Minute)
	parts := strings.Split(good, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	m["sub"] = "mallory"
	b, _ := json.Marshal(m)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	if _, err := Verify(secret, strings.Join(parts, "."), "mallory", session); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("a rewritten payload: %v, want ErrUnauthorized", err)
	}
	parts = strings.Split(good, ".")
	refused(t, "no signature", parts[0]+"."+parts[1]+".")
	refused(t, "not a JWT", "not-a-token")
	refused(t, "empty", "")
}

// A token is accepted only as Mint wrote it: the same bytes encoded
// another way (a line break, the signature's unused bits) are refused.
func TestVerifyRefusesMalleatedTokens(t *testing.T) {
	tok := mint(t, ScopeAgent, time.Minute)
	for _, m := range malleated(tok) {
		refused(t, "malleated", m)
	}
	if _, err := Verify(secret, tok, user, session); err != nil {
		t.Fatal(err)
	}
}

// malleated returns tok written differently with the same bytes: a line
// break in the signature (base64 decoders skip them), other unused bits in
// its last character, padding.
func malleated(tok string) []string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	out := []string{tok + "\n", tok[:len(tok)-4] + "\r\n" + tok[len(tok)-4:], tok + "="}
	if i := strings.IndexByte(alphabet, tok[len(tok)-1]); i >= 0 {
		for j := i &^ 3; j < i&^3+4; j++ {
			if j != i {
				out = append(out, tok[:len(tok)-1]+alphabet[j:j+1])
			}
		}
	}
	return out
}

func TestVerifyRefusesForgedAlgorithms(t *testing.T) {
	c := claims()
	refused(t, "alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, c))
	refused(t, "HS384 with the right secret", sign(t, jwt.SigningMethodHS384, secret, c))
	refused(t, "HS512 with the right secret", sign(t, jwt.SigningMethodHS512, secret, c))

	// A header that says HS256 over a body signed with HS512: the
	// signature does not verify.
	hs512 := strings.Split(sign(t, jwt.SigningMethodHS512, secret, c), ".")
	hs256 := strings.Split(sign(t, jwt.SigningMethodHS256, secret, c), ".")
	refused(t, "HS256 header, HS512 signature", hs256[0]+"."+hs512[1]+"."+hs512[2])
}

func TestVerifyRefusesOtherIssuerAudienceUserSessionScope(t *testing.T) {
	c := claims()
	c.Issuer = "someone-else"
	refused(t, "issuer", sign(t, jwt.SigningMethodHS256, secret, c))
	c = claims()
	c.Audience = jwt.ClaimStrings{"another-service"}
	refused(t, "audience", sign(t, jwt.SigningMethodHS256, secret, c))
	c = claims()
	c.Audience = nil
	refused(t, "no audience", sign(t, jwt.SigningMethodHS256, secret, c))

	tok := mint(t, ScopeAgent, time.Minute)
	if _, err := Verify(secret, tok, "bob", session); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("another user: %v", err)
	}
	if _, err := Verify(secret, tok, user, "s-2"); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("another session: %v", err)
	}
	for _, scope := range []string{"admin", "Agent", "operator "} {
		refused(t, "scope "+scope, mint(t, scope, time.Minute))
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"a", "A", "0", "alice", "s-1", "a_b-c", "9" + strings.Repeat("x", 63)} {
		if err := CheckID("user_id", id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", "-a", "_a", "a.b", "a b", "a/b", "../a", "é", "a\n", "\na", "a\x00", strings.Repeat("x", 65)} {
		err := CheckID("session_id", id)
		if !errors.Is(err, ErrBadID) {
			t.Errorf("%q: %v, want ErrBadID", id, err)
		} else if !strings.Contains(err.Error(), "session_id") {
			t.Errorf("%q: the error does not name the kind: %v", id, err)
		}
	}
}

func TestCheckToolName(t *testing.T) {
	for _, name := range []string{"a", "Z", "word_count", "f2", "a" + strings.Repeat("_", 63)} {
		if err := CheckToolName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	for _, name := range []string{"", "2f", "_a", "a-b", "a.b", "a b", "é", "a\n", "a" + strings.Repeat("b", 64)} {
		if err := CheckToolName(name); err == nil {
			t.Errorf("%q: accepted", name)
		}
	}
}

// A library tool is served beside the runtime's own tools on one MCP
// server, where a tool of the same name would replace them: every tool the
// runtime serves is reserved.
func TestRuntimeToolsAreReserved(t *testing.T) {
	for _, name := range []string{
		ToolExecute, ToolInfo, ToolPutFile, ToolGetFile, ToolListFiles,
		toollib.ToolListTools, toollib.ToolPromote, toollib.ToolForget,
	} {
		err := CheckToolName(name)
		if err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("%q: %v, want it reserved", name, err)
		}
	}
}

func TestDisallowed(t *testing.T) {
	p := ToolPolicy{AllowedImports: []string{"json", "numpy"}}
	got := p.Disallowed([]string{"json", "numpy.linalg", "numpyx", "jsonschema", "os", "numpy"})
	if want := []string{"numpyx", "jsonschema", "os"}; !slices.Equal(got, want) {
		t.Errorf("Disallowed = %v, want %v", got, want)
	}
	if got := (ToolPolicy{}).Disallowed([]string{"json"}); !slices.Equal(got, []string{"json"}) {
		t.Errorf("an empty policy allows %v", got)
	}
	if got := p.Disallowed(nil); got != nil {
		t.Errorf("no imports: %v", got)
	}
}

// jsonFields returns the JSON names of t's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// schemaProps returns the property names of a schema.
func schemaProps(s map[string]any) []string {
	var out []string
	for k := range s["properties"].(map[string]any) {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The schemas advertised in tools/list name exactly the fields the runtime
// decodes, and the agent_id pattern is the one CheckID applies.
func TestSchemasMatchTheArguments(t *testing.T) {
	if got, want := schemaProps(ExecuteSchema), jsonFields(reflect.TypeFor[ExecuteArgs]()); !slices.Equal(got, want) {
		t.Errorf("ExecuteSchema properties %v, ExecuteArgs fields %v", got, want)
	}
	if ExecuteSchema["additionalProperties"] != false || !slices.Equal(ExecuteSchema["required"].([]string), []string{"code"}) {
		t.Error("ExecuteSchema: want additionalProperties false and code required")
	}
	pat := ExecuteSchema["properties"].(map[string]any)["agent_id"].(map[string]any)["pattern"]
	if pat != idPattern.String() {
		t.Errorf("agent_id pattern %v, CheckID's %v", pat, idPattern)
	}
	if got, want := schemaProps(FileSchema(true)), jsonFields(reflect.TypeFor[PutFileArgs]()); !slices.Equal(got, want) {
		t.Errorf("FileSchema(true) %v, PutFileArgs %v", got, want)
	}
	if got, want := schemaProps(FileSchema(false)), jsonFields(reflect.TypeFor[GetFileArgs]()); !slices.Equal(got, want) {
		t.Errorf("FileSchema(false) %v, GetFileArgs %v", got, want)
	}
	if got, want := schemaProps(FileSchema(false)), jsonFields(reflect.TypeFor[ListFilesArgs]()); !slices.Equal(got, want) {
		t.Errorf("FileSchema(false) %v, ListFilesArgs %v", got, want)
	}
}

// The hello line carries the secret and the policy through JSON unchanged.
func TestHelloRoundTrip(t *testing.T) {
	in := Hello{Secret: secret, Session: session, User: user, AllowedPackages: []string{"six"}, WheelDir: WheelMount, NativeDir: NativeMount}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Hello
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip: %+v, want %+v", out, in)
	}
}
