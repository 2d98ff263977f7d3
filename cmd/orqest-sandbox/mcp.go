package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/internal/httpauth"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
	"github.com/orqest/sandbox/shared/toollib"
)

// The MCP server: `orqest-sandbox mcp serve` exposes a sandbox to an agent.
//
//	spawn_tool  {name, description, parameters, implementation, allowed_imports, timeout_s}
//	run_python  {code, args, allowed_imports, timeout_s}
//	<spawned>   the tool's declared parameters
//
// Every spawned tool becomes a first-class MCP tool (Server.AddTool, which
// sends notifications/tools/list_changed). Failures an agent can act on —
// bad arguments, a rejected implementation, user code that failed — are
// tool results with isError set and a message naming the field or the
// rule; protocol errors are kept for what the protocol defines (an unknown
// tool, a malformed request).

const (
	mcpSpawnTool = "spawn_tool"
	mcpRunPython = host.RunPythonToolName
	// mcpMaxTools bounds how many tools an agent may spawn on one server.
	mcpMaxTools = 256
	// mcpTokenEnv holds the bearer token of `mcp serve --http` when no
	// --token-file is given.
	mcpTokenEnv = "ORQEST_MCP_TOKEN"
)

func cmdMCP(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] != "serve" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(e.stdout, mcpServeSynopsis)
			return exitOK
		}
		fmt.Fprintf(e.stderr, "Usage: orqest-sandbox %s\n", mcpServeSynopsis)
		return exitError
	}
	return cmdMCPServe(ctx, e, args[1:])
}

const mcpServeSynopsis = "mcp serve [--config F] [--sandbox NAME] [--http ADDR] [--token-file F] [--jwt-key F [--jwt-audience A] [--jwt-issuer I]] [--tls-cert F --tls-key F] [--max-conns-per-ip N]"

// mcpHTTPFlags are the flags of `mcp serve --http`.
type mcpHTTPFlags struct {
	addr, tokenFile, jwtKey, jwtAudience, jwtIssuer, tlsCert, tlsKey string
	maxConnsPerIP                                                    int
}

func cmdMCPServe(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "mcp serve", mcpServeSynopsis+"\n\n"+
		"Serves MCP over stdio, or over Streamable HTTP at http(s)://ADDR/mcp with --http.\n"+
		"Over HTTP every client authenticates with a bearer token of its own: a line\n"+
		"\"NAME TOKEN\" of --token-file (one bare token: the client \"operator\"; else\n"+
		"$"+mcpTokenEnv+"), or a JWT verified with --jwt-key whose sub names the client.\n"+
		"Each client sees and calls only the tools it spawned, and runs as its own user.\n"+
		"The same tokens guard /metrics (Prometheus text); /healthz is open and answers\n"+
		"200 while the sandbox's plugin answers.")
	var hf mcpHTTPFlags
	config := fs.String("config", "", "policy file (default ./config.hcl, else the embedded default)")
	sandbox := fs.String("sandbox", "", "sandbox to serve (default: the policy's default sandbox)")
	fs.StringVar(&hf.addr, "http", "", "serve Streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio")
	fs.StringVar(&hf.tokenFile, "token-file", "", "clients' bearer tokens for --http, a `file` of lines NAME TOKEN (else $"+mcpTokenEnv+")")
	fs.StringVar(&hf.jwtKey, "jwt-key", "", "accept JWTs for --http verified with this `file`: a PEM public key (RSA, ECDSA, Ed25519) or an HMAC secret; sub names the client")
	fs.StringVar(&hf.jwtAudience, "jwt-audience", "", "with --jwt-key: the aud a token must carry")
	fs.StringVar(&hf.jwtIssuer, "jwt-issuer", "", "with --jwt-key: the iss a token must carry")
	fs.StringVar(&hf.tlsCert, "tls-cert", "", "serve HTTPS with this certificate `file` (PEM; with --tls-key)")
	fs.StringVar(&hf.tlsKey, "tls-key", "", "the private key `file` of --tls-cert (PEM)")
	fs.IntVar(&hf.maxConnsPerIP, "max-conns-per-ip", defaultMCPHTTPLimits.perAddr, "with --http: connections one client IP may hold open at once, before authentication; more are closed as they arrive (0: no limit; raise it behind a reverse proxy, whose address every client has)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "orqest-sandbox mcp serve: unexpected arguments %q\n", pos)
		return exitError
	}
	var verifier *httpauth.Verifier
	if hf.addr != "" {
		if verifier, err = mcpVerifier(hf); err != nil {
			fmt.Fprintf(e.stderr, "orqest-sandbox mcp serve: %v\n", err)
			return exitError
		}
		if (hf.tlsCert == "") != (hf.tlsKey == "") {
			fmt.Fprintln(e.stderr, "orqest-sandbox mcp serve: --tls-cert and --tls-key go together")
			return exitError
		}
		if hf.maxConnsPerIP < 0 {
			fmt.Fprintln(e.stderr, "orqest-sandbox mcp serve: --max-conns-per-ip must be 0 (no limit) or more")
			return exitError
		}
	} else if hf != (mcpHTTPFlags{maxConnsPerIP: defaultMCPHTTPLimits.perAddr}) || isFlagSet(fs, "max-conns-per-ip") {
		fmt.Fprintln(e.stderr, "orqest-sandbox mcp serve: --token-file, --jwt-*, --tls-*, --max-conns-per-ip only apply with --http")
		return exitError
	}

	h, sb, err := loadSandbox(ctx, *config, *sandbox)
	if err != nil {
		return reportErr(e, err)
	}
	defer h.Close()
	// Launch the plugin now, so a broken policy fails here and not in the
	// agent's first call.
	if err := sb.Start(ctx); err != nil {
		return reportErr(e, err)
	}
	if err := sb.CheckSharedServing(ctx); err != nil {
		return reportErr(e, err)
	}

	if hf.addr == "" {
		srv := newMCPServer(sb, h.Bus())
		t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
		if err := srv.server.Run(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			fmt.Fprintf(e.stderr, "orqest-sandbox mcp serve: %v\n", err)
			return exitError
		}
		return exitOK
	}
	clients, err := newMCPClients(ctx, sb, h.Bus())
	if err != nil {
		return reportErr(e, err)
	}
	clients.stderr = e.stderr
	defer clients.close(e)
	clients.limits.perAddr = hf.maxConnsPerIP
	ln, err := net.Listen("tcp", hf.addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "orqest-sandbox mcp serve: %v\n", err)
		return exitError
	}
	ln = limitPerAddr(ln, clients.limits.perAddr)
	// The server is this process: its Go runtime and process metrics join
	// the host's on /metrics.
	h.Registry().MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hs := newMCPHTTPServer(clients.httpHandler(verifier, h.MetricsHandler()), clients.limits)
	scheme := "http"
	if hf.tlsCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(e.stderr, "orqest-sandbox: MCP server for sandbox %q on %s://%s/mcp (bearer token required; /metrics too; /healthz open)\n", sb.Name(), scheme, ln.Addr())
	errc := make(chan error, 1)
	go func() {
		if hf.tlsCert != "" {
			errc <- hs.ServeTLS(ln, hf.tlsCert, hf.tlsKey)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		fmt.Fprintf(e.stderr, "orqest-sandbox mcp serve: %v\n", err)
		return exitError
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		return exitOK
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpVerifier builds the bearer-token check of --http: the clients'
// static tokens (--token-file, else $ORQEST_MCP_TOKEN as the one client
// "operator") and, with --jwt-key, JWTs. At least one must be given: the
// server never serves HTTP without authentication.
func mcpVerifier(hf mcpHTTPFlags) (*httpauth.Verifier, error) {
	var static map[string]string
	switch {
	case hf.tokenFile != "":
		b, err := os.ReadFile(hf.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		if static, err = httpauth.ParseTokenFile(b); err != nil {
			return nil, fmt.Errorf("--token-file %s: %w", hf.tokenFile, err)
		}
	case os.Getenv(mcpTokenEnv) != "":
		tok := strings.TrimSpace(os.Getenv(mcpTokenEnv))
		if len(tok) < httpauth.MinTokenLen || strings.ContainsAny(tok, " \t\r\n") {
			return nil, fmt.Errorf("$%s: the bearer token must be at least %d characters without whitespace (e.g. `openssl rand -hex 32`)", mcpTokenEnv, httpauth.MinTokenLen)
		}
		static = map[string]string{tok: httpauth.DefaultClient}
	}
	var key *httpauth.JWTKey
	if hf.jwtKey != "" {
		b, err := os.ReadFile(hf.jwtKey)
		if err != nil {
			return nil, fmt.Errorf("--jwt-key: %w", err)
		}
		k, err := httpauth.ParseJWTKey(b)
		if err != nil {
			return nil, fmt.Errorf("--jwt-key %s: %w", hf.jwtKey, err)
		}
		k.Audience, k.Issuer = hf.jwtAudience, hf.jwtIssuer
		key = &k
	} else if hf.jwtAudience != "" || hf.jwtIssuer != "" {
		return nil, errors.New("--jwt-audience and --jwt-issuer need --jwt-key")
	}
	if len(static) == 0 && key == nil {
		return nil, fmt.Errorf("--http requires authentication: give --token-file F (lines NAME TOKEN), set $%s, or --jwt-key F (refusing to serve HTTP without authentication)", mcpTokenEnv)
	}
	return httpauth.NewVerifier(static, key), nil
}

// mcpClients keeps one MCP server per authenticated client of --http: its
// own tool factory (the tools it spawned are listed to and callable by it
// alone), running as its own user (UserID = the client's identity), and on
// a session tier in a session of its own, opened at its first execution and
// closed when the server stops.
type mcpClients struct {
	sb       *host.Sandbox
	bus      *host.Bus
	sessions bool      // the sandbox has sessions: one per client
	library  bool      // and a tool library: its promoted tools are listed
	files    bool      // and a workspace: put_file, get_file, list_files
	stderr   io.Writer // where problems no call reports go (nil: nowhere)
	// maxPerUser is the host's max_sessions_per_user: the most sessions
	// one client keeps open (list_sessions reports it).
	maxPerUser int
	// limits bound the HTTP connections: the timeouts httpHandler applies,
	// the per-address cap of the listener (defaultMCPHTTPLimits, with
	// --max-conns-per-ip; a test sets others).
	limits mcpHTTPLimits

	mu   sync.Mutex
	byID map[string]*mcpClient
}

type mcpClient struct {
	srv *mcpServer

	mu      sync.Mutex
	session string            // the default session, "" until opened
	named   map[string]string // session name -> the backend's session id
}

func newMCPClients(ctx context.Context, sb *host.Sandbox, bus *host.Bus) (*mcpClients, error) {
	info, err := sb.Info(ctx)
	if err != nil {
		return nil, err
	}
	return &mcpClients{sb: sb, bus: bus, sessions: info.Has(shared.CapSessions),
		library:    info.Has(shared.CapSessions) && info.Has(shared.CapToolLibrary),
		files:      info.Has(shared.CapSessions) && info.Has(shared.CapFiles),
		maxPerUser: sb.SessionLimits().MaxSessionsPerUser, limits: defaultMCPHTTPLimits, byID: map[string]*mcpClient{}}, nil
}

// get returns the server of client id, making it on first use.
func (c *mcpClients) get(ctx context.Context, id string) *mcpServer {
	c.mu.Lock()
	if cl, ok := c.byID[id]; ok {
		c.mu.Unlock()
		return cl.srv
	}
	cl := &mcpClient{named: map[string]string{}}
	var session func(context.Context) (string, error)
	if c.sessions {
		session = func(ctx context.Context) (string, error) { return c.openSession(ctx, cl, id) }
	}
	cl.srv = newMCPServerSpeaking(c.sb, c.bus, statefulHTTPProtocolVersions(), host.RunAs(id, session))
	if c.sessions {
		cl.srv.namedSession = func(ctx context.Context, name string, create bool) (string, error) {
			return c.sessionNamed(ctx, cl, id, name, create)
		}
		c.exposeSessions(cl, id)
	}
	if c.files {
		c.exposeFiles(cl, id)
	}
	c.byID[id] = cl
	c.mu.Unlock()
	if c.library { // outside the lock: it may open a container
		c.exposeLibrary(ctx, cl, id)
	}
	return cl.srv
}

// jsonResult is a tool result of v as JSON text and structured content.
func jsonResult(v any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

// exposeLibrary lists the promoted tools of user's library (a session tier
// with a tool library) as MCP tools of the client's server: a call runs the
// tool in the client's session with an agent token, under the policy in
// force (Sandbox.CallSessionToolStream: with a progress token, its output
// streams as run_python's does). A library that cannot be read is
// logged; the client's server works without it.
func (c *mcpClients) exposeLibrary(ctx context.Context, cl *mcpClient, user string) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sid, err := c.openSession(ctx, cl, user)
	if err != nil {
		c.log("cannot open a session for client %q to list its tool library: %v", user, err)
		return
	}
	tok, err := c.sb.MintOperatorToken(ctx, sid, time.Minute)
	if err != nil {
		c.log("client %q: operator token for its tool library: %v", user, err)
		return
	}
	lib, err := c.sb.ListLibrary(ctx, sid, tok, false)
	if err != nil {
		c.log("client %q: listing its tool library: %v", user, err)
		return
	}
	for _, e := range lib.Tools {
		if e.Status != toollib.StatusPromoted || e.Name == mcpSpawnTool || e.Name == mcpRunPython {
			continue
		}
		name := e.Name
		cl.srv.server.AddTool(&mcp.Tool{
			Name:        name,
			Description: fmt.Sprintf("A tool of %s's library (promoted %s by %s): its arguments are the stored code's args.", user, e.PromotedAt, e.PromotedBy),
			InputSchema: json.RawMessage(`{"type": "object"}`),
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ctx = mcpCaller(ctx, req)
			sid, err := c.openSession(ctx, cl, user)
			if err != nil {
				return execResult(shared.ExecutionResult{}, err)
			}
			tok, err := c.sb.MintToken(ctx, sid, shared.ScopeAgent, 5*time.Minute)
			if err != nil {
				return execResult(shared.ExecutionResult{}, err)
			}
			var args any
			if len(req.Params.Arguments) > 0 {
				args = req.Params.Arguments
			}
			raw, err := c.sb.CallSessionToolStream(ctx, sid, name, args, tok.Token, progressOutput(ctx, req))
			var res shared.ExecutionResult
			if err == nil {
				if jerr := json.Unmarshal(raw, &res); jerr != nil {
					err = fmt.Errorf("tool %s: the backend's result is not an execution result: %v: %w", name, jerr, shared.ErrInternal)
				}
			}
			return execResult(res, err)
		})
	}
}

// log notes a problem of the server that no call reports.
func (c *mcpClients) log(format string, args ...any) {
	if c.stderr != nil {
		fmt.Fprintf(c.stderr, "orqest-sandbox mcp serve: "+format+"\n", args...)
	}
}

// httpHandler serves each client's MCP server over Streamable HTTP behind
// bearer authentication (a 401 carries RFC 6750's challenge) and
// cross-origin protection; the SDK's DNS-rebinding protection (localhost
// requests must carry a localhost Host) stays on, and so does its check
// that a session's requests all come from the client that opened it. A
// request other than initialize without an Mcp-Session-Id is a 400
// (requireMCPSession).
// Besides MCP it serves
//
//   - /metrics: the host's Prometheus metrics (metrics), behind the same
//     bearer tokens;
//   - /healthz: unauthenticated; 200 "ok" when the sandbox's plugin answers
//     Info (launching it if it is down), 503 otherwise.
//
// A request body must arrive within c.limits.body; the MCP endpoint's
// streamed responses get c.limits.write per write (mcpHTTPLimits), the
// server built by newMCPHTTPServer bounds the rest.
func (c *mcpClients) httpHandler(v *httpauth.Verifier, metrics http.Handler) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		info := auth.TokenInfoFromContext(r.Context())
		if info == nil || info.UserID == "" {
			return nil
		}
		return c.get(r.Context(), info.UserID).server
	}, &mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute, MaxRequestBodyBytes: mcpMaxRequestBytes})
	requireToken := func(next http.Handler) http.Handler {
		return httpauth.Challenge(mcpRealm, auth.RequireBearerToken(v.Verify, nil)(next))
	}
	lim := c.limits
	mux := http.NewServeMux()
	mux.Handle("/", requireToken(readMCPBody(lim, requireMCPSession(mcpStreamDeadlines(lim.write, h)))))
	mux.Handle("GET /metrics", requireToken(metrics))
	mux.HandleFunc("GET /healthz", c.healthz)
	return bodyDeadline(lim.body, http.NewCrossOriginProtection().Handler(mux))
}

// statefulHTTPProtocolVersions is the protocol versions the SDK speaks
// that its Streamable HTTP transport can serve with sessions, as
// httpHandler's does (StreamableHTTPOptions.Stateless false): the
// revisions of the initialize handshake, not 2026-07-28's sessionless
// core. The server of an HTTP client is narrowed to them, so that a
// server/discover probe asking for a version outside them is refused with
// UnsupportedProtocolVersion (-32022) naming the versions it does speak,
// and the client falls back to initialize. Left at every version the SDK
// knows, the server answers such a probe with success, a client that
// takes success for agreement (mcp-go's) goes on without a session at
// 2026-07-28, and its next request is refused.
func statefulHTTPProtocolVersions() []string {
	stateful := &mcp.StreamableServerTransport{}
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool {
		return !stateful.SupportsProtocolVersion(v)
	})
}

// mcpRealm names the protection space of --http's 401 challenge.
const mcpRealm = "orqest-sandbox"

// mcpServer is the MCP face of one sandbox: a ToolFactory whose tools are
// also MCP tools.
type mcpServer struct {
	server  *mcp.Server
	factory *host.ToolFactory
	sb      *host.Sandbox
	mu      sync.Mutex // serialises spawns, so the tool count is exact
	// namedSession resolves a run_python `session` argument to the
	// backend's session (mcpClients.sessionNamed); nil where the server
	// keeps no sessions (stdio, a tier without sessions).
	namedSession func(ctx context.Context, name string, create bool) (string, error)
}

func newMCPServer(sb *host.Sandbox, bus *host.Bus, opts ...host.FactoryOption) *mcpServer {
	return newMCPServerSpeaking(sb, bus, nil, opts...)
}

// newMCPServerSpeaking is newMCPServer negotiating only the protocol
// versions in versions (all the SDK's when nil).
func newMCPServerSpeaking(sb *host.Sandbox, bus *host.Bus, versions []string, opts ...host.FactoryOption) *mcpServer {
	m := &mcpServer{
		sb:      sb,
		factory: host.NewToolFactory(sb, bus, append([]host.FactoryOption{host.WithReservedNames(mcpSpawnTool, mcpRunPython, mcpPutFile, mcpGetFile, mcpListFiles, mcpCloseSession, mcpPause, mcpResume)}, opts...)...),
		server: mcp.NewServer(&mcp.Implementation{Name: "orqest-sandbox", Version: version}, &mcp.ServerOptions{
			Instructions: "Runs Python function bodies in the orqest-sandbox sandbox " + fmt.Sprintf("%q", sb.Name()) +
				". Use run_python for one-off code, or spawn_tool to turn code into a named tool you can call again; spawned tools appear in tools/list.",
			Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
			SupportedProtocolVersions: versions,
		}),
	}
	pol := sb.Policy()
	imports := "none"
	if len(pol.AllowedImports) > 0 {
		imports = strings.Join(pol.AllowedImports, ", ")
	}
	policyNote := fmt.Sprintf(" Modules the policy allows: %s. Timeout at most %gs.", imports, pol.Timeout.Seconds())
	m.server.AddTool(&mcp.Tool{
		Name:  mcpSpawnTool,
		Title: "Spawn a tool",
		Description: "Create a new tool from Python code. `implementation` is the body of a function that receives " +
			"`args` (a dict of the declared parameters) and returns a JSON-serialisable value; it is statically checked " +
			"before anything runs. The new tool is then listed and callable by `name`." + policyNote,
		InputSchema: json.RawMessage(spawnToolSchema),
	}, m.spawnTool)
	m.server.AddTool(&mcp.Tool{
		Name:  mcpRunPython,
		Title: "Run Python",
		Description: "Run a Python function body once: it receives `args` (a dict) and its `return` value is the " +
			"result (as JSON). No files, no network; imports must be listed in `allowed_imports`." + policyNote,
		InputSchema: json.RawMessage(runPythonSchema),
	}, m.runPython)
	return m
}

const spawnToolSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "pattern": "^[a-zA-Z][a-zA-Z0-9_]{0,63}$", "description": "the tool's name: a letter, then letters, digits or _"},
    "description": {"type": "string", "description": "what the tool does, for the model that calls it"},
    "parameters": {"type": "object", "description": "the tool's arguments: a JSON Schema of type object, or a map of parameter name to schema such as {\"text\": {\"type\": \"string\"}} (then every parameter is required)"},
    "implementation": {"type": "string", "description": "the body of a Python function receiving args; it must return a JSON-serialisable value"},
    "allowed_imports": {"type": "array", "items": {"type": "string"}, "description": "modules the implementation imports (within the policy's)"},
    "timeout_s": {"type": "number", "exclusiveMinimum": 0, "description": "seconds per call (at most the policy's timeout)"}
  },
  "required": ["name", "implementation"],
  "additionalProperties": false
}`

const runPythonSchema = `{
  "type": "object",
  "properties": {
    "code": {"type": "string", "description": "the body of a Python function receiving args; return the result"},
    "args": {"type": "object", "description": "the args dict (default {})"},
    "allowed_imports": {"type": "array", "items": {"type": "string"}, "description": "modules the code imports beyond the policy's allowed_imports (within its ceiling)"},
    "timeout_s": {"type": "number", "exclusiveMinimum": 0, "description": "seconds (at most the policy's ceiling; default the policy's timeout)"},
    "dependencies": {"type": "array", "items": {"type": "string"}, "description": "packages (name or name==version) to install from the operator's wheel directory before the code runs: within the policy's allowed_packages, on session sandboxes that install dependencies"},
    "stateful": {"type": "boolean", "description": "run in this client's session interpreter: top-level names persist across stateful runs, like notebook cells (session sandboxes with stateful_sessions only); a run killed by its limits loses them (state_lost). Unset: the sandbox's default (stateful = true in its policy makes session runs stateful); false asks for a fresh process"},
    "session": ` + sessionArgSchema + `
  },
  "required": ["code"],
  "additionalProperties": false
}`

type spawnToolInput struct {
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Parameters     json.RawMessage `json:"parameters"`
	Implementation string          `json:"implementation"`
	AllowedImports []string        `json:"allowed_imports"`
	TimeoutS       *float64        `json:"timeout_s"`
}

type runPythonInput struct {
	Code           string          `json:"code"`
	Args           json.RawMessage `json:"args"`
	AllowedImports []string        `json:"allowed_imports"`
	TimeoutS       *float64        `json:"timeout_s"`
	Dependencies   []string        `json:"dependencies"`
	Stateful       *bool           `json:"stateful"`
	Session        string          `json:"session"`
}

func (m *mcpServer) spawnTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in spawnToolInput
	if r := decodeToolArgs(mcpSpawnTool, req.Params.Arguments, &in, spawnToolSchema); r != nil {
		return r, nil
	}
	if in.Name == "" || in.Implementation == "" {
		field := "name"
		if in.Name != "" {
			field = "implementation"
		}
		return argError(mcpSpawnTool, field, "missing (required: name, implementation)"), nil
	}
	timeout, r := seconds(mcpSpawnTool, in.TimeoutS)
	if r != nil {
		return r, nil
	}
	var params any
	if len(in.Parameters) > 0 {
		params = in.Parameters
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, exists := m.factory.Tool(in.Name); !exists && len(m.factory.Tools()) >= mcpMaxTools {
		return errorResult(fmt.Sprintf("spawn_tool: this server already has %d spawned tools, the most it keeps", mcpMaxTools), nil), nil
	}
	tool, err := m.factory.Spawn(ctx, host.GeneratedToolSpec{
		Name:           in.Name,
		Description:    in.Description,
		Parameters:     params,
		Implementation: in.Implementation,
		AllowedImports: in.AllowedImports,
		Timeout:        timeout,
	})
	var se *host.SpawnError
	switch {
	case errors.As(err, &se):
		structured := map[string]any{"error": se.Error(), "tool": in.Name}
		var ve *shared.ValidationError
		if errors.As(err, &ve) {
			structured["findings"] = ve.Findings
		}
		return errorResult(se.Error(), structured), nil
	case err != nil:
		// Infrastructure: the sandbox itself failed (plugin died, ...).
		return errorResult("sandbox failure: "+err.Error(), map[string]any{"error": err.Error(), "tool": in.Name}), nil
	}
	m.server.AddTool(&mcp.Tool{
		Name:        tool.Name(),
		Description: tool.Description(),
		InputSchema: tool.InputSchema(),
	}, m.toolHandler(tool))
	imports := tool.Spec().AllowedImports
	if imports == nil {
		imports = []string{}
	}
	info := map[string]any{
		"tool":            tool.Name(),
		"description":     tool.Description(),
		"input_schema":    tool.InputSchema(),
		"allowed_imports": imports,
		"timeout_s":       tool.Timeout().Seconds(),
		"sandbox":         m.sb.Name(),
	}
	b, _ := json.Marshal(info)
	return &mcp.CallToolResult{
		Content: []mcp.Content{
			&mcp.TextContent{Text: fmt.Sprintf("tool %q is ready; call it by name with arguments matching its input_schema.", tool.Name())},
			&mcp.TextContent{Text: string(b)},
		},
		StructuredContent: json.RawMessage(b),
	}, nil
}

// toolHandler calls a spawned tool. The factory's current tool of that
// name is looked up on every call, so a respawn takes effect at once. A
// call with a progress token streams the tool's output as run_python's
// does (progressOutput).
func (m *mcpServer) toolHandler(t *host.Tool) mcp.ToolHandler {
	name := t.Name()
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tool, ok := m.factory.Tool(name)
		if !ok {
			return errorResult(fmt.Sprintf("tool %q no longer exists", name), nil), nil
		}
		res, err := tool.CallStream(mcpCaller(ctx, req), req.Params.Arguments, progressOutput(ctx, req))
		return execResult(res, err)
	}
}

func (m *mcpServer) runPython(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in runPythonInput
	if r := decodeToolArgs(mcpRunPython, req.Params.Arguments, &in, runPythonSchema); r != nil {
		return r, nil
	}
	if in.Code == "" {
		return argError(mcpRunPython, "code", "missing (required: code)"), nil
	}
	timeout, r := seconds(mcpRunPython, in.TimeoutS)
	if r != nil {
		return r, nil
	}
	var sid string
	if in.Session != "" {
		if m.namedSession == nil {
			return argError(mcpRunPython, "session", "this server keeps no named sessions (they need `mcp serve --http` on a sandbox with sessions)"), nil
		}
		var err error
		if sid, err = m.namedSession(ctx, in.Session, true); err != nil {
			return classedError(mcpRunPython, err), nil
		}
	}
	res, err := m.factory.RunPython(mcpCaller(ctx, req), host.RunPythonRequest{
		SessionID:      sid,
		Code:           in.Code,
		Args:           in.Args,
		AllowedImports: in.AllowedImports,
		Timeout:        timeout,
		Dependencies:   in.Dependencies,
		Stateful:       in.Stateful != nil && *in.Stateful,
		Stateless:      in.Stateful != nil && !*in.Stateful,
		OnOutput:       progressOutput(ctx, req),
	})
	return execResult(res, err)
}

// progressOutput returns, for a tools/call that asked for progress (a
// progressToken in its _meta), the callback that sends the code's output
// as progress notifications while it runs: the message is the text, the
// progress the bytes sent so far, _meta[shared.MetaStream] the stream. nil when
// the client asked for none.
func progressOutput(ctx context.Context, req *mcp.CallToolRequest) func(shared.OutputChunk) {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	sent := 0
	return func(c shared.OutputChunk) {
		sent += len(c.Data)
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			Meta:          mcp.Meta{shared.MetaStream: c.Stream},
			ProgressToken: tok,
			Message:       string(c.Data),
			Progress:      float64(sent),
		})
	}
}

// mcpCaller marks ctx with the MCP client as the caller of its executions:
// "mcp:<client>" with the identity its bearer token proved over --http,
// else "mcp:<client name>" from the client's initialize request (stdio:
// self-declared), "mcp" when it named none.
func mcpCaller(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	caller := "mcp"
	switch {
	case req != nil && req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "":
		caller = "mcp:" + req.Extra.TokenInfo.UserID
	case req != nil && req.Session != nil:
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
			caller = "mcp:" + p.ClientInfo.Name
		}
	}
	return host.WithCaller(ctx, caller)
}

// execResult turns an execution into a tool result: the output as JSON
// text (then stdout and stderr when there are any) and the whole
// ExecutionResult as structured content; a failure is an error result
// saying what failed, whose structured content names the stage
// (host.StageOf) and, for an error, its classes.
func execResult(res shared.ExecutionResult, err error) (*mcp.CallToolResult, error) {
	stage := host.StageOf(res, err)
	var ae *host.ArgumentError
	switch {
	case errors.As(err, &ae):
		st := map[string]any{"error": ae.Error(), "stage": stage, "error_classes": plugin.ErrorClasses(ae)}
		if ae.Field != "" {
			st["field"] = ae.Field
		}
		return errorResult(ae.Error(), st), nil
	case errors.Is(err, shared.ErrInvalidArgument):
		st := map[string]any{"error": err.Error(), "stage": stage, "error_classes": plugin.ErrorClasses(err)}
		if fe := (*shared.FieldError)(nil); errors.As(err, &fe) {
			st["field"] = fe.Field
		}
		return errorResult(err.Error(), st), nil
	case err != nil:
		// Infrastructure (the plugin died, ...) or the policy's refusal:
		// still a tool error, so the agent sees it.
		msg := "sandbox failure: " + err.Error()
		if stage == host.StagePolicy {
			msg = "refused by the sandbox's policy: " + err.Error()
		}
		return errorResult(msg, map[string]any{"error": err.Error(), "stage": stage, "error_classes": plugin.ErrorClasses(err)}), nil
	}
	b, _ := json.Marshal(struct {
		shared.ExecutionResult
		Stage string `json:"stage,omitempty"`
	}{res, stage})
	r := &mcp.CallToolResult{StructuredContent: json.RawMessage(b)}
	if res.Success {
		r.Content = append(r.Content, &mcp.TextContent{Text: string(res.Output)})
	} else {
		r.IsError = true
		msg := "execution failed: " + (&host.ExecutionError{Result: res}).Error()
		if res.ErrorKind == shared.KindValidation {
			msg = "rejected by the static checks: " + res.Error
		}
		r.Content = append(r.Content, &mcp.TextContent{Text: msg})
	}
	if res.Stdout != "" {
		r.Content = append(r.Content, &mcp.TextContent{Text: "stdout:\n" + res.Stdout})
	}
	if res.Stderr != "" {
		r.Content = append(r.Content, &mcp.TextContent{Text: "stderr:\n" + res.Stderr})
	}
	return r, nil
}

func errorResult(msg string, structured map[string]any) *mcp.CallToolResult {
	r := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
	if structured != nil {
		r.StructuredContent = structured
	}
	return r
}

func argError(tool, field, msg string) *mcp.CallToolResult {
	err := &host.ArgumentError{Tool: tool, Field: field, Message: msg}
	st := map[string]any{"error": err.Error(), "stage": host.StageValidation, "error_classes": plugin.ErrorClasses(err)}
	if field != "" {
		st["field"] = field
	}
	return errorResult(err.Error(), st)
}

// decodeToolArgs decodes the arguments of a built-in tool into v, refusing
// unknown fields; on failure it returns the error result naming the field.
func decodeToolArgs(tool string, raw json.RawMessage, v any, schema string) *mcp.CallToolResult {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if field := unknownProp(raw, schema); field != "" {
		return argError(tool, field, "unknown argument; "+tool+" takes "+schemaProps(schema))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return argError(tool, strings.SplitN(te.Field, ".", 2)[0], fmt.Sprintf("want %s, got %s", jsonTypeOf(te.Type.Kind().String()), te.Value))
	case errors.As(err, &te):
		return argError(tool, "", "the arguments must be a JSON object, got "+te.Value)
	case errors.As(err, &se):
		return argError(tool, "", "not valid JSON: "+err.Error())
	}
	return argError(tool, "", err.Error())
}

func jsonTypeOf(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "ptr", "float64":
		return "a number"
	}
	return kind
}

// schemaPropSet returns the property names of a tool's JSON schema.
func schemaPropSet(schema string) map[string]json.RawMessage {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal([]byte(schema), &s) // the built-in schemas are constants, tested to parse
	return s.Properties
}

// unknownProp returns the first (sorted) key of the JSON object raw that the
// schema does not declare, or "" (also when raw is not an object: the
// decoder reports that).
func unknownProp(raw json.RawMessage, schema string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return ""
	}
	props := schemaPropSet(schema)
	var unknown []string
	for k := range obj {
		if _, ok := props[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	sort.Strings(unknown)
	return unknown[0]
}

func schemaProps(schema string) string {
	props := schemaPropSet(schema)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// seconds converts timeout_s; nil means the policy's timeout.
func seconds(tool string, s *float64) (time.Duration, *mcp.CallToolResult) {
	if s == nil {
		return 0, nil
	}
	if *s <= 0 || *s > 24*3600 {
		return 0, argError(tool, "timeout_s", fmt.Sprintf("must be a positive number of seconds, got %g", *s))
	}
	return time.Duration(*s * float64(time.Second)), nil
}

// healthz answers 200 when the sandbox's plugin answers Info within five
// seconds, 503 otherwise.
func (c *mcpClients) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := c.sb.Ping(ctx); err != nil {
		// The cause stays out of an unauthenticated answer.
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "unhealthy")
		return
	}
	fmt.Fprintln(w, "ok")
}
