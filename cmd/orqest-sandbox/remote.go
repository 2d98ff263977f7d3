package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// The CLI as a client of a long-running `mcp serve --http` (as the vault
// and nomad CLIs are clients of their servers): a session on a session
// tier lives as long as the server, not as one CLI process, so `files
// put`, `run --session S` and `files get` in three processes act on one
// workspace. The server authenticates the token and runs the caller as the
// token's identity; --session names one of that identity's sessions.

// Environment variables of the remote commands (--addr, --token-file and
// --ca-cert win over them).
const (
	addrEnv   = "ORQEST_ADDR"   // the server's URL, e.g. http://127.0.0.1:8765
	tokenEnv  = "ORQEST_TOKEN"  // the client's bearer token
	caCertEnv = "ORQEST_CACERT" // a PEM file of CAs to trust for https
)

// remoteFlags are the flags of a command that talks to a server.
type remoteFlags struct {
	addr, tokenFile, caCert, session string
}

// register adds the remote flags to fs.
func (f *remoteFlags) register(fs *flag.FlagSet) {
	f.registerServer(fs)
	fs.StringVar(&f.session, "session", "", "a named session of the token's client on the server (default: the client's own session)")
}

// registerServer adds the flags naming the server (not --session) to fs.
func (f *remoteFlags) registerServer(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "", "the `URL` of an `orqest-sandbox mcp serve --http` server, e.g. http://127.0.0.1:8765 (default $"+addrEnv+"); run there instead of locally")
	fs.StringVar(&f.tokenFile, "token-file", "", "with --addr: a `file` holding this client's bearer token (default $"+tokenEnv+")")
	fs.StringVar(&f.caCert, "ca-cert", "", "with --addr: a PEM `file` of CA certificates to trust for an https server (default $"+caCertEnv+")")
}

// remoteWanted reports whether a command that runs locally or on a
// server goes to a server: --addr given or $ORQEST_ADDR set.
func (f *remoteFlags) remoteWanted() bool {
	return f.addr != "" || os.Getenv(addrEnv) != ""
}

// remote is a connection to a server: its MCP session and the tools it
// offers this client.
type remote struct {
	addr  string
	cs    *mcp.ClientSession
	tools map[string]*mcp.Tool
}

// progressFunc receives a tool call's progress notifications (the code's
// output as it is written).
type progressFunc func(*mcp.ProgressNotificationParams)

// dialRemote connects to the server f names and lists its tools. Failures
// say what to fix: no address (ErrInvalidArgument), a server that cannot
// be reached (ErrUnavailable), a token it refuses (ErrPermissionDenied).
func dialRemote(ctx context.Context, f remoteFlags, onProgress progressFunc) (*remote, error) {
	addr := f.addr
	if addr == "" {
		addr = os.Getenv(addrEnv)
	}
	if addr == "" {
		return nil, fmt.Errorf("no server: give --addr URL or set $%s (start one with `orqest-sandbox mcp serve --http 127.0.0.1:8765 --token-file F`): %w", addrEnv, shared.ErrInvalidArgument)
	}
	endpoint, err := mcpEndpoint(addr)
	if err != nil {
		return nil, err
	}
	token, err := clientToken(f.tokenFile)
	if err != nil {
		return nil, err
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	caFile := f.caCert
	if caFile == "" {
		caFile = os.Getenv(caCertEnv)
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-cert %s: no PEM certificate in it: %w", caFile, shared.ErrInvalidArgument)
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	rt := &bearerTransport{token: token, next: base}
	opts := &mcp.ClientOptions{}
	if onProgress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { onProgress(r.Params) }
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "orqest-sandbox-cli", Version: version}, opts)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: rt},
		MaxRetries:           -1,       // a CLI call fails at once; the user runs it again
		DisableStandaloneSSE: true,     // answers and their progress come on each call's own stream
		MaxEventSize:         64 << 20, // a get_file of a file at the per-file cap, base64 and structured
	}, nil)
	if err != nil {
		return nil, rt.explain(endpoint, err)
	}
	r := &remote{addr: endpoint, cs: cs, tools: map[string]*mcp.Tool{}}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			cs.Close()
			return nil, rt.explain(endpoint, err)
		}
		r.tools[t.Name] = t
	}
	return r, nil
}

// mcpEndpoint turns --addr into the server's MCP endpoint: an http or
// https URL, /mcp when it names no path.
func mcpEndpoint(addr string) (string, error) {
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("address %q: give the server's URL, such as http://127.0.0.1:8765: %w", addr, shared.ErrInvalidArgument)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/mcp"
	}
	return u.String(), nil
}

// clientToken reads the bearer token from file, else $ORQEST_TOKEN: one
// token without whitespace.
func clientToken(file string) (string, error) {
	src, tok := "$"+tokenEnv, os.Getenv(tokenEnv)
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		src, tok = "--token-file "+file, string(b)
	}
	tok = strings.TrimSpace(tok)
	switch {
	case tok == "":
		return "", fmt.Errorf("no token: give --token-file F or set $%s to the token the server knows this client by: %w", tokenEnv, shared.ErrInvalidArgument)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", fmt.Errorf("%s: want one bare token (the server's token file has NAME TOKEN lines; a client's holds only its TOKEN): %w", src, shared.ErrInvalidArgument)
	}
	return tok, nil
}

// bearerTransport sends the token on every request and remembers how the
// last one failed, so a failed connect is explained by its cause (the
// SDK's error does not carry the HTTP status).
type bearerTransport struct {
	token string
	next  http.RoundTripper

	mu      sync.Mutex
	status  int   // the last response's status
	dialErr error // the last transport failure
}

// RoundTrip implements http.RoundTripper.
func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.next.RoundTrip(r)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.dialErr = err
	} else {
		b.status = resp.StatusCode
	}
	return resp, err
}

// explain wraps a connection failure with what it means.
func (b *bearerTransport) explain(endpoint string, err error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.dialErr != nil:
		return fmt.Errorf("cannot reach the server at %s (is `orqest-sandbox mcp serve --http` running there?): %w: %w", endpoint, b.dialErr, shared.ErrUnavailable)
	case b.status == http.StatusUnauthorized:
		return fmt.Errorf("the server at %s refused the token (401): check --token-file or $%s: %w", endpoint, tokenEnv, shared.ErrPermissionDenied)
	case b.status == http.StatusForbidden:
		return fmt.Errorf("the server at %s refused the request (403): %w", endpoint, shared.ErrPermissionDenied)
	case b.status == http.StatusNotFound:
		return fmt.Errorf("no MCP endpoint at %s (404): give the address of `orqest-sandbox mcp serve --http`: %w", endpoint, shared.ErrNotFound)
	}
	return fmt.Errorf("server %s: %w: %w", endpoint, err, shared.ErrUnavailable)
}

// Close ends the MCP session (the server's sessions stay).
func (r *remote) Close() error { return r.cs.Close() }

// call calls tool with args and returns its result. A tool the server does
// not offer this client is ErrNotSupported naming what is missing; a tool
// error comes back as an error of the classes the server named.
func (r *remote) call(ctx context.Context, tool string, args map[string]any, progressToken any) (*mcp.CallToolResult, error) {
	t, ok := r.tools[tool]
	if !ok {
		return nil, fmt.Errorf("the server at %s offers no %s to this client (its sandbox has no workspace or no sessions): %w", r.addr, tool, shared.ErrNotSupported)
	}
	if s, _ := args["session"].(string); s != "" && !schemaHasProp(t.InputSchema, "session") {
		return nil, fmt.Errorf("the server at %s keeps no named sessions (its %s takes no session; an older server?): %w", r.addr, tool, shared.ErrNotSupported)
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if progressToken != nil {
		params.SetProgressToken(progressToken)
	}
	res, err := r.cs.CallTool(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", tool, err, shared.ErrUnavailable)
	}
	return res, nil
}

// toolError is the error of a tool result with isError: its message, and
// the shared error classes its structured content names.
func toolError(res *mcp.CallToolResult) error {
	var msg strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if msg.Len() > 0 {
				msg.WriteString("\n")
			}
			msg.WriteString(t.Text)
		}
	}
	var st struct {
		Classes []string `json:"error_classes"`
		Field   string   `json:"field"`
	}
	if b, err := json.Marshal(res.StructuredContent); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	err := errors.New(msg.String())
	for _, c := range st.Classes {
		if class := plugin.ClassNamed(c); class != nil {
			err = fmt.Errorf("%w: %w", err, class)
		}
	}
	if st.Field != "" && len(st.Classes) == 0 {
		err = fmt.Errorf("%w: %w", err, shared.ErrInvalidArgument)
	}
	return err
}

// schemaHasProp reports whether a tool's input schema declares prop.
func schemaHasProp(schema any, prop string) bool {
	b, err := json.Marshal(schema)
	if err != nil {
		return false
	}
	_, ok := schemaPropSet(string(b))[prop]
	return ok
}

// runRemote is `run --addr`: the code runs through the server's
// run_python, in the session --session names (else the client's own),
// with its output printed as the server streams it (progress
// notifications), or as one JSON object with --json.
func runRemote(ctx context.Context, e *env, rf remoteFlags, f execFlags, code string, stateful *bool) int {
	args := map[string]any{"code": code}
	if f.args != "" {
		args["args"] = json.RawMessage(f.args)
	}
	if len(f.allow) > 0 {
		args["allowed_imports"] = []string(f.allow)
	}
	if len(f.deps) > 0 {
		args["dependencies"] = []string(f.deps)
	}
	if f.timeout != "" {
		req, _ := f.request(code) // checked by the caller
		args["timeout_s"] = req.Timeout.Seconds()
	}
	if stateful != nil {
		args["stateful"] = *stateful
	}
	if rf.session != "" {
		args["session"] = rf.session
	}
	// What the notifications printed, per stream: the result's stdout and
	// stderr start with it, and only the rest is printed at the end.
	var mu sync.Mutex
	streamed := map[string]int{}
	var onProgress progressFunc
	var token any
	if !f.json {
		token = "run"
		onProgress = func(p *mcp.ProgressNotificationParams) {
			stream, _ := p.Meta[shared.MetaStream].(string)
			w := e.stdout
			switch stream {
			case shared.StreamStderr:
				w = e.stderr
			case shared.StreamStdout:
			default:
				return
			}
			mu.Lock()
			defer mu.Unlock()
			streamed[stream] += len(p.Message)
			_, _ = io.WriteString(w, p.Message)
		}
	}
	r, err := dialRemote(ctx, rf, onProgress)
	if err != nil {
		return reportErr(e, err)
	}
	defer r.Close()
	res, err := r.call(ctx, mcpRunPython, args, token)
	if err != nil {
		return reportErr(e, err)
	}
	var probe map[string]json.RawMessage
	if decodeStructured(res, &probe) != nil || probe["success"] == nil {
		// Not an execution: the call was refused (arguments, session,
		// the sandbox failed).
		return reportErr(e, toolError(res))
	}
	var out shared.ExecutionResult
	if err := decodeStructured(res, &out); err != nil {
		return reportErr(e, err)
	}
	mu.Lock()
	out.Stdout = unstreamed(out.Stdout, streamed[shared.StreamStdout])
	out.Stderr = unstreamed(out.Stderr, streamed[shared.StreamStderr])
	mu.Unlock()
	return printResult(e, out, f.json)
}

// unstreamed is what of s is left after its first n bytes went out as
// progress.
func unstreamed(s string, n int) string {
	if n >= len(s) {
		return ""
	}
	return s[n:]
}
