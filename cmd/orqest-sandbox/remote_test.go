package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// startServer runs `orqest-sandbox mcp serve --http 127.0.0.1:0 args…` in
// dir and returns the URL it prints (its /mcp endpoint). The server is
// interrupted (it closes its sessions) and waited for when the test ends;
// its stderr is logged then if the test failed.
func startServer(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(cli, append([]string{"mcp", "serve", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stderr)
	var rest bytes.Buffer
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { wg.Wait(); done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Errorf("the server did not stop within 2 minutes of SIGINT")
			<-done
		}
		if t.Failed() && rest.Len() > 0 {
			t.Logf("server stderr:\n%s", rest.String())
		}
	})
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("the server printed no address: %v %q", err, line)
	}
	wg.Add(1)
	go func() { defer wg.Done(); io.Copy(&rest, rd) }()
	i := strings.Index(line, "://")
	if i < 0 {
		t.Fatalf("no URL in %q", line)
	}
	i = strings.LastIndex(line[:i], " ") + 1
	return strings.Fields(line[i:])[0]
}

// The CLI as a client of `mcp serve --http` on tier 2: `files put`, a
// `run` reading the upload and writing a file, and `files get` of that
// file, each its own process, share the named session S of the token's
// client; state carries between two stateful runs; another client's
// session of the same name is another session; the errors a user meets
// (no server, a refused token, an unknown session, an oversize file, a
// path outside the workspace) say what is wrong; SIGINT to the server
// leaves no container behind.
func TestFilesCLIThroughServer(t *testing.T) {
	needDockerPlugin(t)
	alice, bob := "orqtest-clifa-"+randomID(), "orqtest-clifb-"+randomID()
	t.Cleanup(func() {
		for _, u := range []string{alice, bob} {
			_ = exec.Command("docker", "volume", "rm", "-f", "orqest-user-"+u).Run()
		}
	})
	dir := t.TempDir()
	const aliceTok, bobTok = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte(alice+" "+aliceTok+"\n"+bob+" "+bobTok+"\n"), 0o600)
	aliceFile, bobFile := filepath.Join(dir, "alice.token"), filepath.Join(dir, "bob.token")
	os.WriteFile(aliceFile, []byte(aliceTok+"\n"), 0o600)
	os.WriteFile(bobFile, []byte(bobTok), 0o600)
	config := filepath.Join(dir, "config.hcl")
	os.WriteFile(config, []byte(`sandbox "docker" {
  plugin = "docker"
  config { image = "`+runtimeImage()+`" }
}
`), 0o644)
	// Registered before the server starts, so it runs after the server
	// stopped (cleanups run last in, first out).
	t.Cleanup(func() {
		for _, u := range []string{alice, bob} {
			out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=org.orqest.sandbox.user="+u).Output()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("containers of %s left after the server stopped: %q %v", u, out, err)
			}
		}
	})
	url := startServer(t, dir, "--config", config, "--token-file", tokens)
	as := func(tokFile string, args ...string) []string {
		return append(args, "--addr", url, "--token-file", tokFile)
	}

	local := filepath.Join(dir, "in.csv")
	os.WriteFile(local, []byte("a,b\n1,2\n3,4\n"), 0o644)
	if r := runCLIEnv(t, nil, "", as(aliceFile, "files", "put", local, "data.csv", "--session", "s1")...); r.code != exitOK {
		t.Fatalf("files put: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The server's address and token from the environment, as VAULT_ADDR
	// and VAULT_TOKEN.
	envAlice := []string{addrEnv + "=" + url, tokenEnv + "=" + aliceTok}
	r := runCLIEnv(t, envAlice, "", "run", "--session", "s1", "-e",
		"rows = workspace.read_text('data.csv').splitlines()\nprint('read', len(rows), 'rows')\nworkspace.write_text('sum.txt', str(sum(int(l.split(',')[0]) for l in rows[1:])))\nreturn len(rows)")
	if r.code != exitOK || r.stdout != "read 3 rows\n3\n" {
		t.Fatalf("run in s1: %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// sessions list: the token's sessions on the server, a table or JSON.
	if r := runCLIEnv(t, envAlice, "", "sessions", "list"); r.code != exitOK || !strings.Contains(r.stdout, "NAME") ||
		!regexp.MustCompile(`(?m)^s1\s+s-\S+\s+open\s`).MatchString(r.stdout) || !strings.Contains(r.stdout, "of max_sessions_per_user 8") {
		t.Errorf("sessions list: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLIEnv(t, envAlice, "", "sessions", "list", "--json"); r.code != exitOK {
		t.Errorf("sessions list --json: %d %s", r.code, r.stderr)
	} else {
		var l sessionListing
		if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || !slices.ContainsFunc(l.Sessions, func(s sessionEntry) bool { return s.Name == "s1" && s.ID != "" }) {
			t.Errorf("sessions list --json: %v %q", err, r.stdout)
		}
	}
	got := filepath.Join(dir, "sum.txt")
	if r := runCLIEnv(t, nil, "", as(aliceFile, "files", "get", "sum.txt", got, "--session", "s1")...); r.code != exitOK {
		t.Fatalf("files get: %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(got); string(b) != "4" {
		t.Errorf("sum.txt downloaded as %q, want 4", b)
	}
	if r := runCLIEnv(t, envAlice, "", "files", "get", "sum.txt", "-", "--session", "s1"); r.code != exitOK || r.stdout != "4" {
		t.Errorf("files get to stdout: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLIEnv(t, envAlice, "", "files", "ls", "--session", "s1"); r.code != exitOK || !strings.Contains(r.stdout, "data.csv") || !strings.Contains(r.stdout, "sum.txt") {
		t.Errorf("files ls: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// Two stateful runs, two processes, one interpreter.
	if r := runCLIEnv(t, envAlice, "", "run", "--session", "s1", "--stateful", "-e", "x = 41\nreturn x"); r.code != exitOK {
		t.Fatalf("stateful run 1: %d %s", r.code, r.stderr)
	}
	if r := runCLIEnv(t, envAlice, "", "run", "--session", "s1", "--stateful", "--json", "-e", "return x + 1"); r.code != exitOK || decodeResult(t, r).Output == nil || string(decodeResult(t, r).Output) != "42" {
		t.Errorf("stateful run 2: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// The client's default session and bob's s1 are other sessions.
	if r := runCLIEnv(t, envAlice, "", "files", "ls"); r.code != exitOK || strings.Contains(r.stdout, "data.csv") {
		t.Errorf("files ls of alice's default session: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLIEnv(t, nil, "", as(bobFile, "files", "get", "sum.txt", "-", "--session", "s1")...); r.code != exitError || !strings.Contains(r.stderr, `session "s1"`) || !strings.Contains(r.stderr, "not open") {
		t.Errorf("bob's get from his unopened s1: %d %q %s", r.code, r.stdout, r.stderr)
	}

	// The errors.
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no server", nil, []string{"files", "ls", "--addr", "http://127.0.0.1:1", "--token-file", aliceFile}, "cannot reach the server"},
		{"no address", []string{addrEnv + "="}, []string{"files", "ls", "--token-file", aliceFile}, "no server: give --addr"},
		{"bad token", []string{addrEnv + "=" + url, tokenEnv + "=not-the-token-not-the-token"}, []string{"files", "ls"}, "refused the token (401)"},
		{"no token", []string{addrEnv + "=" + url, tokenEnv + "="}, []string{"files", "ls"}, "no token"},
		{"unknown session", envAlice, []string{"files", "get", "sum.txt", "--session", "nope"}, `session "nope"`},
		{"bad session name", envAlice, []string{"files", "ls", "--session", "../s1"}, "identifier must match"},
		{"oversize", envAlice, []string{"files", "put", "-", "big.bin", "--session", "s1"}, "larger than 8388608 bytes"},
		{"path escaping", envAlice, []string{"files", "get", "../../etc/passwd", "--session", "s1"}, `no "." or ".." element`},
		{"absolute path", envAlice, []string{"files", "put", local, "/etc/passwd", "--session", "s1"}, "must be relative"},
		{"missing file", envAlice, []string{"files", "get", "nothere.txt", "--session", "s1"}, "nothere.txt"},
		{"local flag with a server", envAlice, []string{"run", "--user", "mallory", "-e", "return 1"}, "--user does not apply"},
	} {
		stdin := ""
		if c.name == "oversize" {
			stdin = strings.Repeat("x", shared.DefaultMaxFileBytes+1)
		}
		r := runCLIEnv(t, c.env, stdin, c.args...)
		if r.code != exitError || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, r.code, r.stderr, exitError, c.want)
		}
	}

	// close_session ends s1: its files are gone, the name is free again.
	if r := runCLIEnv(t, envAlice, "", "session", "close", "s1"); r.code != exitOK {
		t.Fatalf("session close: %d %s", r.code, r.stderr)
	}
	if r := runCLIEnv(t, envAlice, "", "files", "ls", "--session", "s1"); r.code != exitError || !strings.Contains(r.stderr, "not open") {
		t.Errorf("files ls after close: %d %q %s", r.code, r.stdout, r.stderr)
	}
}

// Without a server or with a server whose sandbox has no sessions, the
// remote commands fail with what is missing, before anything runs.
func TestFilesCLIWithoutSessions(t *testing.T) {
	needPlugin(t)
	dir := t.TempDir()
	const tok = "0123456789abcdef0123456789abcdef"
	os.WriteFile(filepath.Join(dir, "tokens"), []byte("alice "+tok+"\n"), 0o600)
	url := startServer(t, dir, "--token-file", filepath.Join(dir, "tokens"))
	env := []string{addrEnv + "=" + url, tokenEnv + "=" + tok}
	if r := runCLIEnv(t, env, "", "files", "ls"); r.code != exitError || !strings.Contains(r.stderr, "offers no list_files") {
		t.Errorf("files ls on a tier without files: %d %q", r.code, r.stderr)
	}
	if r := runCLIEnv(t, env, "", "run", "-e", "return 6*7"); r.code != exitOK || r.stdout != "42\n" {
		t.Errorf("run through the server: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLIEnv(t, env, "", "run", "--session", "s1", "-e", "return 1"); r.code != exitError || !strings.Contains(r.stderr, "keeps no named sessions") {
		t.Errorf("run --session on a tier without sessions: %d %q", r.code, r.stderr)
	}
	if r := runCLIEnv(t, env, "", "run", "-e", "import os\nreturn 1"); r.code != exitRejected {
		t.Errorf("a rejected body through the server: exit %d, want %d; %q", r.code, exitRejected, r.stderr)
	}
	if r := runCLIEnv(t, env, "", "files", "frobnicate"); r.code != exitError || !strings.Contains(r.stderr, "unknown verb") {
		t.Errorf("files frobnicate: %d %q", r.code, r.stderr)
	}
	if r := runCLIEnv(t, []string{addrEnv + "=127.0.0.1:8765"}, "", "files", "ls", "--token-file", filepath.Join(dir, "tokens")); r.code != exitError || !strings.Contains(r.stderr, "give the server's URL") {
		t.Errorf("an address without a scheme: %d %q", r.code, r.stderr)
	}
	if r := runCLIEnv(t, []string{addrEnv + "=" + url}, "", "files", "ls", "--token-file", filepath.Join(dir, "tokens")); r.code != exitError || !strings.Contains(r.stderr, "one bare token") {
		t.Errorf("the server's token file given to the client: %d %q", r.code, r.stderr)
	}
}

// A tool error's structured classes come back as errors.Is-able classes.
func TestToolErrorClasses(t *testing.T) {
	err := toolError(classedError(mcpGetFile, errors.Join(errors.New("session gone"), shared.ErrNotFound)))
	if !errors.Is(err, shared.ErrNotFound) || errors.Is(err, shared.ErrInvalidArgument) || !strings.Contains(err.Error(), "session gone") {
		t.Errorf("toolError: %v", err)
	}
	if err := toolError(argError(mcpPutFile, "base64", "bad")); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("an argument error: %v", err)
	}
	for _, c := range []error{shared.ErrNotFound, shared.ErrUnavailable, shared.ErrValidation} {
		if got := plugin.ClassNamed(plugin.ErrorClasses(c)[0]); got != c {
			t.Errorf("ClassNamed(ErrorClasses(%v)) = %v", c, got)
		}
	}
	if plugin.ClassNamed("bogus") != nil {
		t.Error("ClassNamed(bogus) is not nil")
	}
}

// `stateful = true` in a docker sandbox's block makes its session calls
// stateful without the caller asking, through the host and through
// run_python; an explicit false (Stateless, "stateful": false) still gets
// a fresh process, and a call without a session stays stateless.
func TestStatefulDefault(t *testing.T) {
	alice, bob := "orqtest-stdfa-"+randomID(), "orqtest-stdfb-"+randomID()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, sb := dockerSandbox(t, ctx, `stateful = true
  config { image = "`+runtimeImage()+`" }`, alice, bob)
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: alice})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.CloseSession(context.WithoutCancel(ctx), open.SessionID)
	exec := func(req shared.ExecuteRequest) shared.ExecutionResult {
		t.Helper()
		req.UserID = alice
		res, err := sb.Execute(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := exec(shared.ExecuteRequest{Code: "x = 41\nreturn x", SessionID: open.SessionID}); !res.Success {
		t.Fatalf("x = 41: %+v", res)
	}
	if res := exec(shared.ExecuteRequest{Code: "return x + 1", SessionID: open.SessionID}); !res.Success || string(res.Output) != "42" {
		t.Errorf("the second session call did not see x: %+v", res)
	}
	if res := exec(shared.ExecuteRequest{Code: "return x", SessionID: open.SessionID, Stateless: true}); res.Success || !strings.Contains(res.Error, "NameError") {
		t.Errorf("a Stateless call saw the session's x: %+v", res)
	}
	if res := exec(shared.ExecuteRequest{Code: "return 7"}); !res.Success || string(res.Output) != "7" {
		t.Errorf("a sessionless call on a stateful-by-default sandbox: %+v", res)
	}

	a, _ := mcpHTTPClients(t, ctx, h, sb, alice, bob)
	if r := call(t, a, mcpRunPython, map[string]any{"code": "y = 5\nreturn y"}); r.IsError {
		t.Fatalf("run_python y = 5: %s", text(r))
	}
	if r := call(t, a, mcpRunPython, map[string]any{"code": "return y"}); r.IsError || text(r) != "5" {
		t.Errorf("run_python did not keep y by default: %s", text(r))
	}
	if r := call(t, a, mcpRunPython, map[string]any{"code": "return y", "stateful": false}); !r.IsError || !strings.Contains(text(r), "NameError") {
		t.Errorf("run_python stateful=false saw y: %s", text(r))
	}
}
