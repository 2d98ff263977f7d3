package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/internal/wheeltest"
)

// Packages from the operator's wheel_dir over the CLI and over MCP, on the
// real tier 2: `run --dep` installs an allowed package before the code
// runs, locally and through `mcp serve --http` (run_python's
// dependencies, and the policy's allowed_imports unlisted in the call); a package outside allowed_packages is refused at the
// policy stage naming allowed_packages, and tier 1, which installs
// nothing, says it does not (not silently ignored).
func TestDependenciesOverCLIAndMCP(t *testing.T) {
	needDockerPlugin(t)
	user := "orqtest-deps-" + randomID()
	t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", "orqest-user-"+user).Run() })
	dir := t.TempDir()
	wheels := filepath.Join(dir, "wheels")
	if _, err := wheeltest.Build(wheels, wheeltest.Wheel{Name: "orqdeps", Version: "1.0.0",
		Files: map[string]string{"orqdeps.py": "def hi(n):\n    return 'hi ' + n\n"}}); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.hcl")
	os.WriteFile(config, []byte(`policy "default" {
  allowed_packages         = ["orqdeps"]
  allowed_imports          = ["orqdeps"]
  allow_unreviewed_imports = ["orqdeps"]
}
sandbox "docker" {
  plugin = "docker"
  config {
    image     = "`+runtimeImage()+`"
    wheel_dir = "`+wheels+`"
  }
}
sandbox "tier1" {
  plugin = "subprocess"
}
`), 0o644)
	const body = "import orqdeps\nreturn orqdeps.hi('there')"

	r := runCLIEnv(t, nil, "", "run", "--config", config, "--sandbox", "docker", "--user", user, "--dep", "orqdeps", "-e", body)
	if r.code != exitOK || r.stdout != "\"hi there\"\n" {
		t.Fatalf("run --dep: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLIEnv(t, nil, "", "run", "--config", config, "--sandbox", "docker", "--user", user, "--dep", "requests", "-e", "return 1")
	if r.code == exitOK || !strings.Contains(r.stderr, `"requests"`) || !strings.Contains(r.stderr, "allowed_packages") {
		t.Errorf("run --dep outside allowed_packages: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCLIEnv(t, nil, "", "run", "--config", config, "--sandbox", "tier1", "--dep", "orqdeps", "-e", "return 1")
	if r.code == exitOK || !strings.Contains(r.stderr, "does not install dependencies") {
		t.Errorf("run --dep on tier 1: exit %d stderr %q", r.code, r.stderr)
	}

	// Through the server: run_python's dependencies.
	const tok = "0123456789abcdef0123456789abcdef"
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte(user+" "+tok+"\n"), 0o600)
	url := startServer(t, dir, "--config", config, "--sandbox", "docker", "--token-file", tokens)
	env := []string{addrEnv + "=" + url, tokenEnv + "=" + tok}
	r = runCLIEnv(t, env, "", "run", "--dep", "orqdeps", "-e", body) // the policy's allowed_imports need no --allow
	if r.code != exitOK || r.stdout != "\"hi there\"\n" {
		t.Fatalf("run --dep --addr: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLIEnv(t, env, "", "run", "--dep", "requests", "-e", "return 1")
	if r.code == exitOK || !strings.Contains(r.stderr, `"requests"`) || !strings.Contains(r.stderr, "allowed_packages") {
		t.Errorf("run --dep --addr outside allowed_packages: exit %d stderr %q", r.code, r.stderr)
	}
}
