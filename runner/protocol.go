// Package runner holds the one Python runner every orqest-sandbox tier
// executes (py/: imports, execute, seal, zygote), the Go side of its child
// protocol, and the fork-server's C loop (forkcore/).
//
// The program (the in-child checker of package rules, then the runner
// parts) is run as
//
//	/usr/bin/python3 -I -S -B -c <Bootstrap> <ProgramArg(Program())>
//
// The protocol is one JSON document each way:
//
//   - the parent writes a Request to the child's stdin and closes it;
//   - the child writes a Response to fd 3 (passed as the first extra file)
//     and exits 0;
//   - everything the user's code prints goes to the child's real fd 1 and 2,
//     which the parent captures (with caps) separately.
//
// A child that exits without a Response was killed (timeout, CPU limit,
// memory) or crashed; the parent classifies that from the wait status.
//
// The types are backend-neutral so the tier-0 (embedded CPython), tier-1
// (subprocess / fork-server) and tier-2 (in-container) backends share them.
package runner

import (
	"bytes"
	"compress/zlib"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared"
)

// The runner, split by job; Program joins the parts in this order.
var (
	//go:embed py/protocol.py
	protocolPy string
	//go:embed py/imports.py
	importsPy string
	//go:embed py/execute.py
	executePy string
	//go:embed py/seal.py
	sealPy string
	//go:embed py/keep.py
	keepPy string
	//go:embed py/zygote.py
	zygotePy string
)

// Program returns the Python program the child runs with -c: the
// protocol's constants (generated from childproto.go), the in-child checker,
// then the runner. Every name it defines at module level is
// prefixed `_orq_`.
//
// Lines that hold only a comment are left out (the program travels as one
// argument, which the kernel bounds): the sources keep their comments, the
// interpreter gets the same code (TestProgramSameCodeWithoutComments).
func Program() string { return program }

// program is Program's text, joined and stripped once.
var program = stripCommentLines(ProgramWithComments())

// ProgramWithComments is Program with its comment lines.
func ProgramWithComments() string {
	return protocolPy + "\n\n" + rules.CheckerPy() + "\n" + importsPy + "\n\n" + executePy + "\n\n" + sealPy + "\n\n" + zygotePy
}

// KeepProgram returns py/keep.py, the encoding of a session's saved
// globals (OpSaveGlobals, OpLoadGlobals), for Request.Keep: a session's
// interpreter compiles it when it starts, before any call, rather than
// every process carrying it in Program.
func KeepProgram() string { return keepProgram }

var keepProgram = stripCommentLines(keepPy)

// stripCommentLines drops the lines whose first non-blank character is
// '#' and the blank lines, and indents each level by one space instead of
// four, outside triple-quoted strings (whose lines it keeps as they are).
// A mistake would change the program: the test compares the two
// programs' syntax trees.
func stripCommentLines(src string) string {
	var b strings.Builder
	b.Grow(len(src))
	inString := false
	for line := range strings.Lines(src) {
		quotes := strings.Count(line, `"""`)
		if inString {
			b.WriteString(line)
			if quotes%2 == 1 {
				inString = false
			}
			continue
		}
		t := strings.TrimLeft(line, " ")
		if strings.HasPrefix(t, "#") || strings.TrimSpace(t) == "" {
			continue
		}
		n := len(line) - len(t)
		b.WriteString(strings.Repeat(" ", n/4+n%4))
		b.WriteString(t)
		if quotes%2 == 1 {
			inString = true
		}
	}
	return b.String()
}

// PythonFlags are the interpreter flags every tier runs the program with:
// isolated mode (no environment variables, no user site, no script dir on
// sys.path), no site module, no .pyc writing.
var PythonFlags = []string{"-I", "-S", "-B"}

// Bootstrap is the -c command of every interpreter that runs the program:
// it decodes the program given as the next argument (ProgramArg: zlib,
// then base64), compiles and runs it, and takes it out of sys.argv. The
// program is not the -c command itself because CPython keeps the AST of a
// -c command alive until the command returns, which a fork-server zygote
// never does: ~3.5 MB of AST for this program that every fork would copy
// page tables for and every child exit would unmap. It travels compressed
// because Linux bounds one argument to MAX_ARG_STRLEN (128 KB), which the
// plain text nears. zlib and binascii are built into the interpreter (no
// file is opened). Nothing is bound in __main__ but what the program
// defines.
const Bootstrap = `exec(compile(__import__("zlib").decompress(__import__("binascii").a2b_base64(__import__("sys").argv.pop(1))), "<string>", "exec"))`

// ProgramArg returns prog (Program(), or a test variant of it) encoded as
// the argument Bootstrap decodes: zlib-compressed, then base64 (an
// argument cannot hold a NUL byte).
func ProgramArg(prog string) string {
	if prog == program {
		return programArg
	}
	return encodeProgram(prog)
}

// programArg is Program's ProgramArg, encoded once.
var programArg = encodeProgram(program)

func encodeProgram(prog string) string {
	var b bytes.Buffer
	w, err := zlib.NewWriterLevel(&b, zlib.BestCompression)
	if err != nil {
		panic(err) // only for an invalid level
	}
	w.Write([]byte(prog)) // a bytes.Buffer does not fail
	w.Close()
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// ArgvFor returns the argument vector that runs prog (Program(), or a test
// variant of it) with the interpreter at python, followed by extra
// arguments (ForkServerArg).
func ArgvFor(python, prog string, extra ...string) []string {
	a := append([]string{python}, PythonFlags...)
	a = append(a, "-c", Bootstrap, ProgramArg(prog))
	return append(a, extra...)
}

// Argv returns the full argument vector for running the program with the
// interpreter at python.
func Argv(python string) []string { return ArgvFor(python, Program()) }

// OpExecute runs one request.
const OpExecute = "execute"

// OpProbe seals the process as Request.Seal asks (an empty object means
// every layer) and reports the layers in force (a ProbeResult as the
// Response's output) without running code.
const OpProbe = "probe"

// OpSession makes a spawned runner a stateful session's interpreter (a
// notebook): it seals itself as Request.Seal asks, then serves calls on
// fd 3, a SOCK_SEQPACKET socket, one after another in the same globals,
// until that socket reaches end-of-file. Its Request carries the session's
// Rules (a call whose rules are JSON null uses them); Code is not run. Per
// call the parent sends ExecFormat (the call's memory limit in MB and CPU
// seconds) with the call's stdin, stdout, stderr and response descriptors as
// SCM_RIGHTS; the interpreter writes the Response to the fourth and closes
// all four. A stateful body's top-level names are globals of the session
// (the wrapper declares them global), so `return` still works at top level.
// See _orq_session_serve in py/execute.py and pyproc.Notebook.
const OpSession = "session"

// OpSaveGlobals and OpLoadGlobals are the ops of a session's call (after
// OpSession) that save its globals as plain data and load them back, for
// a pause that keeps no memory: the response's output is
// {"globals": {name: node}, "kept": [names], "not_kept": {name: reason}}
// (saving) or {"kept", "not_kept"} (loading Args, a saved "globals"
// object). The encoding is a typed JSON tree, never pickle; see
// py/keep.py.
const (
	OpSaveGlobals = "save_globals"
	OpLoadGlobals = "load_globals"
)

// ForkServerArg is the argument that makes the program a fork-server
// (zygote): `python3 -I -S -B -c <Bootstrap> <ProgramArg(Program())> forkserver`. It reads a
// ForkServerConfig from stdin and serves a SOCK_SEQPACKET control socket on
// fd 3; see _orq_forkserver_main in runner.py for the messages.
const ForkServerArg = "forkserver"

// ForkServerArgv returns the argument vector that starts a fork-server.
func ForkServerArgv(python string) []string {
	return append(Argv(python), ForkServerArg)
}

// Seal configures the kernel sealing layers the runner applies before any
// user code runs (see _orq_seal_prepare in py/seal.py). Layer names are
// those of ProbeResult.Layers. Encoded, it also carries this
// architecture's KernelTable (see MarshalJSON): the system call numbers,
// constants and seccomp programs the runner uses.
type Seal struct {
	// UID and GID are the unprivileged ids the runner drops to when it
	// starts as root (0 means 65534, nobody).
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// ReadPaths are files and directories the sandbox may read besides the
	// interpreter's stdlib (the shared libraries of extension modules).
	ReadPaths []string `json:"read_paths,omitempty"`
	// WritePaths are directories the sandbox may read and write: create,
	// write and truncate regular files, make and remove directories,
	// remove and rename below them, nothing else (no link, symbolic link,
	// device, socket or FIFO; the seccomp workspace programs that let
	// mkdirat, unlinkat and renameat through are used only while Landlock
	// confines them here). What the sandbox creates is made under umask 0
	// (the serving runtime reaches it through its "other" bits). Empty:
	// the sandbox writes nothing anywhere. Tier 2 grants its session's
	// workspace.
	WritePaths []string `json:"write_paths,omitempty"`
	// MaxFileBytes is the RLIMIT_FSIZE of a sandbox with WritePaths (0
	// means shared.DefaultMaxFileBytes): a write past it fails with EFBIG
	// (OSError "File too large"). Without WritePaths it is 0: no file
	// grows at all.
	MaxFileBytes int64 `json:"max_file_bytes,omitempty"`
	// Require lists layers whose absence fails the process closed.
	Require []string `json:"require,omitempty"`
	// Disable lists layers not to attempt (tests of degradation).
	Disable []string `json:"disable,omitempty"`
	// MaxProcs is the RLIMIT_NPROC of every process that runs user code (0
	// means DefaultMaxProcs): it caps the threads one escaped call can
	// start. The kernel counts the tasks of the child's uid in its user
	// namespace (all children of one zygote share it), or of its real uid
	// where the user-namespace layer is not in force.
	MaxProcs int `json:"max_procs,omitempty"`
	// SubIDs, when the runner does not start as root, are the subordinate
	// ids its user namespace maps UID and GID to (with the setuid helpers
	// newuidmap and newgidmap), so that the kernel checks files against an
	// id no account owns rather than the service account's. Nil:
	// SubIDsMissing says why, and the separate_uid layer is missing.
	SubIDs        *SubIDs `json:"subids,omitempty"`
	SubIDsMissing string  `json:"subids_missing,omitempty"`
	// Egress is the session's egress proxy (SetEgress); nil: none, and
	// the sandbox has no network at all. With it the sandbox stays in the
	// network namespace it starts in, the seccomp net programs let a TCP
	// client through, Landlock (ABI >= 4) lets connect reach Egress.Port
	// only, and urllib.request is the runner's view through the proxy.
	Egress *Egress `json:"egress,omitempty"`
}

// SubIDs are one subordinate uid and gid of the account the runner starts
// as (its /etc/subuid and /etc/subgid ranges) and the helpers that may
// write them into a user namespace's uid_map and gid_map.
type SubIDs struct {
	UID       int    `json:"uid"`
	GID       int    `json:"gid"`
	NewUIDMap string `json:"newuidmap"`
	NewGIDMap string `json:"newgidmap"`
}

// DefaultMaxProcs is Seal.MaxProcs when it is 0.
const DefaultMaxProcs = 128

// Sealing layers the runner knows.
const (
	LayerNoNewPrivs      = "no_new_privs"
	LayerUnprivilegedUID = "unprivileged_uid"
	LayerUserNamespace   = "user_namespace"
	// LayerSeparateUID: the kernel uid user code runs as is not the
	// plugin's: 65534 when the plugin is root, a subordinate uid mapped
	// through newuidmap otherwise (Seal.SubIDs).
	LayerSeparateUID  = "separate_uid"
	LayerNetNamespace = "network_namespace"
	// LayerProcHidden: a mount namespace of the sandbox's own with an
	// empty read-only tmpfs on /proc, so no host pid is visible.
	LayerProcHidden    = "proc_hidden"
	LayerLandlockFS    = "landlock_fs"
	LayerLandlockNet   = "landlock_net"
	LayerLandlockScope = "landlock_scope"
	LayerSeccomp       = "seccomp"
)

// Layers lists every sealing layer, in the order the runner applies them.
var Layers = []string{LayerNoNewPrivs, LayerUnprivilegedUID, LayerUserNamespace, LayerSeparateUID, LayerNetNamespace,
	LayerProcHidden, LayerLandlockFS, LayerLandlockNet, LayerLandlockScope, LayerSeccomp}

// LayerCapability is the capability a backend declares when layer is in
// force ("" for a layer the runner does not know).
func LayerCapability(layer string) shared.Capability {
	switch layer {
	case LayerNoNewPrivs:
		return shared.CapNoNewPrivs
	case LayerUnprivilegedUID:
		return shared.CapUnprivilegedUID
	case LayerUserNamespace:
		return shared.CapUserNamespace
	case LayerSeparateUID:
		return shared.CapSeparateUID
	case LayerNetNamespace:
		return shared.CapNetworkNamespace
	case LayerLandlockFS:
		return shared.CapLandlockFS
	case LayerLandlockNet:
		return shared.CapLandlockNet
	case LayerLandlockScope:
		return shared.CapLandlockScope
	case LayerSeccomp:
		return shared.CapSeccomp
	}
	return ""
}

// KnownCapabilities lists, sorted and once each, base and the capability
// of every layer: what a backend's `require` may name.
func KnownCapabilities(base []shared.Capability) []string {
	seen := map[string]bool{}
	for _, c := range base {
		seen[string(c)] = true
	}
	for _, l := range Layers {
		seen[string(LayerCapability(l))] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// ProbeResult is the output of an OpProbe request.
type ProbeResult struct {
	Layers  []string          `json:"layers"`
	Missing map[string]string `json:"missing"`
	// Stdlib lists the interpreter's stdlib directories (sys.path).
	Stdlib []string `json:"stdlib"`
}

// ForkServerConfig is what a fork-server reads from its stdin.
type ForkServerConfig struct {
	// Preload lists modules imported once in the zygote, so children
	// start with them imported.
	Preload []string `json:"preload,omitempty"`
	Seal    *Seal    `json:"seal,omitempty"`
	// Pool is how many children the zygote keeps pre-forked, warmed up and
	// sealed, waiting for an execution (0 means 2; at most 8). Each serves
	// exactly one execution.
	Pool int `json:"pool,omitempty"`
	// Rules is the rules table, parsed once by the zygote: a request whose
	// rules are JSON null (RulesFromServer) uses it.
	Rules json.RawMessage `json:"rules,omitempty"`
	// CoreFD is the zygote's descriptor of forkcore.c built as a shared
	// object (a sealed memfd; 0: none): the zygote then runs its fork loop
	// in C, and falls back to Python when it cannot load it.
	CoreFD int `json:"core_fd,omitempty"`
	// NoHotPages turns off the C loop's hot pages: by default the zygote
	// learns, from two training children (a warm body, then one new to
	// it), which of its pages a child writes during an execution and
	// which more a new body's parse, check and compile write, and every
	// pre-forked child copies the first set while idle (madvise
	// MADV_POPULATE_WRITE), and the second while most recent executions
	// had a new body, instead of taking a copy-on-write fault per page
	// during its execution. Costs each idle child that many private pages
	// (its ready message says how many: ~1-2 MB).
	NoHotPages bool `json:"no_hot_pages,omitempty"`
	// Prepare lists modules whose environment (runner.Request.
	// AllowedImports = Prepare, with Classes) the zygote prepares, after it
	// sealed itself and before it forks its first child: they are
	// imported then, so a first execution importing them finds them
	// loaded. ExtraSysPath and ExtraReadPaths are those of the requests
	// to come (where the modules are).
	Prepare        []string `json:"prepare,omitempty"`
	Classes        bool     `json:"classes,omitempty"`
	ExtraSysPath   []string `json:"extra_sys_path,omitempty"`
	ExtraReadPaths []string `json:"extra_read_paths,omitempty"`
}

// RulesFromServer, as Request.Rules, tells a fork-server child to use the
// rules table of its zygote's ForkServerConfig.
var RulesFromServer = json.RawMessage("null")

// KindInternal is the error_kind the runner reports for a failure of the
// runner itself (malformed request, broken in-child checker). It is not a
// user-code outcome: backends turn it into a Go error (shared.ErrInternal).
const KindInternal = "internal"

// Request is what the parent writes to the child's stdin.
type Request struct {
	Op             string          `json:"op"`
	Code           string          `json:"code"`
	Args           json.RawMessage `json:"args"`
	AllowedImports []string        `json:"allowed_imports"`
	// Rules is the rules table (validator.RulesJSON()): the in-child checker
	// reads it and the runner builds __builtins__ from its safe_builtins.
	Rules json.RawMessage `json:"rules"`
	// MaxOutputBytes, MemoryMB and CPUSeconds are the execution's
	// resolved limits (WithLimits sets them from shared.Resolved).
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	MemoryMB       int `json:"memory_mb,omitempty"`
	CPUSeconds     int `json:"cpu_seconds,omitempty"`
	// LimitsApplied says RLIMIT_AS and RLIMIT_CPU are already in force
	// (a fork-server child of the C loop sets them before it reads this
	// request): the runner does not set them again.
	LimitsApplied bool `json:"limits_applied,omitempty"`
	// Seal, when set, makes the spawn-mode runner seal itself before it
	// runs the code (a fork-server child is sealed by its zygote's config).
	Seal *Seal `json:"seal,omitempty"`
	// Classes allows class statements (validator.Features.Classes): the
	// in-child checker accepts them and the runner hands out
	// __build_class__ and the class builtins.
	Classes bool `json:"classes,omitempty"`
	// ExtraSysPath lists directories appended to sys.path (after the
	// stdlib) before the allowed imports are loaded: a tier-2 agent's venv
	// site-packages, which -S keeps site.py from adding.
	ExtraSysPath []string `json:"extra_sys_path,omitempty"`
	// ExtraReadPaths lists absolute directories, besides sys.path and the
	// stdlib, whose files the audit hook lets the body's imports read:
	// package data read at import time (Debian's /usr/share/matplotlib).
	// The seal's ReadPaths must grant them too (Landlock is the wall).
	ExtraReadPaths []string `json:"extra_read_paths,omitempty"`
	// Workspace is an absolute directory the body may read and write (its
	// Seal, or its zygote's, must list it in WritePaths: the kernel's
	// wall). The runner's audit hook lets the rules table's
	// runtime.workspace_events reach paths below it; the body finds it as
	// the builtin `workspace` (read_bytes, read_text, write_bytes,
	// write_text, mkdir, remove, rmdir, rename, list, path); and matplotlib figures the body leaves open
	// are saved there as figure-N.png when it returns. Empty: none of this.
	Workspace string `json:"workspace,omitempty"`
	// CoreFD is, in a process of one execution (spawn mode), the
	// descriptor of forkcore.c built as a shared object (0: none): the
	// runner's audit hook then runs in C (runner/forkcore/audit.h), its
	// armed state out of Python's reach; without it the Python hook runs.
	CoreFD int `json:"core_fd,omitempty"`
	// Keep is, for OpSession, KeepProgram(): the interpreter compiles it
	// before its first call and serves OpSaveGlobals and OpLoadGlobals
	// with it ("": it serves neither).
	Keep string `json:"keep,omitempty"`
}

// Response is what the child writes to fd 3.
type Response struct {
	Success   bool             `json:"success"`
	Output    json.RawMessage  `json:"output,omitempty"`
	Error     string           `json:"error,omitempty"`
	ErrorKind string           `json:"error_kind,omitempty"`
	Findings  []shared.Finding `json:"findings,omitempty"`
}

// WithLimits returns r with the limits the child enforces taken from l:
// memory_mb, cpu_seconds (l.CPUSeconds, the contract's formula) and
// max_output_bytes. Every backend that runs the runner hands its resolved
// limits on through it.
func (r Request) WithLimits(l shared.Resolved) Request {
	r.MemoryMB, r.CPUSeconds, r.MaxOutputBytes = l.MemoryMB, l.CPUSeconds(), l.MaxOutputBytes
	return r
}

// Encode renders the request as the single JSON document the child reads.
func (r Request) Encode() ([]byte, error) {
	if r.Op == "" {
		r.Op = OpExecute
	}
	args, err := shared.NormalizeArgs(r.Args)
	if err != nil {
		return nil, err
	}
	r.Args = args
	if len(bytes.TrimSpace(r.Rules)) == 0 {
		r.Rules = json.RawMessage("{}")
	}
	if r.AllowedImports == nil {
		r.AllowedImports = []string{}
	}
	return json.Marshal(r)
}

// MaxErrorBytes caps the error text (e.g. a traceback) copied into a result.
const MaxErrorBytes = 64 << 10

// Apply copies the response into res (success, output, error, error_kind,
// findings). A runner-internal failure is returned as an error wrapping
// shared.ErrInternal and leaves res untouched.
func (r Response) Apply(res *shared.ExecutionResult) error {
	if r.ErrorKind == KindInternal {
		return fmt.Errorf("python runner: %s: %w", r.Error, shared.ErrInternal)
	}
	res.Success = r.Success
	if r.Success {
		res.Output = r.Output
		res.Error, res.ErrorKind = "", shared.KindNone
		return nil
	}
	res.Output = nil
	res.Error = TruncateUTF8(r.Error, MaxErrorBytes)
	res.ErrorKind = shared.ErrorKind(r.ErrorKind)
	if res.ErrorKind == shared.KindNone {
		res.ErrorKind = shared.KindRuntime
	}
	res.Findings = r.Findings
	return nil
}

// TruncateUTF8 returns s cut to at most n bytes without splitting a UTF-8
// sequence.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
