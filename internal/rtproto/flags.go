package rtproto

import (
	"fmt"
	"strings"
)

// The agent runtime's command-line flags that a session backend sets from
// its configuration (RuntimeFlags.Args); the runtime parses the same names.
const (
	// FlagClasses: bodies may define classes.
	FlagClasses = "classes"
	// FlagPrepare: comma-separated modules the session's interpreters
	// import before the first call.
	FlagPrepare = "prepare"
	// FlagStateful: session calls are stateful by default, so the default
	// agent's stateful interpreter is started before the first call.
	FlagStateful = "stateful"
	// FlagMemoryCgroup: the agent's memory is bounded by the kernel's
	// memory cgroup of its container, pod or sandbox, so its Python
	// processes get no address-space limit (RLIMIT_AS).
	FlagMemoryCgroup = "memory-cgroup"
	// FlagForkCore: the path, as the runtime sees it, of the fork
	// server's C loop (runner/forkcore built as a shared object), which
	// also carries the runner's audit hook and class guard in C.
	FlagForkCore = "forkcore"
)

// RuntimeFlags are what a session backend tells the agent runtime when it
// starts it. None is secret, and all are known before the hello line: an
// agent of the warm pool prepares itself with them before a session binds
// it.
type RuntimeFlags struct {
	// Classes is the policy's classes.
	Classes bool
	// Prepare is the policy's allowed_imports: the default agent's zygote
	// (and, with Stateful, its stateful interpreter) imports them before
	// the first call, so a body importing them finds them loaded.
	Prepare []string
	// Stateful is the sandbox's stateful.
	Stateful bool
	// MemoryCgroup says the backend capped the agent's memory with a
	// cgroup (a container's memory limit, a pod's, a gVisor sandbox's): a
	// call's memory is resident memory there, the kernel's to enforce.
	MemoryCgroup bool
	// ForkCore is where the backend put the fork server's C loop inside
	// the sandbox ("": the runtime's default, the image's own copy): its
	// interpreters, zygotes and one-call spawns alike, then run the
	// runner's audit hook and class guard in C.
	ForkCore string
}

// Check refuses a Prepare entry that is not a module name (empty, or
// with a comma or a space, which no module name has). A backend checks
// at Configure, so Args never meets one.
func (f RuntimeFlags) Check() error {
	for _, m := range f.Prepare {
		if m == "" || strings.ContainsAny(m, ", \t\n") {
			return fmt.Errorf("allowed_imports entry %q is not a module name", m)
		}
	}
	return nil
}

// Args returns the runtime's command-line arguments for f (Check first).
func (f RuntimeFlags) Args() []string {
	var a []string
	if f.Classes {
		a = append(a, "-"+FlagClasses)
	}
	if len(f.Prepare) > 0 {
		a = append(a, "-"+FlagPrepare, strings.Join(f.Prepare, ","))
	}
	if f.Stateful {
		a = append(a, "-"+FlagStateful)
	}
	if f.MemoryCgroup {
		a = append(a, "-"+FlagMemoryCgroup)
	}
	if f.ForkCore != "" {
		a = append(a, "-"+FlagForkCore, f.ForkCore)
	}
	return a
}
