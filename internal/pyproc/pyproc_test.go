package pyproc_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

const python = "/usr/bin/python3"

// groupMembers lists the living (not zombie) processes whose process group
// is pgid. (A killed grandchild is reaped by whoever adopted it: init, or
// here possibly nobody; a zombie runs nothing.)
func groupMembers(pgid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp ...
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// A child that may fork (seccomp disabled, as where the layer is not in
// force) leaves a grandchild behind in its process group: when Spawn or
// Run returns, the group is empty.
func TestDescendantsKilled(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip(err)
	}
	disable := []string{runner.LayerSeccomp}
	ctx := context.Background()
	s, err := pyproc.Probe(ctx, runner.Argv(python), disable, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The Python-level layers are out of the way so that os.fork is reached.
	rules := json.RawMessage(`{"safe_builtins":["print","int","len","range","True","False","None"]}`)
	code := "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\nreturn os.getpid()"
	job := func() pyproc.Job {
		return pyproc.Job{
			Request: runner.Request{Code: code, AllowedImports: []string{"os", "time"}, Rules: rules},
			Limits:  shared.Resolved{Timeout: 10 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
		}
	}
	check := func(mode string, out json.RawMessage) {
		t.Helper()
		pid, err := strconv.Atoi(string(out))
		if err != nil {
			t.Fatalf("%s: output %s", mode, out)
		}
		if m := groupMembers(pid); len(m) > 0 {
			t.Errorf("%s: process group %d still has %v", mode, pid, m)
		}
	}
	j := job()
	j.Request.Seal = s.Seal(disable)
	res, err := pyproc.Spawn(ctx, noCheckerArgv(), j, nil)
	if err != nil || !res.Success {
		t.Fatalf("spawn: %v %+v", err, res)
	}
	check("spawn", res.Output)

	fs, err := pyproc.StartForkServer(append(noCheckerArgv(), runner.ForkServerArg),
		runner.ForkServerConfig{Seal: s.Seal(disable), Rules: rules}, pyproc.ForkServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	res, err = fs.Run(ctx, job())
	if err != nil || !res.Success {
		t.Fatalf("fork-server: %v %+v", err, res)
	}
	check("fork-server", res.Output)
}

// noCheckerArgv runs the runner with the Python-level layers out of the
// way (as plugins/subprocess's containment tests do): a checker that
// accepts everything and no audit hook. What is left are the kernel layers.
func noCheckerArgv() []string {
	prog := runner.Program()
	i := strings.Index(prog, "\ndef _orq_main(")
	prog = prog[:i] + `
def _orq_check(code, allowed_imports, rules, classes=False):
    return []


def _orq_audit_arm(rules, allowed, workspace=None):
    return {"armed": False}
` + prog[i:]
	return runner.ArgvFor(python, prog)
}

// The plain path: a result, stdout, a timeout and a runtime error, in both
// modes.
func TestSpawnAndForkServer(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	rules := json.RawMessage(validator.RulesJSON())
	s, err := pyproc.Probe(ctx, runner.Argv(python), nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := pyproc.StartForkServer(runner.ForkServerArgv(python), runner.ForkServerConfig{Seal: s.Seal(nil), Rules: rules}, pyproc.ForkServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	// The wall clock is short only where the body must hit it: a spawned
	// interpreter on a loaded machine can take longer than that to start.
	for _, c := range []struct {
		code, want, kind string
		timeout          time.Duration
	}{
		{"print('hi')\nreturn 6*7", "42", "", 20 * time.Second},
		{"while True:\n    pass", "", "timeout", 500 * time.Millisecond},
		{"return 1/0", "", "runtime", 20 * time.Second},
	} {
		job := pyproc.Job{Request: runner.Request{Code: c.code, Rules: rules, Seal: s.Seal(nil)}, Limits: shared.Resolved{Timeout: c.timeout, MemoryMB: 128, MaxOutputBytes: 1 << 16}}
		sres, serr := pyproc.Spawn(ctx, runner.Argv(python), job, nil)
		job.Request.Seal = nil
		fres, ferr := fs.Run(ctx, job)
		for mode, r := range map[string]struct {
			ok   bool
			out  string
			kind string
			err  error
		}{"spawn": {sres.Success, string(sres.Output), string(sres.ErrorKind), serr}, "fork": {fres.Success, string(fres.Output), string(fres.ErrorKind), ferr}} {
			if r.err != nil || r.out != c.want || r.kind != c.kind {
				t.Errorf("%s %q: out %q kind %q err %v", mode, c.code, r.out, r.kind, r.err)
			}
		}
	}
}
