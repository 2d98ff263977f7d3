package agent

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared"
)

// defaultForkCore is where the image puts the fork-server's C loop
// (runner/forkcore built as a shared object, `make image`).
const defaultForkCore = "/usr/local/lib/orqest/orqest-forkcore.so"

// version is set with -ldflags "-X github.com/orqest/sandbox/agent.version=...".
var version = "0.1.0"

// options are the agent's command-line flags (Main).
type options struct {
	python   string
	workdir  string
	listen   string
	execMode string // how the agent runs Python (exec.go)
	classes  bool
	// prepare, stateful and memoryCgroup are rtproto.RuntimeFlags.
	prepare      string
	stateful     bool
	memoryCgroup bool
	forkCore     string
	library      string
	// libraryOwnDir says the library's directory belongs to the runtime
	// alone wherever -library puts it, so it is created 0700 and its owner
	// and mode repaired as for the default path: for a library in a
	// subdirectory of a volume whose root the runtime may not take (a
	// Kubernetes volume is root's with the pod's fsGroup, and the runtime has
	// no CAP_CHOWN there).
	libraryOwnDir bool
}

// Main runs the agent as the program orqest-agent-runtime with the
// command-line arguments args (without the program name) and returns its
// exit status. It reads the hello line and then MCP from os.Stdin, writes
// MCP to os.Stdout (or serves it over HTTP with -listen) and its JSON log
// to os.Stderr, and returns once stdin closes: 0 then, 1 when the agent
// failed, 2 for bad flags. It is the binary's whole main, so that docker
// containers, gVisor sandboxes and kubernetes pods run one program built
// from this package.
func Main(args []string) int {
	fs := flag.NewFlagSet("orqest-agent-runtime", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	var o options
	fs.StringVar(&o.python, "python", "", "python interpreter (default: /usr/bin/python3, else /usr/local/bin/python3)")
	fs.StringVar(&o.workdir, "workdir", "/workspace", "writable scratch directory (tmpfs); per-agent directories live under it")
	fs.StringVar(&o.listen, "listen", "", "serve MCP over Streamable HTTP on this address (e.g. :8000) instead of stdio; stdin still carries the hello line and its EOF still ends the runtime")
	fs.StringVar(&o.execMode, "exec-mode", modeForkServer, `how Python runs: "forkserver" (a warm, sealed zygote per agent) or "spawn" (one interpreter per call)`)
	fs.BoolVar(&o.classes, rtproto.FlagClasses, false, "bodies may define classes (the sandbox's policy `classes`)")
	fs.StringVar(&o.prepare, rtproto.FlagPrepare, "", "comma-separated modules (the policy's allowed_imports) the default agent's zygote, and with -stateful its stateful interpreter, import before the first call")
	fs.BoolVar(&o.stateful, rtproto.FlagStateful, false, "session calls are stateful by default: start the default agent's stateful interpreter before the first call")
	fs.BoolVar(&o.memoryCgroup, rtproto.FlagMemoryCgroup, false, "a memory cgroup (the container's, pod's or sandbox's) bounds this runtime: a call's memory is resident memory, no RLIMIT_AS")
	fs.StringVar(&o.forkCore, rtproto.FlagForkCore, defaultForkCore, `the fork-server's C loop (a shared object built for this image's Python), which also carries the runner's audit hook in C for zygotes and one-call spawns; "" or a missing file keeps the zygotes' loop and the hook in Python`)
	fs.StringVar(&o.library, "library", rtproto.LibraryPath, "the per-user tool library (SQLite); \"\" disables it")
	fs.BoolVar(&o.libraryOwnDir, "library-own-dir", false, "the library's directory belongs to the runtime alone (created 0700 and repaired) also when -library is not the default path")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintln(os.Stdout, version)
		return 0
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(log, o); err != nil {
		log.Error("runtime failed", "error", err)
		return 1
	}
	return 0
}

func run(log *slog.Logger, o options) error {
	// Not dumpable: no process of the container may read the secret out of
	// /proc/<pid>/mem or environ (the Python children run on another uid
	// where the runtime is root, on the same one where it is not).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Warn("prctl(PR_SET_DUMPABLE, 0) failed", "error", err)
	}
	if os.Geteuid() != 0 {
		log.Warn("the runtime is not root: its Python children keep its uid and, should the kernel layers fail, could reach the tool library", "uid", os.Geteuid())
	}
	py, err := findPython(o.python)
	if err != nil {
		return err
	}
	table := rules.JSON()

	ex := &executor{python: py, rules: table, workdir: o.workdir, log: log, mode: o.execMode, classes: o.classes, system: systemPackages(), core: loadForkCore(log, o.forkCore),
		prepare: splitModules(o.prepare), stateful: o.stateful, memoryCgroup: o.memoryCgroup}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if eg, err := egressProxy(ctx, os.Getenv); err != nil {
		log.Error("the egress proxy is unusable: the Python children have no network", "error", err)
	} else if eg != nil {
		ex.egress = eg
		log.Info("the Python children reach the egress proxy", "proxy", eg.Host, "port", eg.Port)
	}
	// Probe the sealing layers (logged) and start the default agent's warm
	// fork-server (and stateful interpreter), prepared, before the hello
	// line: an agent of the warm pool is ready when a session binds it.
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		ex.warm(ctx)
	}()
	defer func() {
		stop() // a warm-up still running ends early
		<-warmed
		ex.shutdown()
	}()

	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	hello, err := readHello(in)
	if err != nil {
		return err
	}
	ex.envs = newEnvManager(py, o.workdir, hello, log) // per-agent venvs (venv.go); warm does not use it
	rt := &runtime{
		hello:   hello,
		started: time.Now(),
		exec:    ex,
		rulesSum: func() string {
			s := sha256.Sum256(table)
			return hex.EncodeToString(s[:])
		}(),
		log: log,
	}
	if err := rt.attachLibrary(o.library, o.libraryOwnDir); err != nil { // the per-user tool library (library.go)
		return err
	}
	log.Info("runtime ready", "version", version, "python", py, "user", hello.User, "session", hello.Session)
	if o.listen != "" {
		// HTTP mode: stdin's EOF (the plugin detached or died) ends us.
		hctx, hcancel := context.WithCancel(ctx)
		defer hcancel()
		go func() {
			_, _ = io.Copy(io.Discard, in)
			hcancel()
		}()
		return rt.serveHTTP(hctx, o.listen)
	}
	stdin := &eofReader{r: in}
	err = rt.server().Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{os.Stdout}})
	// The plugin ends a session by closing stdin, possibly mid-frame: once
	// stdin has ended, whatever the transport reports is that end.
	if err != nil && !errors.Is(err, context.Canceled) && !stdin.ended.Load() {
		return err
	}
	log.Info("runtime exiting: stdin closed")
	return nil
}

// eofReader records that its reader has ended (io.EOF or a read error), so
// the end of stdin is told from a transport failure by state, not by text.
type eofReader struct {
	r     io.Reader
	ended atomic.Bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.ended.Store(true)
	}
	return n, err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func findPython(p string) (string, error) {
	cands := []string{p}
	if p == "" {
		cands = []string{"/usr/bin/python3", "/usr/local/bin/python3"}
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() || err == nil && st.Mode()&os.ModeSymlink != 0 {
			return c, nil
		}
		if lp, err := exec.LookPath(c); err == nil {
			return lp, nil
		}
	}
	return "", fmt.Errorf("no python interpreter found (tried %v)", cands)
}

// splitModules splits -prepare's comma-separated module names.
func splitModules(s string) []string {
	var mods []string
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			mods = append(mods, m)
		}
	}
	return mods
}

// readHello reads the first stdin line: the per-session secret.
func readHello(in *bufio.Reader) (rtproto.Hello, error) {
	var h rtproto.Hello
	line, err := in.ReadSlice('\n')
	if err != nil {
		return h, fmt.Errorf("reading the hello line from stdin: %w", err)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, fmt.Errorf("malformed hello line: %w", err)
	}
	if len(h.Secret) < rtproto.MinSecretBytes {
		return h, fmt.Errorf("hello: secret shorter than %d bytes", rtproto.MinSecretBytes)
	}
	if err := errors.Join(rtproto.CheckID("user_id", h.User), rtproto.CheckID("session_id", h.Session)); err != nil {
		return h, fmt.Errorf("hello: %w", err)
	}
	for i := range line {
		line[i] = 0 // do not keep a second copy of the secret in the buffer
	}
	return h, nil
}

// runtime is the MCP side of the agent runtime.
type runtime struct {
	hello    rtproto.Hello
	started  time.Time
	exec     *executor
	rulesSum string
	lib      *library // the per-user tool library; nil when disabled (library.go)
	log      *slog.Logger
}

func (rt *runtime) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "orqest-agent-runtime", Version: version}, nil)
	s.AddTool(&mcp.Tool{
		Name:        rtproto.ToolExecute,
		Description: "Validate and run the body of a Python function that receives `args` and returns a JSON-serialisable value.",
		InputSchema: rtproto.ExecuteSchema,
	}, rt.executePython)
	s.AddTool(&mcp.Tool{
		Name:        rtproto.ToolInfo,
		Description: "Runtime version, interpreter and rules digest (operator scope).",
		InputSchema: map[string]any{"type": "object", "additionalProperties": false},
	}, rt.runtimeInfo)
	rt.fileTools(s)    // put_file, get_file, list_files (files.go)
	rt.libraryTools(s) // list_tools, promote_tool, forget_tool and the promoted tools (library.go)
	rt.keepTools(s)    // save_state, restore_state (keep.go)
	return s
}

// Error classes of a tool error (the plugin maps them to shared errors).
const (
	classUnauthorized    = "unauthorized"
	classInvalidArgument = "invalid_argument"
	classNotSupported    = "not_supported"
	classInternal        = "internal"
)

// toolErrorContent is the structured content of a tool result with IsError set.
type toolErrorContent struct {
	Class   string `json:"error_class"`
	Message string `json:"message"`
}

func toolError(class, format string, a ...any) *mcp.CallToolResult {
	te := toolErrorContent{Class: class, Message: fmt.Sprintf(format, a...)}
	return &mcp.CallToolResult{
		IsError:           true,
		StructuredContent: te,
		Content:           []mcp.Content{&mcp.TextContent{Text: te.Class + ": " + te.Message}},
	}
}

// authorize checks the bearer token of a call and that it carries scope.
// Over HTTP the SDK's RequireBearerToken has already verified the
// Authorization header (req.Extra.TokenInfo); over stdio the token is in
// _meta.authorization and is verified here.
func (rt *runtime) authorize(req *mcp.CallToolRequest, scope string) error {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		have := rtproto.ScopeAgent
		if len(req.Extra.TokenInfo.Scopes) > 0 {
			have = req.Extra.TokenInfo.Scopes[0]
		}
		if scope == rtproto.ScopeOperator && have != rtproto.ScopeOperator {
			return fmt.Errorf("%w: tool needs operator scope, token has %q", rtproto.ErrUnauthorized, have)
		}
		return nil
	}
	var raw string
	if req.Params != nil && req.Params.Meta != nil {
		raw, _ = req.Params.Meta[rtproto.MetaAuthorization].(string)
	}
	tok, ok := strings.CutPrefix(raw, "Bearer ")
	if !ok || tok == "" {
		return fmt.Errorf("%w: missing bearer token", rtproto.ErrUnauthorized)
	}
	c, err := rtproto.Verify(rt.hello.Secret, tok, rt.hello.User, rt.hello.Session)
	if err != nil {
		return err
	}
	if scope == rtproto.ScopeOperator && c.EffectiveScope() != rtproto.ScopeOperator {
		return fmt.Errorf("%w: tool needs operator scope, token has %q", rtproto.ErrUnauthorized, c.EffectiveScope())
	}
	return nil
}

func (rt *runtime) executePython(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := rt.authorize(req, rtproto.ScopeAgent); err != nil {
		rt.log.Warn("call refused", "tool", rtproto.ToolExecute, "error", err)
		return toolError(classUnauthorized, "%v", err), nil
	}
	var a rtproto.ExecuteArgs
	dec := json.NewDecoder(strings.NewReader(string(req.Params.Arguments)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return toolError(classInvalidArgument, "arguments: %v", err), nil
	}
	if err := checkToolName(a.ToolName); err != nil { // library.go
		return toolError(classInvalidArgument, "%v", err), nil
	}
	// agent_id is checked here, at the MCP boundary, before any filesystem
	// operation (the per-agent directory).
	if a.AgentID != "" {
		if err := rtproto.CheckID("agent_id", a.AgentID); err != nil {
			return toolError(classInvalidArgument, "%v", err), nil
		}
	}
	// dependencies must be in allowed_packages (fail closed, before any
	// filesystem work); they are installed into the agent's venv (venv.go).
	if err := rt.exec.envs.check(a.Dependencies); err != nil {
		return toolError(errorClass(err), "%v", err), nil
	}
	res, err := rt.exec.run(ctx, a, progressOutput(ctx, req))
	if err != nil {
		return toolError(errorClass(err), "%v", err), nil // deps.go
	}
	text, _ := json.Marshal(res)
	out := &mcp.CallToolResult{
		StructuredContent: res,
		Content:           []mcp.Content{&mcp.TextContent{Text: string(text)}},
	}
	rt.libraryRecord(ctx, a, res, out) // count a named invocation, apply the promotion policy (library.go)
	return out, nil
}

func (rt *runtime) runtimeInfo(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := rt.authorize(req, rtproto.ScopeOperator); err != nil {
		rt.log.Warn("call refused", "tool", rtproto.ToolInfo, "error", err)
		return toolError(classUnauthorized, "%v", err), nil
	}
	info := rtproto.InfoResult{
		Version:     version,
		Python:      rt.exec.python,
		RulesSHA256: rt.rulesSum,
		UptimeMS:    time.Since(rt.started).Milliseconds(),
	}
	info.Sealing, info.SealingMissing = rt.exec.sealLayers()
	text, _ := json.Marshal(info)
	return &mcp.CallToolResult{StructuredContent: info, Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, nil
}

// progressOutput returns, for an execute_python call that carries a
// progress token, the callback that sends the child's output to the
// plugin as progress notifications while it runs (rtproto.MetaStream
// names the stream, the message is the text, progress counts the bytes
// sent); nil when the call asked for none. The two streams' readers call
// it concurrently: one notification at a time keeps progress increasing.
func progressOutput(ctx context.Context, req *mcp.CallToolRequest) func(string, []byte) {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	var mu sync.Mutex
	sent := 0
	return func(stream string, data []byte) {
		mu.Lock()
		defer mu.Unlock()
		sent += len(data)
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			Meta:          mcp.Meta{shared.MetaStream: stream},
			ProgressToken: tok,
			Message:       string(data),
			Progress:      float64(sent),
		})
	}
}

// loadForkCore reads the fork-server's C loop from path, which the image
// provides: its zygotes then fork from C (no Python between forks) and
// each idle child copies the pages an execution writes ahead of it (see
// runner/forkcore). nil (the zygotes loop in Python) when path is "" or
// cannot be read.
func loadForkCore(log *slog.Logger, path string) []byte {
	if path == "" {
		return nil
	}
	core, err := os.ReadFile(path)
	if err != nil {
		log.Info("fork-server C loop not loaded; zygotes loop in Python", "path", path, "reason", err.Error())
		return nil
	}
	return core
}
