// Package rtproto is the private protocol between a session plugin (host
// side: tier 2, plugins/docker, and tier 3, plugins/gvisor) and the agent
// runtime inside the container or sandbox: the hello line that
// carries the per-session secret, the MCP tool names and argument shapes,
// the JWT claims and their HS256 minting and verification, and the
// identifier rule. Both sides import it so they cannot drift.
package rtproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

// Tool names served by the runtime.
const (
	// ToolExecute runs Python (agent scope).
	ToolExecute = "execute_python"
	// ToolInfo reports the runtime's version, interpreter and rules digest
	// (operator scope).
	ToolInfo = "runtime_info"
)

// Scopes a token may carry. A token without a scope is ScopeAgent (least
// privilege).
const (
	ScopeAgent    = "agent"
	ScopeOperator = "operator"
)

// Token issuer and audience: a token minted for anything else is refused.
const (
	Issuer   = "orqest-sandbox"
	Audience = "orqest-agent-runtime"
)

// MetaAuthorization is the `_meta` key that carries "Bearer <jwt>" on every
// tools/call over the stdio transport (stdio has no HTTP headers). Over the
// optional HTTP transport the Authorization header is used instead.
const MetaAuthorization = "authorization"

// MaxTokenTTL bounds the lifetime the runtime accepts for any token,
// whatever its exp says (a token minted with a long expiry is refused).
const MaxTokenTTL = 10 * time.Minute

// Hello is the first line the plugin writes to the container's stdin, before
// any MCP traffic. The secret therefore never appears in the container's
// environment, labels or `docker inspect`.
type Hello struct {
	Secret []byte `json:"secret"` // HMAC key for HS256, minted per Open
	// Session and User are what every token must name.
	Session string `json:"session"`
	User    string `json:"user"`
	// Promotion is the tool library's policy (nil: the defaults).
	Promotion *toollib.Promotion `json:"promotion,omitempty"`
	// AllowedPackages is the policy's allowed_packages: the only
	// distributions execute_python installs (dependencies); empty refuses
	// every dependency. WheelDir is where their wheels are (WheelMount when
	// the operator set wheel_dir; empty: none).
	AllowedPackages []string `json:"allowed_packages,omitempty"`
	WheelDir        string   `json:"wheel_dir,omitempty"`
	// NativeDir is where native (platform) wheels are installed: a
	// directory on a mount that allows executable mappings (NativeMount),
	// written by the runtime only. Empty: native wheels are refused
	// (/workspace is noexec).
	NativeDir string `json:"native_dir,omitempty"`
}

// NativeMount is the container's tmpfs for native wheels: exec allowed
// (unlike /workspace), owned by the runtime; the Python children read it
// (Landlock: read only).
const NativeMount = "/opt/orqest/native"

// WheelMount is where the operator's wheel_dir is mounted read-only in the
// container.
const WheelMount = "/opt/orqest/wheels"

// MinSecretBytes is the shortest secret the runtime accepts.
const MinSecretBytes = 32

// idPattern is the identifier rule for user_id, session_id and agent_id.
var idPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)

// ErrBadID is returned by CheckID.
var ErrBadID = errors.New("identifier must match ^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$")

// CheckID reports whether id is a valid user, session or agent identifier.
func CheckID(kind, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%s %q: %w", kind, id, ErrBadID)
	}
	return nil
}

// ExecuteArgs are the arguments of execute_python.
type ExecuteArgs struct {
	Code           string          `json:"code"`
	Args           json.RawMessage `json:"args,omitempty"`
	AllowedImports []string        `json:"allowed_imports,omitempty"`
	AgentID        string          `json:"agent_id,omitempty"`
	Dependencies   []string        `json:"dependencies,omitempty"`
	TimeoutS       float64         `json:"timeout,omitempty"` // seconds
	MemoryMB       int             `json:"memory,omitempty"`  // RLIMIT_AS of the child, MB
	MaxOutputBytes int             `json:"max_output_bytes,omitempty"`
	// ToolName names the invocation for the per-user tool library: the
	// runtime counts it per (tool_name, code hash) and promotes by policy.
	ToolName string `json:"tool_name,omitempty"`
	// Stateful runs the call in the agent's long-lived interpreter, whose
	// globals persist across stateful calls of this session
	// (shared.ExecuteRequest.Stateful).
	Stateful bool `json:"stateful,omitempty"`
}

// ExecuteSchema is the JSON Schema of ExecuteArgs advertised in tools/list.
var ExecuteSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"code":             map[string]any{"type": "string", "description": "body of a function that receives `args` and returns a JSON-serialisable value"},
		"args":             map[string]any{"type": "object"},
		"allowed_imports":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"agent_id":         map[string]any{"type": "string", "pattern": idPattern.String()},
		"dependencies":     map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"timeout":          map[string]any{"type": "number", "description": "wall clock, seconds"},
		"memory":           map[string]any{"type": "integer", "description": "address-space cap, MB"},
		"max_output_bytes": map[string]any{"type": "integer"},
		"tool_name":        map[string]any{"type": "string", "description": "names the invocation for the per-user tool library"},
		"stateful":         map[string]any{"type": "boolean", "description": "run in this agent's long-lived interpreter: top-level names persist across stateful calls of the session (a notebook); a call killed by its limits loses them (state_lost)"},
	},
	"required":             []string{"code"},
	"additionalProperties": false,
}

// InfoResult is the structured result of runtime_info.
type InfoResult struct {
	Version     string `json:"version"`
	Python      string `json:"python"`
	RulesSHA256 string `json:"rules_sha256"`
	UptimeMS    int64  `json:"uptime_ms"`
	// Sealing lists the kernel sealing layers in force for the Python
	// children (pyrunner layer names), SealingMissing the others with the
	// reason (both empty before the first probe).
	Sealing        []string          `json:"sealing,omitempty"`
	SealingMissing map[string]string `json:"sealing_missing,omitempty"`
}

// Claims are the JWT claims of a bearer token.
type Claims struct {
	Scope   string `json:"scope,omitempty"`
	Session string `json:"sid"`
	jwt.RegisteredClaims
}

// EffectiveScope returns the scope, defaulting to agent.
func (c *Claims) EffectiveScope() string {
	if c.Scope == "" {
		return ScopeAgent
	}
	return c.Scope
}

// Mint signs a token for user/session with scope, valid for ttl.
func Mint(secret []byte, user, session, scope string, ttl time.Duration) (string, error) {
	now := time.Now()
	c := Claims{
		Scope:   scope,
		Session: session,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   user,
			Audience:  jwt.ClaimStrings{Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now.Add(-5 * time.Second)),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// ErrUnauthorized wraps every token rejection.
var ErrUnauthorized = errors.New("unauthorized")

// Verify checks tok against secret: HS256 only (alg none and every other
// algorithm are refused), signature, issuer, audience, exp required and not
// past, lifetime at most MaxTokenTTL, and the token naming this user and
// session. It returns the claims. The token must be exactly what Mint
// writes: three segments of canonical base64url, so that no other string
// (a line break, different unused bits in the signature's last character)
// passes as the same token.
func Verify(secret []byte, tok, user, session string) (*Claims, error) {
	if !tokenChars(tok) {
		return nil, fmt.Errorf("%w: not three base64url segments", ErrUnauthorized)
	}
	var c Claims
	_, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return secret, nil },
		jwt.WithStrictDecoding(),
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(2*time.Second),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	if c.IssuedAt == nil || c.ExpiresAt.Sub(c.IssuedAt.Time) > MaxTokenTTL {
		return nil, fmt.Errorf("%w: token lifetime over %v", ErrUnauthorized, MaxTokenTTL)
	}
	if c.Subject != user || c.Session != session {
		return nil, fmt.Errorf("%w: token is for another user or session", ErrUnauthorized)
	}
	switch c.EffectiveScope() {
	case ScopeAgent, ScopeOperator:
	default:
		return nil, fmt.Errorf("%w: unknown scope %q", ErrUnauthorized, c.Scope)
	}
	return &c, nil
}

// tokenChars reports whether tok is three dot-separated segments of the
// base64url alphabet, without padding.
func tokenChars(tok string) bool {
	dots := 0
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case c == '.':
			dots++
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return dots == 2
}

// Tools of a session's workspace (agent scope): the directory FilesDir,
// the only one the Python children may write.
const (
	ToolPutFile   = "put_file"
	ToolGetFile   = "get_file"
	ToolListFiles = "list_files"
)

// FilesDir is the session's workspace in the container: a directory of the
// /workspace tmpfs (whose size is the quota) owned by the children's uid,
// mode 0700. Code finds it as the builtin `workspace`.
const FilesDir = "/workspace/files"

// PutFileArgs are the arguments of put_file (Data travels as base64).
type PutFileArgs struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

// GetFileArgs are the arguments of get_file.
type GetFileArgs struct {
	Path string `json:"path"`
}

// ListFilesArgs are the arguments of list_files (Path empty: the whole
// workspace).
type ListFilesArgs struct {
	Path string `json:"path,omitempty"`
}

// FileResult is the result of put_file (without Data) and get_file.
type FileResult struct {
	File shared.FileInfo `json:"file"`
	Data []byte          `json:"data,omitempty"`
}

// ListFilesResult is the result of list_files.
type ListFilesResult struct {
	Files []shared.FileInfo `json:"files"`
}

// FileSchema is the input schema of put_file, get_file and list_files.
func FileSchema(withData bool) map[string]any {
	props := map[string]any{"path": map[string]any{"type": "string", "description": "relative to the workspace, e.g. data.csv"}}
	if withData {
		props["data"] = map[string]any{"type": "string", "contentEncoding": "base64"}
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}
