// Package runnertest holds variants of the runner program for tests of
// the processes that run it (internal/pyproc, plugins/subprocess).
package runnertest

import (
	"strings"

	"github.com/orqest/sandbox/runner"
)

// CheckRecordingProgram returns runner.Program() with the in-child
// checker wrapped so that every process that runs it appends its pid to
// the list sys.orq_checked_in (a fork-server child inherits its zygote's
// list). A body allowed to import sys and os tells whether its own process
// checked it: `os.getpid() in sys.orq_checked_in`.
func CheckRecordingProgram() string {
	return insertBefore("\ndef _orq_main(", `
_orq_check_real = _orq_check
__import__("sys").orq_checked_in = []


def _orq_check(code, allowed_imports, rules, classes=False):
    __import__("sys").orq_checked_in.append(__import__("os").getpid())
    return _orq_check_real(code, allowed_imports, rules, classes)
`)
}

// insertBefore returns runner.Program() with code inserted before marker.
func insertBefore(marker, code string) string {
	prog := runner.Program()
	i := strings.Index(prog, marker)
	if i < 0 {
		panic("runnertest: runner layout changed: no " + strings.TrimSpace(marker))
	}
	return prog[:i] + code + prog[i:]
}

// FaultRecordingProgram is the runner program with one change: a
// fork-server child records its minor page faults so far
// (sys.orq_flt0) when it starts serving its execution, before it reads
// the request; a body can then return how many faults its execution took.
func FaultRecordingProgram() string {
	return insertBefore("\nif __name__ == \"__main__\":", `
_orq_serve_real = _orq_forkserver_serve


def _orq_forkserver_serve(rules, max_procs=0, hold=-1):
    import resource
    import sys

    sys.orq_flt0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    _orq_serve_real(rules, max_procs, hold)
`)
}
