// Package shared is the plugin contract that the orqest-sandbox host and every
// backend plugin import: the Go Sandbox interface and its request/response
// types, the error classes that survive gRPC, the go-plugin handshake and
// plugin set, the gRPC adapters, and Serve for plugin authors.
//
// Backend authors implement Sandbox and call Serve from their main package.
// The generated protobuf code in shared/proto is the wire format only; it
// never appears in this package's exported API.
package shared

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// APIVersion is the version of the Sandbox contract this package speaks. It is
// the go-plugin protocol version negotiated in the handshake (see
// VersionedPlugins) and is reported by Info.
const APIVersion = 1

// Sandbox is the interface every isolation tier implements. It is the
// two-stage contract: Validate (static checks, runs nothing) then Execute.
//
// Implementations must be safe for concurrent use. Execute never returns a Go
// error for a failure of the user's code: those land in the ExecutionResult.
// A Go error is reserved for infrastructure failure and should wrap one of the
// error classes in this package (ErrUnavailable, ErrInvalidArgument, ...).
type Sandbox interface {
	// Info describes the backend: name, tier, version, API versions,
	// capabilities really in force, and the schema of its config block.
	Info(ctx context.Context, req InfoRequest) (InfoResponse, error)
	// Configure hands the backend its policy-level settings (the decoded
	// `config {}` block of its sandbox and the `unsafe` flag). The host calls
	// it once after launch, before any other call but Info.
	Configure(ctx context.Context, req ConfigureRequest) (ConfigureResponse, error)
	// Validate runs the static checks on code and reports every finding.
	// An empty Findings list means the code is accepted.
	Validate(ctx context.Context, req ValidateRequest) (ValidateResponse, error)
	// Execute validates and runs code (the body of a function receiving
	// `args`) and returns its result.
	Execute(ctx context.Context, req ExecuteRequest) (ExecuteResponse, error)
	// Open starts a session (a container for tier 2). Backends without
	// sessions embed NoSessions, which returns ErrNotSupported.
	Open(ctx context.Context, req OpenRequest) (OpenResponse, error)
	// Close ends a session and releases everything it held.
	Close(ctx context.Context, req CloseRequest) (CloseResponse, error)
}

// Capability names a property a backend declares it enforces. Info reports
// only the capabilities really in force on this machine.
type Capability string

// Capabilities a backend may declare.
const (
	CapMemoryLimit         Capability = "memory_limit"
	CapCPULimit            Capability = "cpu_limit"
	CapWallClockTimeout    Capability = "wall_clock_timeout"
	CapProcessIsolation    Capability = "process_isolation"
	CapNetworkIsolation    Capability = "network_isolation"
	CapFilesystemIsolation Capability = "filesystem_isolation"
	CapSessions            Capability = "sessions"
	CapFreshProcess        Capability = "fresh_process_per_execution"
	CapOutputLimit         Capability = "output_limit"
	// CapKernelBoundary: user code does not talk to the host kernel; its
	// system calls are served by a kernel of the sandbox's own (gVisor's
	// Sentry, a microVM's guest kernel); the host kernel sees only that
	// kernel's own, narrower set of calls.
	CapKernelBoundary Capability = "kernel_boundary"
	// CapToolLibrary: sessions keep a per-user tool library with promotion
	// policies (the backend's config declares how; the docker plugin's `promotion {}` block; see SessionTools).
	CapToolLibrary Capability = "tool_library"
	// CapDependencies: the backend installs ExecuteRequest.Dependencies
	// (from the policy's allowed_packages only). The host refuses
	// dependencies on a backend without it (ErrNotSupported).
	CapDependencies Capability = "dependencies"
	// CapClasses: the backend accepts and runs class statements
	// (ConfigureRequest.Classes is on and the backend honours it).
	CapClasses Capability = "classes"
	// CapStatefulSessions: the backend runs ExecuteRequest.Stateful calls
	// in a long-lived interpreter per (session, agent) whose globals
	// persist across calls. The host refuses Stateful on a backend without
	// it (ErrNotSupported).
	CapStatefulSessions Capability = "stateful_sessions"
	// CapFiles: sessions have a writable workspace directory the backend
	// serves through FileStore (upload, download, list), and an
	// execution's new or changed workspace files (and the matplotlib
	// figures it leaves open) come back as ExecutionResult.Artifacts. The
	// host refuses file calls on a backend without it (ErrNotSupported).
	CapFiles Capability = "files"
	// CapStreaming: the backend implements Streamer: a call's stdout and
	// stderr reach the caller as the code writes them, before the result.
	CapStreaming Capability = "streaming"
	// CapPause: the backend implements SessionPauser: a session can be
	// paused (it then holds no CPU and no memory: no process of it runs)
	// and resumed later under the same id, from state the backend keeps on
	// disk, also across a restart of the plugin and the host. Without
	// CapPauseMemory what comes back is the session's workspace and the
	// stateful interpreters' picklable globals; ResumeResponse lists what
	// was not kept. The host refuses Pause and Resume on a backend without
	// it (ErrNotSupported).
	CapPause Capability = "pause"
	// CapPauseMemory: a paused session comes back with its memory, every
	// process of it as it was (a checkpoint of the whole sandbox, gVisor's
	// `runsc checkpoint`): every global of every interpreter, the
	// workspace, open files. Declared together with CapPause.
	CapPauseMemory Capability = "pause_memory"
	// CapEgress: the backend enforces ConfigureRequest.Egress: a session's
	// only route out is an egress proxy outside the session that lets
	// through what the policy allows, and the session's kernel network
	// lets nothing bypass it. The host refuses a sandbox with a `network
	// {}` block on a backend without it.
	CapEgress Capability = "egress"
)

// Capabilities that name one sealing layer of the Python runner each; a
// backend that runs the runner (tiers 1 and 3) declares one only when its
// layer is in force on this machine (runner.LayerCapability maps them).
const (
	CapSeccomp          Capability = "seccomp"
	CapNoNewPrivs       Capability = "no_new_privs"
	CapUserNamespace    Capability = "user_namespace"
	CapNetworkNamespace Capability = "network_namespace"
	CapLandlockFS       Capability = "landlock_filesystem"
	CapLandlockNet      Capability = "landlock_network"
	CapLandlockScope    Capability = "landlock_scope"
	CapUnprivilegedUID  Capability = "unprivileged_uid"
	// CapSeparateUID: user code runs as a kernel uid that is not the
	// plugin's (65534 under a root plugin, a subordinate uid otherwise), so
	// file permissions protect the plugin account's files from it.
	CapSeparateUID Capability = "separate_uid"
	// CapEmptyEnvironment: user code starts with an empty environment.
	CapEmptyEnvironment Capability = "empty_environment"
)

// InfoRequest asks a backend to describe itself.
type InfoRequest struct{}

// InfoResponse describes a backend.
type InfoResponse struct {
	Name         string       // short name, e.g. "subprocess"
	Tier         int          // isolation tier, 0..3
	Version      string       // backend version, semver
	APIVersions  []int        // Sandbox contract versions the backend speaks
	Capabilities []Capability // properties really enforced here
	ConfigSchema []ConfigAttribute
	Description  string
}

// Has reports whether the backend declared capability c.
func (i InfoResponse) Has(c Capability) bool {
	for _, x := range i.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// ConfigAttribute is one attribute of a backend's `config {}` block, or a
// nested block in it. The host decodes the block against this schema so that
// an unknown or mistyped attribute is an HCL diagnostic with a source range.
type ConfigAttribute struct {
	Name string
	// Type is an HCL type expression ("string", "number", "bool",
	// "list(string)", ...), or ConfigBlock: a nested block (at most one)
	// whose attributes are Attributes, decoded into a JSON object under
	// Name.
	Type        string
	Required    bool
	Description string
	// Attributes are a ConfigBlock's attributes.
	Attributes []ConfigAttribute
}

// ConfigBlock is the Type of a ConfigAttribute that is a nested block.
const ConfigBlock = "block"

// ConfigureRequest carries policy-level settings to a backend.
type ConfigureRequest struct {
	// Config is the backend's `config {}` block decoded to a JSON object
	// according to its ConfigSchema. Empty when the block is absent.
	Config json.RawMessage
	// Unsafe is true when the operator explicitly opted in to a backend
	// without isolation (`unsafe = true`).
	Unsafe bool
	// AllowedPackages is the policy's allowed_packages: the only packages an
	// ExecuteRequest may name in Dependencies. A backend that installs
	// dependencies must refuse any other (fail closed); one that does not
	// install dependencies refuses every non-empty Dependencies.
	AllowedPackages []string
	// Classes is the policy's `classes`: the body may define classes
	// (class statements, dataclasses, user exception classes). The host
	// sends true unless the sandbox block says classes = false (tier 0
	// included: every tier runs the C class guard). A
	// backend that honours it declares CapClasses while it is on.
	Classes bool
	// AllowedImports is the policy's allowed_imports. A session backend's
	// interpreters (a stateful session's and the per-call zygote) import
	// them before the session's first call, so a body that imports them
	// finds them loaded; every call still names its own allowlist.
	AllowedImports []string
	// Stateful is the sandbox's `stateful`: its session calls are stateful
	// by default, so a session backend may start the stateful interpreter
	// before the first call.
	Stateful bool
	// Egress is the sandbox's `network {}` block (nil without one: no
	// network at all). Only a backend with CapEgress is handed one.
	Egress *EgressPolicy
}

// ConfigureResponse is returned by Configure.
type ConfigureResponse struct{}

// ValidateRequest asks for static checks of Code.
type ValidateRequest struct {
	Code           string
	AllowedImports []string
}

// ValidateResponse lists every finding. No findings means accepted.
type ValidateResponse struct {
	Findings []Finding
}

// Err returns a *ValidationError when the response has findings, else nil.
func (r ValidateResponse) Err() error {
	if len(r.Findings) == 0 {
		return nil
	}
	return &ValidationError{Findings: r.Findings}
}

// Finding is one rejection by the validator: which rule, why, where, and the
// offending text. Line and Column are 1-based; Column counts characters.
type Finding struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Snippet string `json:"snippet,omitempty"`
}

// String renders a finding as "line:col: rule: message (snippet)".
func (f Finding) String() string {
	s := fmt.Sprintf("%d:%d: %s: %s", f.Line, f.Column, f.Rule, f.Message)
	if f.Snippet != "" {
		s += fmt.Sprintf(" (%q)", f.Snippet)
	}
	return s
}

// ExecuteRequest asks a backend to run Code, the body of a function that
// receives `args` and returns a JSON-serialisable value.
type ExecuteRequest struct {
	Code           string
	Args           json.RawMessage // a JSON object; empty means {}
	AllowedImports []string
	// Timeout, MemoryMB and MaxOutputBytes are the call's limits: the wall
	// clock, the address-space cap and the cap of output, stdout and
	// stderr each. Prepare resolves them; 0 means the default. The host
	// sends them resolved, so 0 reaches a backend only from a direct call.
	Timeout        time.Duration
	MemoryMB       int
	MaxOutputBytes int
	SessionID      string // session from Open; empty for sessionless backends
	UserID         string // the framework-issued user, for session tiers
	AgentID        string // per-agent environment inside a session
	ToolName       string // names the invocation for a tool library
	// Dependencies are packages (PEP 503 names, optionally "name==version")
	// to install into the agent's environment before the code runs. Each
	// must be in the policy's allowed_packages (ConfigureRequest.
	// AllowedPackages); the host refuses any other with ErrPermissionDenied
	// before calling the plugin. The code still imports a dependency only if
	// it is also in AllowedImports.
	Dependencies []string
	// Stateful runs the call in the session's long-lived interpreter of
	// AgentID (a notebook): the top-level names a stateful call binds are
	// there for the next stateful call of the same (session, agent), and
	// nothing else sees them. Limits and validation hold per call; a call
	// killed by its limits kills that interpreter (the result says
	// StateLost) and the next stateful call starts clean. It needs a
	// SessionID (else ErrInvalidArgument) and a backend that declares
	// CapStatefulSessions (else ErrNotSupported). False (the default):
	// a fresh process, whatever earlier calls did.
	Stateful bool
	// Stateless asks for a fresh process even where the sandbox makes its
	// session calls stateful by default (`stateful = true` in its block):
	// the per-call choice wins over the default. The host resolves it
	// before the plugin is called (a plugin only sees Stateful); Stateful
	// and Stateless together are ErrInvalidArgument.
	Stateless bool
	// Verdict, when set, is the host's acceptance of Code: the host's Go
	// validator (package validator) found nothing in it under the rules
	// table and the options the verdict names. A backend whose own static
	// checks would be the same check of the same body (the same code
	// hash, rules version and options digest) may skip them and run the
	// body; when any part differs, or Verdict is nil, it validates as it
	// always did. It only spares the second run of the Go validator: the
	// checks inside the interpreter (the runner's guards, the audit hook)
	// run regardless. The host clears a caller's Verdict and sets its own,
	// so a plugin, which only its host can reach (go-plugin over mTLS),
	// trusts its host and nobody else; a backend that ignores the field is
	// still correct.
	Verdict *Verdict
}

// Verdict binds the host's acceptance of a body to everything the
// acceptance depended on (see ExecuteRequest.Verdict). The validator
// makes and checks verdicts (validator.Validator.Accept and CheckTrusting);
// a verdict that differs in any field from the one the backend would
// have made for the same request is not trusted.
type Verdict struct {
	// CodeSHA256 is the SHA-256 of ExecuteRequest.Code as validated.
	CodeSHA256 [32]byte
	// Rules is the version of the rules table the validator read
	// (rules.Version: a hash of the embedded table).
	Rules string
	// Options is the digest of the validator's options for this call: its
	// limits, the import allowlist and the language features
	// (validator.Options.Digest).
	Options string
}

// ExecuteResponse carries the result of one execution.
type ExecuteResponse struct {
	Result ExecutionResult
	// Events are what the backend reports for the host's event bus during
	// this call (e.g. "tool.promotion_pending", "tool.promoted" from a
	// per-user tool library). The host publishes them on its Bus, stamped
	// with the sandbox's name.
	Events []Event
}

// Event is something a backend reports for the host's event bus. Type is a
// dotted event name ("tool.promoted"); Payload is a JSON object.
type Event struct {
	Type    string
	Payload json.RawMessage
}

// Streamer is an optional interface of backends that stream a call's
// output (CapStreaming). ExecuteStream runs req as Execute does and calls
// send with each piece of stdout and stderr as the code writes it, in the
// order the backend read it, before it returns the result. What is sent
// is within the call's output cap: the result's Stdout and Stderr hold the
// same bytes (so a caller may ignore the chunks), also when the call timed
// out or was killed. An error from send cancels the call. A backend
// without it answers codes.Unimplemented over gRPC, which the host sees
// as ErrNotSupported.
type Streamer interface {
	ExecuteStream(ctx context.Context, req ExecuteRequest, send func(OutputChunk) error) (ExecuteResponse, error)
}

// SessionToolStreamer is optional for a backend with SessionTools and
// Streamer: CallToolStream is CallTool that gives send the stdout and
// stderr of the code the tool runs (a promoted tool of the library) as it
// writes them, before it returns the response; a tool that runs no code
// sends nothing. An error from send cancels the call. A backend without
// it answers codes.Unimplemented over gRPC: the host sees ErrNotSupported
// together with ErrNotRun, and calls CallTool instead.
type SessionToolStreamer interface {
	CallToolStream(ctx context.Context, req CallToolRequest, send func(OutputChunk) error) (CallToolResponse, error)
}

// Streams an OutputChunk comes from.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// MetaStream is the `_meta` key of the MCP progress notifications that
// carry a call's output while it runs, wherever orqest speaks MCP (mcp
// serve's run_python, the tier-2 runtime's execute_python): its value is
// StreamStdout or StreamStderr, the notification's message is the text and
// its progress the bytes sent so far.
const MetaStream = "orqest/stream"

// OutputChunk is a piece of a call's output: Stream is StreamStdout or
// StreamStderr, Data the bytes as read (not cut at line or UTF-8
// boundaries).
type OutputChunk struct {
	Stream string
	Data   []byte
}

// SessionTools is an optional interface of session backends whose sessions
// serve more tools than execute (tier 2: the per-user tool library's
// list_tools, promote_tool, forget_tool). A backend without it answers
// codes.Unimplemented over gRPC, which the host sees as ErrNotSupported.
//
// The backend never stamps a scope above "agent" on its own: a caller that
// needs operator scope mints an operator token with MintToken (the host's
// MintOperatorToken) and passes it to CallTool, which forwards it as is.
type SessionTools interface {
	// MintToken returns a bearer token for a session with Scope "agent" or
	// "operator", valid for TTL (0 means the backend's default).
	MintToken(ctx context.Context, req MintTokenRequest) (MintTokenResponse, error)
	// CallTool calls a tool of the session with the caller's Token. A
	// refused token is ErrPermissionDenied; a tool's own failure is an
	// error of its class.
	CallTool(ctx context.Context, req CallToolRequest) (CallToolResponse, error)
}

// Token scopes of MintTokenRequest.
const (
	ScopeAgent    = "agent"
	ScopeOperator = "operator"
)

// MintTokenRequest asks for a session token.
type MintTokenRequest struct {
	SessionID string
	Scope     string
	TTL       time.Duration
}

// MintTokenResponse carries a token.
type MintTokenResponse struct {
	Token     string
	ExpiresAt time.Time
}

// CallToolRequest calls tool Tool of session SessionID with Arguments (a
// JSON object) and the bearer Token.
type CallToolRequest struct {
	SessionID string
	Tool      string
	Arguments json.RawMessage
	Token     string
	// Policy, when set, is the policy in force for a call of a promoted
	// tool (the host sets it from the sandbox's policy at the time of the
	// call, not the one the tool was promoted under). A backend runs the
	// tool only within it: an import the tool's code was promoted with
	// that AllowedImports does not list refuses the call, not run, with an
	// error wrapping ErrPermissionDenied; the limits replace the backend's
	// defaults.
	Policy *ToolPolicy
}

// ToolPolicy is the part of a policy a backend needs to run a promoted
// tool: the modules it may import and its limits.
type ToolPolicy struct {
	AllowedImports []string
	Timeout        time.Duration
	MemoryMB       int
	MaxOutputBytes int
}

// CallToolResponse carries the tool's result (JSON) and the events it
// reported for the host's bus.
type CallToolResponse struct {
	Result json.RawMessage
	Events []Event
}

// FileStore is an optional interface of session backends with a writable
// per-session workspace (shared.CapFiles): the only directory the user's
// code may write, bounded by a size quota. Paths are relative to it,
// slash-separated and clean (CheckFilePath): no "..", no absolute path, no
// empty or "." element; the backend never follows a symbolic link in them.
// A backend without it answers codes.Unimplemented over gRPC, which the
// host sees as ErrNotSupported.
type FileStore interface {
	// PutFile writes Data to Path in the session's workspace, replacing
	// a file there (creating parent directories). Data over the backend's
	// per-file cap, or a workspace over its quota, is an error wrapping
	// ErrInvalidArgument (a *FieldError on "data") or ErrFailedPrecondition
	// (the quota).
	PutFile(ctx context.Context, req PutFileRequest) (PutFileResponse, error)
	// GetFile reads the file at Path (ErrNotFound when there is none; a
	// file over the per-file cap is ErrInvalidArgument on "path").
	GetFile(ctx context.Context, req GetFileRequest) (GetFileResponse, error)
	// ListFiles lists the regular files of the workspace (under Path when
	// set), recursively, sorted by name.
	ListFiles(ctx context.Context, req ListFilesRequest) (ListFilesResponse, error)
}

// DefaultMaxFileBytes is the per-file cap of FileStore uploads and
// downloads and of one artifact's bytes when a backend sets none.
const DefaultMaxFileBytes = 8 << 20

// PutFileRequest uploads a file into a session's workspace.
type PutFileRequest struct {
	SessionID string
	Path      string
	Data      []byte
}

// PutFileResponse reports the stored file.
type PutFileResponse struct {
	File FileInfo
}

// GetFileRequest downloads a file of a session's workspace.
type GetFileRequest struct {
	SessionID string
	Path      string
}

// GetFileResponse carries a file's bytes.
type GetFileResponse struct {
	File FileInfo
	Data []byte
}

// ListFilesRequest lists a session's workspace (the directory Path; empty
// is the whole workspace).
type ListFilesRequest struct {
	SessionID string
	Path      string
}

// ListFilesResponse lists files.
type ListFilesResponse struct {
	Files []FileInfo
}

// FileInfo describes a file of a workspace.
type FileInfo struct {
	Name    string    `json:"name"` // relative to the workspace, slash-separated
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // permission bits
	ModTime time.Time `json:"mod_time"`
}

// ErrorKind classifies why an execution did not succeed.
type ErrorKind string

// Error kinds of an ExecutionResult.
const (
	KindNone            ErrorKind = ""
	KindValidation      ErrorKind = "validation"
	KindTimeout         ErrorKind = "timeout"
	KindMemory          ErrorKind = "memory"
	KindRuntime         ErrorKind = "runtime"
	KindNotSerializable ErrorKind = "not_serializable"
	KindOutputLimit     ErrorKind = "output_limit"
	KindInvalidArgs     ErrorKind = "invalid_args"
	// KindKilled: the process running the code was killed by a signal that
	// no limit of the sandbox explains (a SIGKILL without a trace of a
	// memory or CPU limit: no OOM kill counted in its cgroup, CPU time left;
	// any other fatal signal): it came from outside the sandbox, an
	// operator or another process. A backend that can tell says memory or
	// timeout instead whenever the evidence is there.
	KindKilled ErrorKind = "killed"
)

// The default limits of one execution: what the host's built-in policy
// and every backend apply when neither the policy nor the request sets a
// limit (a five-second wall clock, 128 MB, 1 MiB of output, 64 KiB of
// code, 1 MiB of args). Prepare is where they are applied.
// DefaultMaxCodeBytes is also the rules table's limits.max_code_bytes,
// which the in-child checker enforces (validator's tests keep the two
// equal).
const (
	DefaultTimeout        = 5 * time.Second
	DefaultMemoryMB       = 128
	DefaultMaxOutputBytes = 1 << 20
	DefaultMaxCodeBytes   = 64 << 10
	DefaultMaxArgsBytes   = 1 << 20
)

// Limits records the limits that applied to an execution (see
// Resolved.Limits).
type Limits struct {
	TimeoutMS      int64 `json:"timeout_ms"`
	MemoryMB       int   `json:"memory_mb"`
	MaxOutputBytes int   `json:"max_output_bytes"`
}

// ExecutionResult is the outcome of running user code. It is the same on
// every tier and is what `orqest-sandbox run --json` prints.
type ExecutionResult struct {
	Success         bool            `json:"success"`
	Output          json.RawMessage `json:"output"`
	Error           string          `json:"error,omitempty"`
	ErrorKind       ErrorKind       `json:"error_kind,omitempty"`
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	StderrTruncated bool            `json:"stderr_truncated"`
	DurationMS      float64         `json:"duration_ms"`
	Limits          Limits          `json:"limits"`
	Findings        []Finding       `json:"findings,omitempty"`
	// StateLost reports that a stateful call's interpreter was killed
	// (timeout, memory, a crash): the globals earlier calls left are gone
	// and the next stateful call of that agent starts clean.
	// The host sets it too when the call ran in a session it had to open
	// again under the same id (the plugin was relaunched, the backend lost
	// the session, or the host had closed it for idleness, lifetime or
	// capacity): the session's workspace and interpreters are new.
	StateLost bool `json:"state_lost,omitempty"`
	// Artifacts are the files of the session's workspace the call created
	// or changed, and the matplotlib figures it left open (saved as PNG),
	// on backends with CapFiles. Their bytes come along up to the
	// backend's caps; a larger one has Omitted set and is read with
	// FileStore.GetFile.
	Artifacts []Artifact `json:"artifacts,omitempty"`
}

// Artifact is a file an execution left in its session's workspace.
type Artifact struct {
	// Name is the file's path relative to the workspace (slash-separated):
	// the Path of a GetFileRequest that downloads it.
	Name     string `json:"name"`
	MIMEType string `json:"mime_type"`
	Size     int64  `json:"size"`
	// Data are the file's bytes; nil when Omitted.
	Data []byte `json:"data,omitempty"`
	// Omitted: the bytes were left out because the file is over the
	// per-artifact cap or the call's artifacts together are over the
	// total cap. The file is still in the workspace: download it by Name.
	Omitted bool `json:"omitted,omitempty"`
}

// OpenRequest starts a session for a user.
type OpenRequest struct {
	UserID    string
	SessionID string
}

// OpenResponse identifies the opened session.
type OpenResponse struct {
	SessionID string
}

// CloseRequest ends a session.
type CloseRequest struct {
	SessionID string
}

// CloseResponse is returned by Close.
type CloseResponse struct{}

// NoSessions can be embedded by backends that have no sessions: Open and
// Close return ErrNotSupported.
type NoSessions struct{}

// Open returns ErrNotSupported.
func (NoSessions) Open(context.Context, OpenRequest) (OpenResponse, error) {
	return OpenResponse{}, fmt.Errorf("sessions: %w", ErrNotSupported)
}

// Close returns ErrNotSupported.
func (NoSessions) Close(context.Context, CloseRequest) (CloseResponse, error) {
	return CloseResponse{}, fmt.Errorf("sessions: %w", ErrNotSupported)
}

// SessionPauser is an optional interface of session backends that declare
// CapPause. A paused session holds no CPU and no memory; its state is on
// disk, keyed by its id, and outlives the plugin's process. Every call but
// Resume and Close on a paused session is refused with ErrSessionPaused;
// Close of a paused session removes its saved state. A backend without it
// answers codes.Unimplemented over gRPC, which the host sees as
// ErrNotSupported.
type SessionPauser interface {
	// Pause saves session SessionID and ends everything of it that runs.
	// A session with a call in flight is refused with ErrSessionBusy and
	// keeps running untouched; a pause that fails for any other reason
	// leaves the session as it was whenever the backend can (it says so
	// in the error otherwise), never half paused.
	Pause(ctx context.Context, req PauseRequest) (PauseResponse, error)
	// Resume brings back session SessionID paused by this backend, or by
	// an earlier process of it: its id, user and tokens' secret are those
	// it had. A session that is not paused is ErrSessionNotFound (never
	// paused, or closed) or ErrFailedPrecondition (open and running). A
	// failed resume keeps the saved state: it can be tried again.
	Resume(ctx context.Context, req ResumeRequest) (ResumeResponse, error)
}

// PauseRequest pauses a session.
type PauseRequest struct {
	SessionID string
}

// PauseResponse reports what a pause saved.
type PauseResponse struct {
	// Memory: the session's memory was saved (CapPauseMemory): it comes
	// back with every process as it was.
	Memory bool `json:"memory"`
	// Kept are the names of the stateful interpreters' globals saved, by
	// agent ("agent/name"), when Memory is false.
	Kept []string `json:"kept,omitempty"`
	// NotKept are the globals that could not be saved (not picklable:
	// a generator, an open file, a lambda), by agent ("agent/name"),
	// when Memory is false. They are gone after Resume.
	NotKept []string `json:"not_kept,omitempty"`
	// Bytes is the size of the saved state on disk.
	Bytes int64 `json:"bytes"`
}

// ResumeRequest resumes a paused session.
type ResumeRequest struct {
	SessionID string
}

// ResumeResponse describes the resumed session.
type ResumeResponse struct {
	SessionID string `json:"session_id"`
	// UserID is the session's user (a host that restarted since the pause
	// learns it here).
	UserID string `json:"user_id"`
	// Memory: the session came back with its memory (every global kept).
	Memory bool `json:"memory"`
	// StateLost: some of the session's state did not come back (without
	// Memory: its interpreters are new; NotKept names the globals lost).
	StateLost bool `json:"state_lost"`
	// Kept and NotKept are as in PauseResponse.
	Kept    []string `json:"kept,omitempty"`
	NotKept []string `json:"not_kept,omitempty"`
}
