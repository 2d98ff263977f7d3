package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared"
)

// execFlags are the flags run and call share.
type execFlags struct {
	config, sandbox, args, timeout string
	allow                          multiFlag
	deps                           multiFlag
	memory                         int
	json                           bool
	expr                           string
	stateful                       bool // run --stateful (set by cmdRun only)
	stateless                      bool // run --stateful=false (set by cmdRun only)
}

// register adds the flags run and call share.
func (f *execFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "policy file (default ./config.hcl, else the embedded default)")
	fs.StringVar(&f.sandbox, "sandbox", "", "sandbox to run in (default: the policy's default sandbox)")
	fs.Var(&f.allow, "allow", "comma-separated modules to allow in addition to the policy's allowed_imports")
	fs.Var(&f.deps, "dep", "comma-separated packages (name or name==version) to install from the sandbox's wheel_dir before the code runs (session tiers; within the policy's allowed_packages)")
	fs.StringVar(&f.args, "args", "", "the body's `args`, a JSON object")
	fs.StringVar(&f.timeout, "timeout", "", "wall-clock timeout, e.g. 500ms (default: the policy's)")
	fs.IntVar(&f.memory, "memory", 0, "memory cap in MiB (default: the policy's)")
	fs.BoolVar(&f.json, "json", false, "print the ExecutionResult as one JSON object")
}

// request builds the ExecuteRequest of run and call from the flags.
func (f *execFlags) request(code string) (shared.ExecuteRequest, error) {
	req := shared.ExecuteRequest{Code: code, AllowedImports: f.allow, Dependencies: f.deps, MemoryMB: f.memory}
	if f.args != "" {
		if err := shared.CheckArgsObject([]byte(f.args)); err != nil {
			return req, fmt.Errorf("--%w", err)
		}
		req.Args = json.RawMessage(f.args)
	}
	if f.timeout != "" {
		d, err := time.ParseDuration(f.timeout)
		if err != nil || d <= 0 {
			return req, fmt.Errorf("--timeout %q is not a positive duration such as 500ms or 5s", f.timeout)
		}
		req.Timeout = d
	}
	if f.memory < 0 {
		return req, fmt.Errorf("--memory must be positive")
	}
	if err := shared.CheckMemoryMB(f.memory); err != nil {
		return req, fmt.Errorf("--memory: %w", err)
	}
	return req, nil
}

// missingCode reports whether code is no body at all (empty or only
// white space): `run` and a `run --batch` line refuse it, as run_python
// does (host.ToolFactory.RunPython), rather than run an empty body that
// returns None.
func missingCode(code string) bool { return strings.TrimSpace(code) == "" }

// loadSandbox loads the policy and returns the named sandbox.
func loadSandbox(ctx context.Context, config, name string) (*host.Host, *host.Sandbox, error) {
	h, err := host.LoadFile(ctx, config)
	if err != nil {
		return nil, nil, err
	}
	sb, err := h.Sandbox(ctx, name)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	return h, sb, nil
}

func cmdRun(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "run", "run [--config F] [--sandbox NAME] [--allow m1,m2] [--dep p1,p2] [--args JSON] [--timeout DUR] [--memory MB] [--json] (-e CODE | FILE | - | --batch FILE|-) [--concurrency N] [--user U] [--session S] [--stateful] [--tool NAME] [--addr URL [--token-file F] [--ca-cert F]]")
	var f execFlags
	var user, session, tool, batch string
	var stateful bool
	var concurrency int
	var rf remoteFlags
	f.register(fs)
	rf.registerServer(fs)
	fs.StringVar(&batch, "batch", "", "run many requests: a file (or - for stdin) of JSON lines {\"code\", \"args\", \"allowed_imports\", \"dependencies\", \"timeout\", \"memory_mb\", \"id\"}; prints one result line per request as each finishes")
	fs.IntVar(&concurrency, "concurrency", 0, "with --batch: executions in flight at once (default: the sandbox's max_concurrency)")
	fs.StringVar(&f.expr, "e", "", "the code (a function body) to run")
	fs.StringVar(&user, "user", "", "user id, for session tiers")
	fs.StringVar(&session, "session", "", "session id, for session tiers")
	fs.StringVar(&tool, "tool", "", "names the invocation for the per-user tool library")
	fs.BoolVar(&stateful, "stateful", false, "run in the session's long-lived interpreter (tier 2): with --batch, the lines share their top-level names like notebook cells; --stateful=false asks for a fresh process where the sandbox's policy makes session runs stateful")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if rf.remoteWanted() {
		for _, local := range []string{"batch", "concurrency", "config", "sandbox", "user", "tool", "memory"} {
			if isFlagSet(fs, local) {
				fmt.Fprintf(e.stderr, "orqest-sandbox run: --%s does not apply with a server (--addr or $%s): the server's policy and sandbox apply, and its token names the user\n", local, addrEnv)
				return exitError
			}
		}
		code, err := readCode(e, f.expr, isFlagSet(fs, "e"), pos, true)
		if err == nil && missingCode(code) {
			err = errEmptyCode
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "orqest-sandbox run: %v\n", err)
			return exitError
		}
		if _, err := f.request(code); err != nil {
			fmt.Fprintf(e.stderr, "orqest-sandbox run: %v\n", err)
			return exitError
		}
		rf.session = session
		var st *bool
		if isFlagSet(fs, "stateful") {
			st = &stateful
		}
		return runRemote(ctx, e, rf, f, code, st)
	}
	if isFlagSet(fs, "batch") {
		if isFlagSet(fs, "e") || len(pos) > 0 || f.args != "" || tool != "" {
			fmt.Fprintln(e.stderr, "orqest-sandbox run: --batch takes the code and args from its lines: no -e, FILE, --args or --tool")
			return exitError
		}
		if batch == "" || concurrency < 0 {
			fmt.Fprintln(e.stderr, "orqest-sandbox run: --batch needs a FILE or - and --concurrency a count ≥ 0")
			return exitError
		}
		f.stateful, f.stateless = stateful, isFlagSet(fs, "stateful") && !stateful
		return runBatch(ctx, e, f, batch, concurrency, user, session)
	}
	code, err := readCode(e, f.expr, isFlagSet(fs, "e"), pos, true)
	if err == nil && missingCode(code) {
		err = errEmptyCode
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "orqest-sandbox run: %v\n", err)
		return exitError
	}
	req, err := f.request(code)
	if err != nil {
		fmt.Fprintf(e.stderr, "orqest-sandbox run: %v\n", err)
		return exitError
	}
	req.UserID, req.SessionID, req.ToolName, req.Stateful = user, session, tool, stateful
	req.Stateless = isFlagSet(fs, "stateful") && !stateful // --stateful=false: a fresh process whatever the sandbox's default

	h, sb, err := loadSandbox(ctx, f.config, f.sandbox)
	if err != nil {
		return reportErr(e, err)
	}
	defer h.Close()
	// Text output streams: the code's stdout and stderr are printed as it
	// writes them (at the end on a plugin without streaming). --json
	// prints one object at the end.
	var onChunk func(shared.OutputChunk)
	if !f.json {
		onChunk = func(c shared.OutputChunk) {
			w := e.stdout
			if c.Stream == shared.StreamStderr {
				w = e.stderr
			}
			_, _ = w.Write(c.Data)
		}
	}
	res, err := executeInSession(ctx, e, h, sb, req, onChunk) // session tiers: Open, Execute, Close (tools.go)
	if err != nil {
		return reportErr(e, err)
	}
	if onChunk != nil {
		res.Stdout, res.Stderr = "", "" // printed already
	}
	return printResult(e, res, f.json)
}

// errEmptyCode is run's refusal of a body that is empty or only white
// space.
var errEmptyCode = errors.New("no code: the body is empty (give -e CODE, a FILE, or - for stdin, holding the function body to run)")

// printResult prints an ExecutionResult and returns the exit code.
func printResult(e *env, res shared.ExecutionResult, asJSON bool) int {
	if asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintf(e.stderr, "orqest-sandbox: %v\n", err)
			return exitError
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		fmt.Fprint(e.stdout, res.Stdout)
		fmt.Fprint(e.stderr, res.Stderr)
		if res.StdoutTruncated {
			fmt.Fprintln(e.stderr, "orqest-sandbox: [stdout truncated]")
		}
		if res.StderrTruncated {
			fmt.Fprintln(e.stderr, "orqest-sandbox: [stderr truncated]")
		}
		if res.Success {
			fmt.Fprintf(e.stdout, "%s\n", res.Output)
		} else {
			printFailure(e, res)
		}
	}
	return exitCodeOf(res)
}

func printFailure(e *env, res shared.ExecutionResult) {
	if res.ErrorKind == shared.KindValidation && len(res.Findings) > 0 {
		fmt.Fprintln(e.stderr, "rejected by validation:")
		for _, f := range res.Findings {
			fmt.Fprintf(e.stderr, "%s\n", f)
		}
		return
	}
	msg := strings.TrimRight(res.Error, "\n")
	if msg == "" {
		msg = "execution failed"
	}
	fmt.Fprintf(e.stderr, "error (%s): %s\n", res.ErrorKind, msg)
}

func exitCodeOf(res shared.ExecutionResult) int {
	switch {
	case res.Success:
		return exitOK
	case res.ErrorKind == shared.KindValidation:
		return exitRejected
	default:
		return exitFailed
	}
}

func cmdCall(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "call", "call [--config F] [--sandbox NAME] [--allow …] [--args JSON] [--timeout DUR] [--memory MB] [--json] --return EXPR (-e CODE | FILE | -)")
	var f execFlags
	var ret string
	f.register(fs)
	fs.StringVar(&f.expr, "e", "", "the code, e.g. a function definition")
	fs.StringVar(&ret, "return", "", "the expression whose value is returned (appended as `return EXPR`)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if strings.TrimSpace(ret) == "" {
		fmt.Fprintln(e.stderr, "orqest-sandbox call: --return EXPR is required")
		return exitError
	}
	code, err := readCode(e, f.expr, isFlagSet(fs, "e"), pos, true)
	if err != nil {
		fmt.Fprintf(e.stderr, "orqest-sandbox call: %v\n", err)
		return exitError
	}
	req, err := f.request(code)
	if err != nil {
		fmt.Fprintf(e.stderr, "orqest-sandbox call: %v\n", err)
		return exitError
	}
	h, sb, err := loadSandbox(ctx, f.config, f.sandbox)
	if err != nil {
		return reportErr(e, err)
	}
	defer h.Close()

	if f.json {
		req.Code = host.WithReturn(code, ret)
		res, err := sb.Execute(ctx, req)
		if err != nil {
			return reportErr(e, err)
		}
		return printResult(e, res, true)
	}
	out, err := host.RunInSandbox(ctx, sb, code, host.RunOptions{
		ReturnExpression: ret,
		Args:             req.Args,
		AllowedImports:   req.AllowedImports,
		Timeout:          req.Timeout,
		MemoryMB:         req.MemoryMB,
	})
	var re *host.RunError
	switch {
	case err == nil:
		fmt.Fprintf(e.stdout, "%s\n", out)
		return exitOK
	case errors.As(err, &re):
		var de *host.DiagnosticsError
		if errors.As(err, &de) {
			return reportErr(e, de)
		}
		fmt.Fprintf(e.stderr, "%v\n", err)
		switch re.Stage {
		case host.StageValidation:
			if errors.Is(err, shared.ErrInvalidArgument) {
				return exitError
			}
			return exitRejected
		case host.StageExecution:
			return exitFailed
		case host.StagePolicy:
			return exitError // the request is refused as configured, as for a bad configuration
		}
		return exitError
	default:
		return reportErr(e, err)
	}
}

type verdict struct {
	OK       bool             `json:"ok"`
	Findings []shared.Finding `json:"findings"`
}

func cmdValidate(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "validate", "validate [--config F] [--sandbox NAME] [--allow m1,m2] [--json] (-e CODE | FILE | -)")
	var config, sandbox, expr string
	var allow multiFlag
	var asJSON bool
	fs.StringVar(&config, "config", "", "policy file (default ./config.hcl, else the embedded default)")
	fs.StringVar(&sandbox, "sandbox", "", "sandbox whose policy applies (default: the policy's default sandbox)")
	fs.Var(&allow, "allow", "comma-separated modules to allow in addition to the policy's allowed_imports")
	fs.BoolVar(&asJSON, "json", false, `print {"ok": bool, "findings": [...]}`)
	fs.StringVar(&expr, "e", "", "the code (a function body) to check")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return flagErr(err)
	}
	code, err := readCode(e, expr, isFlagSet(fs, "e"), pos, true)
	if err != nil {
		fmt.Fprintf(e.stderr, "orqest-sandbox validate: %v\n", err)
		return exitError
	}
	// Validation needs the policy, not a plugin: nothing is launched.
	cfg, err := host.ReadConfig(config)
	if err != nil {
		return reportErr(e, err)
	}
	if sandbox == "" {
		sandbox = cfg.DefaultSandboxName()
	}
	sc, ok := cfg.SandboxConfigNamed(sandbox)
	if !ok {
		fmt.Fprintf(e.stderr, "orqest-sandbox validate: sandbox %q is not configured\n", sandbox)
		return exitError
	}
	findings := host.CheckCode(ctx, nil, cfg.SandboxPolicy(sc), code, allow...)
	if findings == nil {
		findings = []shared.Finding{}
	}
	v := verdict{OK: len(findings) == 0, Findings: findings}
	if asJSON {
		b, _ := json.Marshal(v)
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else if v.OK {
		fmt.Fprintln(e.stdout, "ok")
	} else {
		for _, f := range findings {
			fmt.Fprintf(e.stdout, "%s\n", f)
		}
	}
	if !v.OK {
		return exitRejected
	}
	return exitOK
}
