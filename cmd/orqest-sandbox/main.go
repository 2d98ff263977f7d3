// Command orqest-sandbox is the operator CLI of orqest-sandbox: it runs and
// validates Python function bodies in a sandbox configured by an HCL policy,
// lists and checks backend plugins, checks policies, and serves a sandbox to
// agents over MCP.
//
//	orqest-sandbox run      [--config F] [--sandbox NAME] [--allow m1,m2] [--args JSON]
//	                        [--timeout DUR] [--memory MB] [--json] (-e CODE | FILE | -)
//	                        [--user U] [--session S] [--tool NAME]
//	orqest-sandbox run      --batch FILE|- [--concurrency N] [--config F] [--sandbox NAME]
//	                        [--allow …] [--timeout DUR] [--memory MB] [--user U] [--session S]
//	orqest-sandbox validate [--config F] [--allow m1,m2] [--json] (-e CODE | FILE | -)
//	orqest-sandbox call     [--config F] [--sandbox NAME] [--allow …] [--args JSON] --return EXPR (-e CODE | FILE)
//	orqest-sandbox plugins  list|check
//	orqest-sandbox policy   check [F]
//	orqest-sandbox bench    [--config F] [--sandbox NAME …] [-n N] [--concurrency C] [--json]
//	orqest-sandbox mcp      serve [--config F] [--sandbox NAME] [--http ADDR] [--token-file F]
//	orqest-sandbox run      --addr URL [--token-file F] [--session S] [--stateful] (-e CODE | FILE | -)
//	orqest-sandbox files    put LOCAL [REMOTE] | get REMOTE [LOCAL|-] | ls [PATH]
//	                        --addr URL [--token-file F] [--session S]
//	orqest-sandbox session  close NAME --addr URL [--token-file F]
//	orqest-sandbox sessions list [--json] --addr URL [--token-file F]
//	orqest-sandbox version
//
// Exit codes: 0 success; 1 the user's code failed (runtime error, timeout,
// memory, …); 2 the code was rejected by validation; 3 usage, configuration
// or infrastructure error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/orqest/sandbox/host"
)

// version is the CLI's version; set it with
// -ldflags "-X main.version=1.2.3".
var version = "0.1.0-dev"

// Exit codes of the CLI contract.
const (
	exitOK       = 0 // success
	exitFailed   = 1 // the user's code failed
	exitRejected = 2 // rejected by validation
	exitError    = 3 // usage, configuration or infrastructure error
)

// env is what a subcommand reads and writes; tests drive the binary, but the
// indirection keeps subcommands free of globals.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// command is one subcommand of the dispatch table.
type command struct {
	name     string
	synopsis string
	run      func(ctx context.Context, e *env, args []string) int
}

// commands is the dispatch table, in the order `help` lists them. A new
// subcommand (bench, mcp, tools) is one more entry here and a file with its
// run function.
var commands = []command{
	{"run", "run a function body in a sandbox and print its result", cmdRun},
	{"validate", "statically check a function body (runs nothing)", cmdValidate},
	{"call", "run code followed by `return EXPR` and print the value", cmdCall},
	{"plugins", "list|check the backend plugins the host can launch", cmdPlugins},
	{"policy", "check [F]: load a policy, launch its plugins, lint it", cmdPolicy},
	{"bench", "measure whole-system latency and throughput against a naive baseline", cmdBench},
	{"mcp", "serve [--http ADDR]: an MCP server (spawn_tool, run_python, spawned tools)", cmdMCP},
	{"tools", "list|promote|forget --user U: manage a user's tool library (session tiers)", cmdTools},
	{"files", "put|get|ls --addr URL [--session S]: a session's workspace on an `mcp serve --http` server", cmdFiles},
	{"session", "close|pause|resume NAME --addr URL: end, pause or resume a named session on an `mcp serve --http` server", cmdSession},
	{"sessions", "list [--json] --addr URL: the token's sessions on an `mcp serve --http` server", cmdSession},
	{"version", "print the version", cmdVersion},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	host.CleanupClients()
	os.Exit(code)
}

func dispatch(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitError
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		usage(e.stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	if host.CallerFromContext(ctx) == "" {
		ctx = host.WithCaller(ctx, cliCaller())
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(e.stderr, "orqest-sandbox: unknown command %q\n\n", name)
	usage(e.stderr)
	return exitError
}

// cliCaller is the caller the CLI's executions are audited under:
// "cli:<OS user>" (the numeric uid when the user has no name).
func cliCaller() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli:" + strconv.Itoa(os.Getuid())
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: orqest-sandbox <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.synopsis)
	}
	fmt.Fprintf(w, "\nRun `orqest-sandbox <command> -h` for a command's flags.\n"+
		"Exit codes: 0 success, 1 user code failed, 2 rejected by validation, 3 usage/configuration/infrastructure error.\n")
}

// newFlagSet returns a FlagSet that reports to e.stderr and never exits.
func newFlagSet(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: orqest-sandbox %s\n\nFlags:\n", synopsis)
		printFlags(e.stderr, fs)
	}
	return fs
}

// printFlags lists fs's flags as the usage line spells them: --name for
// long flags, -e for one-letter ones (flag.PrintDefaults writes -name).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		line := "  " + dash + f.Name
		if arg != "" {
			line += " " + arg
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		switch f.DefValue {
		case "", "0", "false", "[]":
		default:
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}

// parseFlags parses args allowing flags after positional arguments
// (`run script.py --json`). "--" ends the flags; "-" is a positional
// argument (stdin).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagErr converts a flag parsing error into an exit code: -h is success.
func flagErr(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitError
}

// splitList splits "a,b , c" into [a b c].
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// multiFlag collects a repeatable flag whose values may also be
// comma-separated (--allow re --allow math,json).
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error {
	*m = append(*m, splitList(v)...)
	return nil
}

// reportErr prints an error on stderr: policy diagnostics with file:line:col
// and source snippets, anything else as one line.
func reportErr(e *env, err error) int {
	var de *host.DiagnosticsError
	if errors.As(err, &de) {
		de.WriteText(e.stderr)
		return exitError
	}
	fmt.Fprintf(e.stderr, "orqest-sandbox: %v\n", err)
	return exitError
}

// readCode returns the code from -e, a file, or stdin ("-"): exactly one.
func readCode(e *env, expr string, exprSet bool, pos []string, allowStdin bool) (string, error) {
	switch {
	case exprSet && len(pos) > 0:
		return "", fmt.Errorf("give the code either with -e or as FILE, not both (extra arguments: %q)", pos)
	case exprSet:
		return expr, nil
	case len(pos) == 0:
		return "", errors.New("no code: give -e CODE, a FILE, or - for stdin")
	case len(pos) > 1:
		return "", fmt.Errorf("one FILE only, got %q", pos)
	case pos[0] == "-":
		if !allowStdin {
			return "", errors.New("this command reads code from -e CODE or FILE, not stdin")
		}
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return "", fmt.Errorf("read stdin: %w", err)
		}
		return string(b), nil
	default:
		b, err := os.ReadFile(pos[0])
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
}

// isFlagSet reports whether the flag name was given.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
