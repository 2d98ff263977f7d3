package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// `session pause|resume NAME` through `mcp serve --http` (the real CLI
// binary, the pause_session and resume_session tools) against the
// in-memory session plugin, which saves a paused session to a file in its
// pause_dir: the session is listed as paused, its saved state is there,
// a call on it resumes it with its state, another client cannot name it,
// and a sandbox whose plugin cannot pause answers the not_supported class.
func TestSessionPauseResumeCLI(t *testing.T) {
	pdir := os.Getenv(fuzzPluginEnv)
	if pdir == "" {
		t.Fatalf("$%s is not set: TestMain builds the session plugin", fuzzPluginEnv)
	}
	dir := t.TempDir()
	paused := filepath.Join(dir, "paused")
	if err := os.Mkdir(paused, 0o700); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.hcl")
	os.WriteFile(config, []byte(`plugin_dir = "`+pdir+`"
sandbox "s" {
  plugin = "sessions"
  config { pause_dir = "`+paused+`" }
}
`), 0o600)
	const aliceTok, bobTok = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("alice "+aliceTok+"\nbob "+bobTok+"\n"), 0o600)
	url := startServer(t, dir, "--config", config, "--token-file", tokens)
	alice := []string{addrEnv + "=" + url, tokenEnv + "=" + aliceTok}
	bob := []string{addrEnv + "=" + url, tokenEnv + "=" + bobTok}

	count := func(want string) {
		t.Helper()
		if r := runCLIEnv(t, alice, "", "run", "--session", "s1", "-e", "count"); r.code != exitOK || r.stdout != want+"\n" {
			t.Fatalf("count in s1: %d %q %s, want %s", r.code, r.stdout, r.stderr, want)
		}
	}
	count("1")
	r := runCLIEnv(t, alice, "", "session", "pause", "s1")
	if r.code != exitOK || !strings.Contains(r.stdout, "paused session s1") {
		t.Fatalf("session pause: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if ents, _ := os.ReadDir(paused); len(ents) != 1 {
		t.Errorf("saved state after the pause: %v", ents)
	}
	if r := runCLIEnv(t, alice, "", "sessions", "list"); r.code != exitOK || !regexp.MustCompile(`(?m)^s1\s+s-\S+\s+paused\s`).MatchString(r.stdout) {
		t.Errorf("sessions list after the pause: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLIEnv(t, bob, "", "session", "resume", "s1"); r.code != exitError || !strings.Contains(r.stderr, "not open") {
		t.Errorf("bob resumes alice's s1: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLIEnv(t, alice, "", "session", "resume", "s1"); r.code != exitOK || !strings.Contains(r.stdout, "resumed session s1 (state lost: false)") {
		t.Fatalf("session resume: %d %q %s", r.code, r.stdout, r.stderr)
	}
	count("2")
	if r := runCLIEnv(t, alice, "", "session", "resume", "s1"); r.code != exitError || !strings.Contains(r.stderr, "not paused") {
		t.Errorf("resuming a running session: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// Paused again: the next call resumes it.
	if r := runCLIEnv(t, alice, "", "session", "pause", "s1"); r.code != exitOK {
		t.Fatalf("second pause: %d %s", r.code, r.stderr)
	}
	count("3")
	if r := runCLIEnv(t, alice, "", "session", "pause"); r.code != exitError {
		t.Errorf("session pause without a name: %d %q", r.code, r.stderr)
	}
}

// pause_session on a sandbox whose plugin cannot pause: an error result
// whose structured classes say not_supported (a client acts on the
// class, not the text); the session keeps running.
func TestPauseSessionToolNotSupported(t *testing.T) {
	pdir := os.Getenv(fuzzPluginEnv)
	if pdir == "" {
		t.Fatalf("$%s is not set: TestMain builds the session plugin", fuzzPluginEnv)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "config.hcl")
	os.WriteFile(config, []byte("plugin_dir = \""+pdir+"\"\nsandbox \"s\" {\n  plugin = \"sessions\"\n}\n"), 0o600)
	const tok = "0123456789abcdef0123456789abcdef"
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("alice "+tok+"\n"), 0o600)
	url := startServer(t, dir, "--config", config, "--token-file", tokens)
	env := []string{addrEnv + "=" + url, tokenEnv + "=" + tok}
	if r := runCLIEnv(t, env, "", "run", "--session", "s1", "-e", "count"); r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	cs := httpClientSession(t, url+"/mcp", tok, nil)
	res := call(t, cs, mcpPause, map[string]any{"session": "s1"})
	var st struct {
		Classes []string `json:"error_classes"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(raw, &st)
	if !res.IsError || !slices.Contains(st.Classes, "not_supported") {
		t.Errorf("pause_session without the capability: %s %v, want the not_supported class", text(res), st.Classes)
	}
	if r := runCLIEnv(t, env, "", "run", "--session", "s1", "-e", "count"); r.code != exitOK || r.stdout != "2\n" {
		t.Errorf("the session after a refused pause: %d %q %s", r.code, r.stdout, r.stderr)
	}
}
