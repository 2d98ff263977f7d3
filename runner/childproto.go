package runner

import (
	"fmt"
	"sort"
	"strings"
)

//go:generate go run ./internal/genproto

// The fork-server's control protocol and the child's exit codes: the one
// place they are written. `go generate ./runner` writes them for the two
// other sides, as py/protocol.py (joined first into Program) and
// forkcore/protocol.h (included by forkcore.c); TestGeneratedProtocol
// fails when either file drifts from this one.
//
// Control messages are one JSON object per SOCK_SEQPACKET datagram, with
// the message type in "t":
//
//	zygote -> Go  {"t":"ready","pid","layers","missing","pidfds"} | {"t":"fatal","error"}
//	zygote -> Go  {"t":"idle","pid"} with SCM_RIGHTS [child socket, pidfd] ([child socket] without pidfds)
//	Go -> zygote  {"t":"took","pid","new"}  (exactly TookFormat: the C loop matches it whole)
//	Go -> zygote  {"t":"kill","pid"}  (exactly KillFormat; sent only to a zygote without pidfds)
//	zygote -> Go  {"t":"exit","pid","status","utime","stime"}
//	Go -> zygote  {"t":"warm","code","allowed_imports","classes"}  (code "": prepare the allowlist's environment only)
//
// A zygote keeps its children by pidfd where the kernel has them. Where
// pidfd_open is ENOSYS (gVisor's Sentry, kernels before 5.3) its ready
// message says "pidfds": false and it keeps them by pid: it is their
// parent, so it reaps them (SIGCHLD) and reports their exits as above, and
// Go kills a child by asking the zygote (the kill message), which signals
// only a child it has not reaped yet: a pid that cannot have been reused.
//
// and Go hands a pre-forked child its execution on the child's own socket:
// ExecFormat (its RLIMIT_AS in MB and RLIMIT_CPU in seconds) with the
// execution's four descriptors (stdin, stdout, stderr, response) as
// SCM_RIGHTS.
const (
	MsgReady = "ready"
	MsgFatal = "fatal"
	MsgIdle  = "idle"
	MsgTook  = "took"
	MsgExit  = "exit"
	MsgWarm  = "warm"
	MsgKill  = "kill"
)

// TookFormat is the took message, for fmt with the child's pid and
// whether the execution's body is new to the zygote (1: the child parses,
// checks and compiles it; 0: the zygote warmed it). Go writes exactly
// this; the C loop parses exactly this (no JSON parser in C) and, from the
// recent share of new bodies, decides whether the children it forks next
// copy the pages a new body writes too (see forkcore.c, orq_hot).
const TookFormat = `{"t":"took","pid":%d,"new":%d}`

// KillFormat is the kill message, for fmt with the child's pid: the zygote
// SIGKILLs that child and its process group if it has not reaped it yet,
// and ignores it otherwise. Go writes exactly this; the C loop parses
// exactly this.
const KillFormat = `{"t":"kill","pid":%d}`

// ExecFormat is the execution header a pre-forked child reads, for fmt
// with the memory limit (MB) and the CPU limit (s); 0 means none.
const ExecFormat = "r %d %d"

// ControlMax is the largest control message Go sends a zygote: a warm
// message carries a body of at most WarmMaxBytes, JSON-escaped.
const ControlMax = 1 << 17

// WarmMaxBytes is the largest body Go asks a zygote to warm; the runner
// keeps no accepted body larger than this (_orq_accepted_max_bytes).
const WarmMaxBytes = 16 << 10

// ExitCode is a status the runner or the fork-server's C loop exits with
// when it cannot run an execution (before or after user code): Go names it
// in the result instead of a bare number.
type ExitCode int

// The runner's exit codes. 0 is a normal end (the response is on fd 3).
const (
	ExitZygoteFailed ExitCode = 69 // the fork-server could not start or its loop ended (it reported why as "fatal" first)
	ExitCannotServe  ExitCode = 70 // no response channel, or the child could not start its execution
	ExitResponseLost ExitCode = 71 // the response could not be written to fd 3
	ExitMemory       ExitCode = 72 // the child ran out of memory outside user code (no memory left to build a response)
	ExitRlimits      ExitCode = 74 // the child's descriptor, file-size or core rlimits could not be set
	ExitParentGone   ExitCode = 75 // the parent (zygote) died before the child was sealed
	ExitLandlock     ExitCode = 76 // the child's Landlock domain could not be applied
	ExitSeccomp      ExitCode = 77 // the child's seccomp filter could not be installed
	ExitDescriptors  ExitCode = 78 // the execution's descriptors could not be set up
	ExitLimits       ExitCode = 79 // the execution's memory or CPU limit could not be applied
	ExitIDMap        ExitCode = 80 // the seal's helper could not map the user namespace to subordinate ids
)

var exitNames = map[ExitCode]struct{ ident, text string }{
	ExitZygoteFailed: {"ZYGOTE_FAILED", "the fork-server could not start or its loop ended"},
	ExitCannotServe:  {"CANNOT_SERVE", "the sandbox child could not start its execution"},
	ExitResponseLost: {"RESPONSE_LOST", "the sandbox child could not write its response"},
	ExitMemory:       {"MEMORY", "the sandbox child ran out of memory"},
	ExitRlimits:      {"RLIMITS", "the sandbox child's rlimits could not be set"},
	ExitParentGone:   {"PARENT_GONE", "the sandbox child's parent died before it was sealed"},
	ExitLandlock:     {"LANDLOCK", "Landlock could not be applied to the sandbox child"},
	ExitSeccomp:      {"SECCOMP", "the sandbox child's seccomp filter could not be installed"},
	ExitDescriptors:  {"DESCRIPTORS", "the sandbox child's descriptors could not be set up"},
	ExitLimits:       {"LIMITS", "the execution's memory or CPU limit could not be applied"},
	ExitIDMap:        {"ID_MAP", "newuidmap or newgidmap could not map the sandbox's user namespace"},
}

// String says what the exit code means ("" for a status that is not one).
func (c ExitCode) String() string { return exitNames[c].text }

// Known reports whether c is one of the runner's exit codes.
func (c ExitCode) Known() bool { _, ok := exitNames[c]; return ok }

func exitCodes() []ExitCode {
	out := make([]ExitCode, 0, len(exitNames))
	for c := range exitNames {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

const generatedHeader = "Code generated by runner/internal/genproto from runner/childproto.go. DO NOT EDIT."

// GeneratedPython returns py/protocol.py: the protocol's constants for the
// runner (module-level names prefixed _orq_).
func GeneratedPython() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n#\n# The fork-server's control protocol and the exit codes, as runner/childproto.go\n# states them.\n\n", generatedHeader)
	for _, m := range []string{MsgReady, MsgFatal, MsgIdle, MsgTook, MsgExit, MsgWarm, MsgKill} {
		fmt.Fprintf(&b, "_orq_msg_%s = %q\n", m, m)
	}
	fmt.Fprintf(&b, "_orq_exec_format = %q\n", ExecFormat)
	fmt.Fprintf(&b, "_orq_control_max = %d\n", ControlMax)
	fmt.Fprintf(&b, "_orq_warm_max_bytes = %d\n", WarmMaxBytes)
	for _, c := range exitCodes() {
		fmt.Fprintf(&b, "_orq_exit_%s = %d  # %s\n", strings.ToLower(exitNames[c].ident), int(c), c)
	}
	return b.String()
}

// GeneratedCHeader returns forkcore/protocol.h for the C loop.
func GeneratedCHeader() string {
	var b strings.Builder
	fmt.Fprintf(&b, "/* %s\n *\n * The fork-server's control protocol and the exit codes, as\n * runner/childproto.go states them. */\n#ifndef ORQ_PROTOCOL_H\n#define ORQ_PROTOCOL_H\n\n", generatedHeader)
	fmt.Fprintf(&b, "#define ORQ_TOOK_FORMAT %q\n", TookFormat)
	fmt.Fprintf(&b, "#define ORQ_KILL_FORMAT %q\n", KillFormat)
	fmt.Fprintf(&b, "#define ORQ_EXEC_FORMAT %q\n", ExecFormat)
	fmt.Fprintf(&b, "#define ORQ_CONTROL_MAX %d\n", ControlMax)
	for _, c := range exitCodes() {
		fmt.Fprintf(&b, "#define ORQ_EXIT_%s %d /* %s */\n", exitNames[c].ident, int(c), c)
	}
	b.WriteString("\n#endif\n")
	return b.String()
}
