// Package rtclient is the client of one agent runtime (package agent): the
// hello line that hands it the session's secret, then MCP over its
// transport, with a freshly minted HS256 token on every call. Target is one
// bound runtime: Execute (execute_python mapped to a
// shared.ExecutionResult, its output streamed), files (put_file, get_file,
// list_files), MintToken and CallTool (the tool library); ToolErr maps the
// runtime's tool errors to shared error classes, and LogWriter re-emits the
// runtime's JSON log. The lifecycle of the sessions around it (start,
// reopen, pool, registry) is package internal/session's.
package rtclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

const (
	// TokenSlack is added to an execution's timeout for its token's expiry.
	TokenSlack = 30 * time.Second
	// CallSlack is how long past the execution timeout the plugin waits for
	// the runtime's answer before declaring the runtime unresponsive.
	CallSlack = 15 * time.Second
	// DefaultOperatorTokenTTL is the lifetime of a token minted without a
	// TTL.
	DefaultOperatorTokenTTL = 5 * time.Minute
	// MaxArgsBytes caps the JSON arguments of one call.
	MaxArgsBytes = shared.DefaultMaxArgsBytes
)

// MaxFrameBytes bounds one MCP frame from the runtime: an execution's
// result carries its artifacts (at most 8 MiB of bytes, base64, in both
// the structured and the text content) besides its output and streams.
const MaxFrameBytes = 48 << 20

// Target is one bound runtime: its MCP session, the secret its tokens are
// signed with and the names they carry.
type Target struct {
	MCP     *mcp.ClientSession
	Secret  []byte
	User    string
	Session string
	// Name says in errors what the runtime runs in, e.g. "the session
	// container orqest-u-s-1a2b3c".
	Name string
	// Gone is closed when the runtime's stdio has ended (the container or
	// sandbox died or was removed).
	Gone <-chan struct{}
	// Streams routes the runtime's streamed output to ExecuteStream's
	// callers: the one whose Options the MCP client was made with (nil:
	// ExecuteStream hands over the whole streams at the end).
	Streams *Streams
}

// Dead reports whether the runtime's stdio has ended.
func (t Target) Dead() bool {
	select {
	case <-t.Gone:
		return true
	default:
		return false
	}
}

// Bind sends the hello line on stdin and initializes MCP with client over
// the runtime's stdio (stdin carries the plugin's frames after the hello
// line, stdout the runtime's). Closing stdin ends the runtime.
func Bind(ctx context.Context, client *mcp.Client, hello rtproto.Hello, stdin io.WriteCloser, stdout io.ReadCloser) (*mcp.ClientSession, error) {
	line, err := json.Marshal(hello)
	if err != nil {
		return nil, fmt.Errorf("encoding the hello line: %v: %w", err, shared.ErrInternal)
	}
	if _, err := stdin.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("sending the session secret to the runtime: %w: %w", err, shared.ErrUnavailable)
	}
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin, MaxLineLength: MaxFrameBytes}, nil)
	if err != nil {
		return nil, fmt.Errorf("MCP initialize with the runtime: %w: %w", err, shared.ErrUnavailable)
	}
	return cs, nil
}

// Reconnect initializes MCP with client over the stdio of a runtime that
// has had its hello line already: one restored from a checkpoint (a
// paused session), whose process kept the secret and the MCP server it
// had, now on new pipes.
func Reconnect(ctx context.Context, client *mcp.Client, stdin io.WriteCloser, stdout io.ReadCloser) (*mcp.ClientSession, error) {
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin, MaxLineLength: MaxFrameBytes}, nil)
	if err != nil {
		return nil, fmt.Errorf("MCP initialize with the restored runtime: %w: %w", err, shared.ErrUnavailable)
	}
	return cs, nil
}

// Execute runs execute_python in t with a fresh agent-scope token and
// returns the result and the tool library's events; timeout is the call's
// resolved timeout (shared.Prepare), which bounds the token and the wait.
// A runtime that died during the call is shared.ErrUnavailable (an
// infrastructure error, not a result).
func (t Target) Execute(ctx context.Context, args rtproto.ExecuteArgs, timeout time.Duration) (shared.ExecutionResult, []shared.Event, error) {
	return t.ExecuteStream(ctx, args, timeout, nil)
}

// ExecuteStream is Execute that gives send the call's stdout and stderr
// as the runtime streams them (progress notifications carrying
// shared.MetaStream), then whatever of the result's Stdout and Stderr the
// notifications had not carried yet, so the chunks always add up to the
// result's streams. send nil: Execute.
func (t Target) ExecuteStream(ctx context.Context, args rtproto.ExecuteArgs, timeout time.Duration, send func(shared.OutputChunk)) (shared.ExecutionResult, []shared.Event, error) {
	var res shared.ExecutionResult
	call, stop := t.startStream(send)
	defer stop()
	ttl := min(timeout+TokenSlack, rtproto.MaxTokenTTL)
	tok, err := rtproto.Mint(t.Secret, t.User, t.Session, rtproto.ScopeAgent, ttl)
	if err != nil {
		return res, nil, fmt.Errorf("execute: minting the token: %v: %w", err, shared.ErrInternal)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+CallSlack)
	defer cancel()
	params := &mcp.CallToolParams{
		Meta:      mcp.Meta{rtproto.MetaAuthorization: "Bearer " + tok},
		Name:      rtproto.ToolExecute,
		Arguments: args,
	}
	if call != nil && call.token != "" {
		params.SetProgressToken(call.token)
	}
	out, err := t.MCP.CallTool(cctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return res, nil, fmt.Errorf("execute: %w", ctx.Err())
		}
		// Give the stdio a moment to report EOF if the runtime died.
		select {
		case <-t.Gone:
		case <-time.After(200 * time.Millisecond):
		}
		if t.Dead() {
			return res, nil, fmt.Errorf("execute: %s is gone (killed, out of memory or crashed): %w: %w", t.Name, err, shared.ErrUnavailable)
		}
		return res, nil, fmt.Errorf("execute: MCP call to the runtime in %s: %w: %w", t.Name, err, shared.ErrUnavailable)
	}
	if out.IsError {
		return res, nil, ToolErr(out)
	}
	events := EventsFromMeta(out.Meta)
	// The result is read from the text content, which carries the runtime's
	// exact JSON: StructuredContent arrives decoded into `any`, which turns
	// big integers into float64.
	text := firstText(out)
	if text == "" {
		return res, nil, fmt.Errorf("execute: runtime returned no result: %w", shared.ErrInternal)
	}
	if err := json.Unmarshal([]byte(text), &res); err != nil {
		return res, nil, fmt.Errorf("execute: malformed result from the runtime: %v: %w", err, shared.ErrInternal)
	}
	if res.Success && len(res.Output) == 0 {
		res.Output = json.RawMessage("null")
	}
	if call != nil {
		call.finish(res)
	}
	return res, events, nil
}

// startStream is the streamCall of a call whose output goes to send (nil
// when send is nil), with a progress token routed to it when t has
// Streams; stop forgets the token.
func (t Target) startStream(send func(shared.OutputChunk)) (call *streamCall, stop func()) {
	if send == nil {
		return nil, func() {}
	}
	call = &streamCall{send: send}
	if t.Streams == nil {
		return call, func() {}
	}
	call.token = t.Streams.add(call)
	return call, func() { t.Streams.remove(call.token) }
}

// Streams routes progress notifications that carry a call's output
// (shared.MetaStream) to the ExecuteStream call whose progress token they
// name. One per MCP client; safe for concurrent use.
type Streams struct {
	mu    sync.Mutex
	next  uint64
	calls map[string]*streamCall
}

// Options returns the MCP client options that deliver the runtime's
// progress notifications to s.
func (s *Streams) Options() *mcp.ClientOptions {
	return &mcp.ClientOptions{ProgressNotificationHandler: s.handle}
}

func (s *Streams) add(c *streamCall) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	tok := "orqest-out-" + strconv.FormatUint(s.next, 10)
	if s.calls == nil {
		s.calls = map[string]*streamCall{}
	}
	s.calls[tok] = c
	return tok
}

func (s *Streams) remove(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.calls, tok)
}

func (s *Streams) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p := req.Params
	if p == nil {
		return
	}
	tok, _ := p.ProgressToken.(string)
	stream, _ := p.Meta[shared.MetaStream].(string)
	if stream != shared.StreamStdout && stream != shared.StreamStderr {
		return
	}
	s.mu.Lock()
	c := s.calls[tok]
	s.mu.Unlock()
	if c != nil {
		c.deliver(stream, []byte(p.Message))
	}
}

// streamCall is one ExecuteStream call: what it has handed to send, per
// stream. The result ends it: what no notification carried (the last ones
// may be handled after the result arrives) is sent from the result, and
// later notifications are dropped.
type streamCall struct {
	token string
	send  func(shared.OutputChunk)

	mu               sync.Mutex
	done             bool
	sentOut, sentErr int
}

func (c *streamCall) deliver(stream string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done || len(data) == 0 {
		return
	}
	if stream == shared.StreamStdout {
		c.sentOut += len(data)
	} else {
		c.sentErr += len(data)
	}
	c.send(shared.OutputChunk{Stream: stream, Data: data})
}

func (c *streamCall) finish(res shared.ExecutionResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	if c.sentOut < len(res.Stdout) {
		c.send(shared.OutputChunk{Stream: shared.StreamStdout, Data: []byte(res.Stdout[c.sentOut:])})
	}
	if c.sentErr < len(res.Stderr) {
		c.send(shared.OutputChunk{Stream: shared.StreamStderr, Data: []byte(res.Stderr[c.sentErr:])})
	}
}

// Call calls tool of t with a fresh agent-scope token and decodes the
// JSON of its text result into out: the runtime's own tools that take no
// caller token (the session workspace's put_file, get_file, list_files).
func (t Target) Call(ctx context.Context, tool string, args, out any) error {
	tok, err := rtproto.Mint(t.Secret, t.User, t.Session, rtproto.ScopeAgent, time.Minute)
	if err != nil {
		return fmt.Errorf("%s: minting the token: %v: %w", tool, err, shared.ErrInternal)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := t.MCP.CallTool(cctx, &mcp.CallToolParams{
		Meta:      mcp.Meta{rtproto.MetaAuthorization: "Bearer " + tok},
		Name:      tool,
		Arguments: args,
	})
	if err != nil {
		if t.Dead() {
			return fmt.Errorf("%s: %s is gone: %w: %w", tool, t.Name, err, shared.ErrUnavailable)
		}
		return fmt.Errorf("%s: MCP call to the runtime in %s: %w: %w", tool, t.Name, err, shared.ErrUnavailable)
	}
	if res.IsError {
		return fmt.Errorf("%s: %w", tool, ToolErr(res))
	}
	text := firstText(res)
	if text == "" {
		return fmt.Errorf("%s: the runtime returned no result: %w", tool, shared.ErrInternal)
	}
	if err := json.Unmarshal([]byte(text), out); err != nil {
		return fmt.Errorf("%s: malformed result from the runtime: %v: %w", tool, err, shared.ErrInternal)
	}
	return nil
}

func firstText(out *mcp.CallToolResult) string {
	for _, c := range out.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// MintToken mints a bearer token for t: scope "agent" or "operator", at
// most rtproto.MaxTokenTTL (0: DefaultOperatorTokenTTL). A plugin itself
// only ever stamps agent scope on the calls it makes; operator scope exists
// only in tokens minted here, at the host's explicit request.
func (t Target) MintToken(req shared.MintTokenRequest) (shared.MintTokenResponse, error) {
	switch req.Scope {
	case shared.ScopeAgent, shared.ScopeOperator:
	default:
		return shared.MintTokenResponse{}, fmt.Errorf("mint token: scope %q: want %q or %q: %w", req.Scope, shared.ScopeAgent, shared.ScopeOperator, shared.ErrInvalidArgument)
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = DefaultOperatorTokenTTL
	}
	if ttl < 0 || ttl > rtproto.MaxTokenTTL {
		return shared.MintTokenResponse{}, fmt.Errorf("mint token: ttl %v: want (0, %v]: %w", ttl, rtproto.MaxTokenTTL, shared.ErrInvalidArgument)
	}
	tok, err := rtproto.Mint(t.Secret, t.User, t.Session, req.Scope, ttl)
	if err != nil {
		return shared.MintTokenResponse{}, fmt.Errorf("mint token: %v: %w", err, shared.ErrInternal)
	}
	return shared.MintTokenResponse{Token: tok, ExpiresAt: time.Now().Add(ttl)}, nil
}

// CallTool calls a tool of t's runtime with the caller's token (never one
// the plugin mints): the library's list_tools, promote_tool, forget_tool
// (operator scope), runtime_info, or a promoted tool (agent scope). A
// refused token is shared.ErrPermissionDenied.
func (t Target) CallTool(ctx context.Context, req shared.CallToolRequest) (shared.CallToolResponse, error) {
	return t.CallToolStream(ctx, req, nil)
}

// CallToolStream is CallTool that gives send the stdout and stderr of the
// code a promoted tool runs as the runtime streams them, then what of the
// result's streams the notifications had not carried (as ExecuteStream).
// A tool whose result is no execution (the library's operator tools)
// sends nothing. send nil: CallTool.
func (t Target) CallToolStream(ctx context.Context, req shared.CallToolRequest, send func(shared.OutputChunk)) (shared.CallToolResponse, error) {
	if req.Tool == rtproto.ToolExecute {
		return shared.CallToolResponse{}, fmt.Errorf("call tool: use Execute for %s: %w", rtproto.ToolExecute, shared.ErrInvalidArgument)
	}
	if req.Tool != rtproto.ToolInfo && req.Tool != toollib.ToolListTools && req.Tool != toollib.ToolPromote && req.Tool != toollib.ToolForget {
		if err := rtproto.CheckToolName(req.Tool); err != nil {
			return shared.CallToolResponse{}, fmt.Errorf("call tool: %v: %w", err, shared.ErrInvalidArgument)
		}
	}
	if len(req.Arguments) > MaxArgsBytes {
		return shared.CallToolResponse{}, fmt.Errorf("call tool: arguments are %d bytes, over %d: %w", len(req.Arguments), MaxArgsBytes, shared.ErrInvalidArgument)
	}
	args := json.RawMessage("{}")
	if len(req.Arguments) > 0 && string(req.Arguments) != "null" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(req.Arguments, &obj); err != nil {
			return shared.CallToolResponse{}, fmt.Errorf("call tool: arguments must be a JSON object: %v: %w", err, shared.ErrInvalidArgument)
		}
		args = req.Arguments
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	meta := mcp.Meta{rtproto.MetaAuthorization: "Bearer " + req.Token}
	if p := req.Policy; p != nil {
		imports := p.AllowedImports
		if imports == nil {
			imports = []string{}
		}
		meta[rtproto.MetaPolicy] = rtproto.ToolPolicy{AllowedImports: imports, TimeoutS: p.Timeout.Seconds(), MemoryMB: p.MemoryMB, MaxOutputBytes: p.MaxOutputBytes}
	}
	params := &mcp.CallToolParams{Meta: meta, Name: req.Tool, Arguments: args}
	call, stop := t.startStream(send)
	defer stop()
	if call != nil && call.token != "" {
		params.SetProgressToken(call.token)
	}
	out, err := t.MCP.CallTool(cctx, params)
	if err != nil {
		if t.Dead() {
			return shared.CallToolResponse{}, fmt.Errorf("call tool %s: %s is gone: %w: %w", req.Tool, t.Name, err, shared.ErrUnavailable)
		}
		if ctx.Err() != nil {
			return shared.CallToolResponse{}, fmt.Errorf("call tool %s: %w", req.Tool, ctx.Err())
		}
		// An unknown tool is a protocol error in MCP.
		return shared.CallToolResponse{}, fmt.Errorf("call tool %s: %v: %w", req.Tool, err, shared.ErrNotFound)
	}
	if out.IsError {
		return shared.CallToolResponse{}, fmt.Errorf("call tool %s: %w", req.Tool, ToolErr(out))
	}
	text := firstText(out)
	if !json.Valid([]byte(text)) {
		return shared.CallToolResponse{}, fmt.Errorf("call tool %s: the runtime's result is not JSON: %w", req.Tool, shared.ErrInternal)
	}
	if call != nil {
		var res shared.ExecutionResult
		if json.Unmarshal([]byte(text), &res) == nil {
			call.finish(res)
		}
	}
	return shared.CallToolResponse{Result: json.RawMessage(text), Events: EventsFromMeta(out.Meta)}, nil
}

// ToolErr maps a runtime tool error to a shared error class.
func ToolErr(out *mcp.CallToolResult) error {
	var te struct {
		Class   string `json:"error_class"`
		Message string `json:"message"`
	}
	if raw, err := json.Marshal(out.StructuredContent); err == nil {
		_ = json.Unmarshal(raw, &te)
	}
	if te.Message == "" {
		for _, c := range out.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				te.Message = t.Text
			}
		}
	}
	var class error
	switch te.Class {
	case "invalid_argument":
		class = shared.ErrInvalidArgument
	case "not_supported":
		class = shared.ErrNotSupported
	case "unauthorized", "permission_denied":
		// A refused token, or a dependency outside allowed_packages.
		class = shared.ErrPermissionDenied
	case "failed_precondition":
		class = shared.ErrFailedPrecondition
	case "unavailable":
		class = shared.ErrUnavailable
	case "not_found":
		class = shared.ErrNotFound
	default:
		class = shared.ErrInternal
	}
	return fmt.Errorf("runtime: %s: %w", te.Message, class)
}

// EventsFromMeta converts the runtime's _meta events to shared events.
func EventsFromMeta(meta mcp.Meta) []shared.Event {
	raw, ok := meta[rtproto.MetaEvents]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var evs []struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if json.Unmarshal(b, &evs) != nil {
		return nil
	}
	out := make([]shared.Event, 0, len(evs))
	for _, e := range evs {
		if e.Type != "" {
			out = append(out, shared.Event{Type: e.Type, Payload: e.Payload})
		}
	}
	return out
}

// LogWriter re-emits the runtime's stderr line by line (capped at 16 KiB a
// line) on Log. Flush emits a last unterminated line.
type LogWriter struct {
	Log hclog.Logger
	buf []byte
}

// Write implements io.Writer.
func (l *LogWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.emit(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 16<<10 {
		l.emit(string(l.buf))
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

// Flush emits what is left of an unterminated line.
func (l *LogWriter) Flush() {
	if len(l.buf) > 0 {
		l.emit(string(l.buf))
		l.buf = nil
	}
}

// emit re-emits one line: a JSON record of the runtime's log (slog) at its
// own level, with its message and attributes, so a runtime warning is a
// plugin warning; anything else (a Python traceback, say) at debug.
func (l *LogWriter) emit(line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	var rec map[string]any
	if line[0] != '{' || json.Unmarshal([]byte(line), &rec) != nil {
		l.Log.Debug(line)
		return
	}
	msg, _ := rec["msg"].(string)
	lvl, _ := rec["level"].(string)
	keys := make([]string, 0, len(rec))
	for k := range rec {
		if k != "msg" && k != "level" && k != "time" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	args := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, rec[k])
	}
	level := hclog.Debug
	switch strings.ToUpper(lvl) {
	case "INFO":
		level = hclog.Info
	case "WARN":
		level = hclog.Warn
	case "ERROR":
		level = hclog.Error
	}
	l.Log.Log(level, msg, args...)
}
