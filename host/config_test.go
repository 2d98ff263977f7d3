package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

const goodConfig = `
plugin_dir      = "bin"
default_sandbox = "tier1"

policy "default" {
  allowed_imports  = ["re", "math"]
  allowed_packages = []
  timeout          = "2s"
  memory_mb        = 64
  max_output_bytes = 4096
}

policy "strict" {}

sandbox "tier1" {
  plugin = "subprocess"
  policy = "default"
  config {
    mode = "spawn"
  }
}

sandbox "other" {
  plugin = "subprocess"
  policy = "strict"
}
`

func TestParseGoodConfig(t *testing.T) {
	cfg, diags := ParseConfig("/etc/orqest/config.hcl", []byte(goodConfig))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if cfg.PluginDir != "bin" || cfg.Dir != "/etc/orqest" || cfg.resolvePath(cfg.PluginDir) != "/etc/orqest/bin" {
		t.Errorf("plugin_dir %q dir %q", cfg.PluginDir, cfg.Dir)
	}
	if got := cfg.DefaultSandboxName(); got != "tier1" {
		t.Errorf("default sandbox %q", got)
	}
	p, ok := cfg.Policy("default")
	if !ok {
		t.Fatal("no default policy")
	}
	want := Policy{Name: "default", AllowedImports: []string{"re", "math"}, AllowedPackages: nil,
		Timeout: 2 * time.Second, MemoryMB: 64, MaxOutputBytes: 4096, MaxCodeBytes: shared.DefaultMaxCodeBytes, MaxArgsBytes: shared.DefaultMaxArgsBytes,
		MaxTimeout: 2 * time.Second, MaxMemoryMB: 64, MaxOutputCeiling: 4096, MaxConcurrency: DefaultMaxConcurrency(), MaxQueue: DefaultMaxQueue}
	if !equalPolicy(p, want) {
		t.Errorf("policy = %+v, want %+v", p, want)
	}
	strict, _ := cfg.Policy("strict")
	if strict.Timeout != shared.DefaultTimeout || strict.MemoryMB != shared.DefaultMemoryMB || len(strict.AllowedImports) != 0 {
		t.Errorf("strict policy defaults: %+v", strict)
	}
	sb, ok := cfg.SandboxConfigNamed("tier1")
	if !ok || sb.Plugin != "subprocess" || sb.Config == nil {
		t.Fatalf("sandbox tier1: %+v", sb)
	}
	js, diags := decodeBackendConfig(sb, "subprocess", []shared.ConfigAttribute{{Name: "python", Type: "string"}, {Name: "mode", Type: "string"}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if string(js) != `{"mode":"spawn"}` {
		t.Errorf("config json %s", js)
	}
	other, _ := cfg.SandboxConfigNamed("other")
	if js, diags := decodeBackendConfig(other, "subprocess", nil); diags.HasErrors() || js != nil {
		t.Errorf("absent config block: %s %v", js, diags)
	}
}

func equalPolicy(a, b Policy) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func TestEmbeddedDefault(t *testing.T) {
	cfg := DefaultConfig()
	if !cfg.Embedded || cfg.Filename != EmbeddedConfigName {
		t.Errorf("embedded %v filename %q", cfg.Embedded, cfg.Filename)
	}
	if cfg.DefaultSandboxName() != "subprocess" {
		t.Errorf("default sandbox %q", cfg.DefaultSandboxName())
	}
	sb, _ := cfg.SandboxConfigNamed("subprocess")
	if sb == nil || sb.Plugin != "subprocess" || sb.Unsafe {
		t.Fatalf("sandbox: %+v", sb)
	}
	p := cfg.SandboxPolicy(sb)
	if len(p.AllowedImports) != 0 || p.Timeout != 5*time.Second || p.MemoryMB != 128 {
		t.Errorf("policy %+v", p)
	}
	if ws := LintPolicy(cfg); len(ws) != 0 {
		t.Errorf("embedded default has lint warnings: %v", ws)
	}
	// ResolveConfigPath: no config.hcl here -> embedded.
	dir := t.TempDir()
	t.Chdir(dir)
	if p := ResolveConfigPath(""); p != "" {
		t.Errorf("ResolveConfigPath = %q", p)
	}
	os.WriteFile(filepath.Join(dir, DefaultConfigFile), []byte(goodConfig), 0o644)
	if p := ResolveConfigPath(""); p != DefaultConfigFile {
		t.Errorf("ResolveConfigPath = %q", p)
	}
}

// render returns the diagnostics as the CLI prints them.
func render(t *testing.T, err error) string {
	t.Helper()
	var de *DiagnosticsError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DiagnosticsError", err, err)
	}
	var buf bytes.Buffer
	if err := de.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// loadText writes src to dir/config.hcl and loads it with the fake plugin
// directory pdir.
func loadText(t *testing.T, src string, pdir string) (*Host, string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := LoadFile(context.Background(), path, WithPluginDirs(pdir))
	return h, path, err
}

// fakePluginDir holds an executable named like a subprocess plugin; the
// config checks never launch it.
func fakePluginDir(t *testing.T) (dir, sum string) {
	dir = t.TempDir()
	p := filepath.Join(dir, plugin.PluginPrefix+"subprocess")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	return dir, sum
}

func TestConfigDiagnostics(t *testing.T) {
	pdir, sum := fakePluginDir(t)
	wrong := strings.Repeat("ab", 32)
	cases := []struct {
		name, src string
		pos       string // line:col expected after the file name
		want      string // summary expected
	}{
		{"syntax error", "sandbox \"a\" {\n  plugin = \"subprocess\"\n  policy = \n}\n", ":3:12:", "Invalid expression"},
		{"unknown attribute", "sandbox \"a\" {\n  plugin = \"subprocess\"\n  colour = \"red\"\n}\n", ":3:3:", "Unsupported argument"},
		{"unknown top-level block", "sandbox \"a\" { plugin = \"subprocess\" }\nsandboxes \"b\" {}\n", ":2:1:", "Unsupported block type"},
		{"unknown policy attribute", "policy \"p\" {\n  timeout_s = 5\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:3:", "Unsupported argument"},
		{"unknown plugin", "sandbox \"a\" {\n  plugin = \"nosuch\"\n}\n", ":2:12:", "Unknown plugin"},
		{"declared plugin missing", "plugin \"nosuch\" {}\nsandbox \"a\" { plugin = \"nosuch\" }\n", ":1:1:", "Plugin not found"},
		{"explicit path missing", "plugin \"x\" {\n  path = \"nope/bin\"\n}\nsandbox \"a\" { plugin = \"x\" }\n", ":2:10:", "Plugin binary not found"},
		{"wrong sha256", "plugin \"subprocess\" {\n  sha256 = \"" + wrong + "\"\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:12:", "Plugin checksum mismatch"},
		{"malformed sha256", "plugin \"subprocess\" {\n  sha256 = \"xyz\"\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:12:", "Invalid sha256"},
		{"unknown policy", "sandbox \"a\" {\n  plugin = \"subprocess\"\n  policy = \"nope\"\n}\n", ":3:12:", "Unknown policy"},
		{"bad duration", "policy \"default\" {\n  timeout = \"5 parsecs\"\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:13:", "Invalid duration"},
		{"negative limit", "policy \"default\" {\n  memory_mb = -1\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:15:", "Invalid limit"},
		{"duplicate sandbox", "sandbox \"a\" { plugin = \"subprocess\" }\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:1:", "Duplicate sandbox block"},
		{"duplicate policy", "policy \"p\" {}\npolicy \"p\" {}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:1:", "Duplicate policy block"},
		{"unknown default", "default_sandbox = \"b\"\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":1:19:", "Unknown default sandbox"},
		{"no sandbox", "policy \"p\" {}\n", ":1:1:", "No sandbox declared"},
		{"wrong type", "policy \"p\" {\n  memory_mb = \"lots\"\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:16:", "Unsuitable value type"},
		{"plugin_dir missing", "plugin_dir = \"nope\"\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":1:14:", "Plugin directory not found"},
		{"ceiling below policy", "policy \"default\" {\n  timeout = \"5s\"\n  ceiling {\n    timeout = \"1s\"\n  }\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":4:15:", "Ceiling below the policy"},
		{"ceiling memory below policy", "policy \"default\" {\n  memory_mb = 256\n  ceiling {\n    memory_mb = 64\n  }\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":4:17:", "Ceiling below the policy"},
		{"memory above the largest limit", "policy \"default\" {\n  memory_mb = 9223372036854775807\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:15:", "Memory limit too large"},
		{"ceiling memory above the largest limit", "policy \"default\" {\n  ceiling {\n    memory_mb = 2147483648\n  }\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":3:17:", "Memory limit too large"},
		{"timeout above the longest", "policy \"default\" {\n  timeout = \"2562047h\"\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:13:", "Timeout too long"},
		{"ceiling timeout above the longest", "policy \"default\" {\n  ceiling {\n    timeout = \"596524h\"\n  }\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":3:15:", "Timeout too long"},
		{"zero max_concurrency", "policy \"default\" {\n  max_concurrency = 0\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", ":2:21:", "Invalid limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, path, err := loadText(t, c.src, pdir)
			if err == nil {
				h.Close()
				t.Fatal("loaded without error")
			}
			out := render(t, err)
			if !strings.Contains(out, path+c.pos) {
				t.Errorf("want %s%s in:\n%s", path, c.pos, out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("want %q in:\n%s", c.want, out)
			}
			// The HCL text writer's snippet follows the headline.
			if !strings.Contains(out, "  on "+path+" line ") {
				t.Errorf("no source snippet in:\n%s", out)
			}
		})
	}

	// The right checksum loads.
	h, _, err := loadText(t, "plugin \"subprocess\" {\n  sha256 = \""+strings.ToUpper(sum)+"\"\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n", pdir)
	if err != nil {
		t.Fatal(render(t, err))
	}
	e, _ := h.Catalog().Lookup("subprocess")
	if e.ExpectedSHA256 != sum || !e.Declared || e.Source != SourceSearchDir {
		t.Errorf("entry %+v", e)
	}
	h.Close()
}

func TestBackendConfigDiagnostics(t *testing.T) {
	schema := []shared.ConfigAttribute{
		{Name: "python", Type: "string"},
		{Name: "mode", Type: "string"},
		{Name: "workers", Type: "number"},
		{Name: "debug", Type: "bool"},
		{Name: "paths", Type: "list(string)"},
	}
	src := "sandbox \"a\" {\n  plugin = \"subprocess\"\n  config {\n    mode = \"spawn\"\n    colour = \"red\"\n  }\n}\n"
	cfg, diags := ParseConfig("/x/config.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = decodeBackendConfig(cfg.Sandboxes[0], "subprocess", schema)
	out := render(t, &DiagnosticsError{Diagnostics: diags, Files: cfg.Files})
	if !strings.Contains(out, "/x/config.hcl:5:5: Error: Unsupported argument") || !strings.Contains(out, "accepts: python (string)") {
		t.Errorf("diagnostic:\n%s", out)
	}

	src = "sandbox \"a\" {\n  plugin = \"subprocess\"\n  config {\n    workers = \"many\"\n  }\n}\n"
	cfg, _ = ParseConfig("/x/config.hcl", []byte(src))
	_, diags = decodeBackendConfig(cfg.Sandboxes[0], "subprocess", schema)
	if out := render(t, &DiagnosticsError{Diagnostics: diags, Files: cfg.Files}); !strings.Contains(out, "/x/config.hcl:4:15:") {
		t.Errorf("diagnostic:\n%s", out)
	}

	src = "sandbox \"a\" {\n  plugin = \"subprocess\"\n  config {\n    workers = 4\n    debug = true\n    paths = [\"a\", \"b\"]\n  }\n}\n"
	cfg, _ = ParseConfig("/x/config.hcl", []byte(src))
	js, diags := decodeBackendConfig(cfg.Sandboxes[0], "subprocess", schema)
	if diags.HasErrors() || string(js) != `{"debug":true,"paths":["a","b"],"workers":4}` {
		t.Errorf("json %s diags %v", js, diags)
	}

	// A required attribute and no block.
	cfg, _ = ParseConfig("/x/config.hcl", []byte("sandbox \"a\" {\n  plugin = \"subprocess\"\n}\n"))
	_, diags = decodeBackendConfig(cfg.Sandboxes[0], "docker", []shared.ConfigAttribute{{Name: "image", Type: "string", Required: true}})
	if !diags.HasErrors() || diags[0].Subject.Start.Line != 1 {
		t.Errorf("diags %v", diags)
	}
	// A broken schema is the plugin's fault, reported at the plugin attribute.
	_, diags = decodeBackendConfig(cfg.Sandboxes[0], "x", []shared.ConfigAttribute{{Name: "a", Type: "strin g"}})
	if !diags.HasErrors() || !strings.Contains(diags[0].Summary, "invalid config schema") {
		t.Errorf("diags %v", diags)
	}
}

func TestLintPolicy(t *testing.T) {
	src := "policy \"p\" {\n  allowed_imports = [\"re\", \"os.path\", \"subprocess\"]\n}\nsandbox \"a\" {\n  plugin = \"subprocess\"\n  policy = \"p\"\n  unsafe = true\n}\n"
	cfg, diags := ParseConfig("/x/config.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ws := LintPolicy(cfg)
	if len(ws) != 2 {
		t.Fatalf("diagnostics: %v", ws)
	}
	// Unacknowledged dangerous modules make every run fail: an error. An
	// unsafe sandbox is a deliberate choice: a warning.
	if ws[0].Severity != hcl.DiagError || ws[1].Severity != hcl.DiagWarning {
		t.Errorf("severities %v, %v: want an error then a warning", ws[0].Severity, ws[1].Severity)
	}
	var buf bytes.Buffer
	WriteDiagnostics(&buf, cfg.Files, ws)
	out := buf.String()
	if !strings.Contains(out, "/x/config.hcl:2:21: Error: Dangerous module in allowed_imports") || !strings.Contains(out, "os.path") || strings.Contains(out, "re (") {
		t.Errorf("lint output:\n%s", out)
	}
}

// TestLintHeavyImports: a policy allowing pandas or matplotlib with less
// memory or a shorter timeout than their import needs is warned, at the
// attribute; enough of both, or only light modules, is not.
func TestLintHeavyImports(t *testing.T) {
	lint := func(body string) hcl.Diagnostics {
		t.Helper()
		src := "policy \"p\" {\n" + body + "\n  allow_unreviewed_imports = [\"pandas\", \"matplotlib\", \"matplotlib.pyplot\"]\n}\nsandbox \"a\" {\n  plugin = \"docker\"\n  policy = \"p\"\n}\n"
		cfg, diags := ParseConfig("/x/config.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return LintPolicy(cfg)
	}
	ws := lint("  allowed_imports = [\"pandas\", \"matplotlib\"]\n  memory_mb = 64\n  timeout = \"2s\"")
	var buf bytes.Buffer
	WriteDiagnostics(&buf, nil, ws)
	out := buf.String()
	if len(ws) != 2 || ws[0].Severity != hcl.DiagWarning || ws[1].Severity != hcl.DiagWarning ||
		!strings.Contains(out, "memory_mb too small") || !strings.Contains(out, "about 75 MB") ||
		!strings.Contains(out, "timeout too short") || ws[0].Subject.Start.Line != 3 || ws[1].Subject.Start.Line != 4 {
		t.Fatalf("pandas at 64 MB and 2 s: %d diagnostics:\n%s", len(ws), out)
	}
	// The defaults (128 MB, 5 s) are enough for pandas; a submodule counts as its package.
	if ws := lint("  allowed_imports = [\"matplotlib.pyplot\"]\n  allow_dangerous_imports = []"); len(ws) != 0 {
		t.Fatalf("matplotlib.pyplot with the defaults: %v", ws)
	}
	if ws := lint("  allowed_imports = [\"json\"]\n  memory_mb = 32\n  timeout = \"100ms\""); len(ws) != 0 {
		t.Fatalf("light modules only: %v", ws)
	}
}
