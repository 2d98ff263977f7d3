package host

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

func TestDangerousImportsComeFromRules(t *testing.T) {
	d := DangerousImports()
	for _, m := range []string{"os", "sys", "subprocess", "importlib", "ctypes", "builtins", "inspect", "gc",
		"pickle", "marshal", "_io", "urllib.request", "pathlib", "shutil", "socket", "types", "timeit", "codecs"} {
		if d[m] == "" {
			t.Errorf("%s is not in rules.json dangerous_imports", m)
		}
	}
	for _, m := range []string{"re", "json", "math", "typing", "functools", "datetime", "collections", "enum", "dataclasses", "io", "urllib", "urllib.parse"} {
		if _, ok := d[m]; ok {
			t.Errorf("%s should not be dangerous", m)
		}
	}
	if _, ok := dangerousWhy("os.path"); !ok {
		t.Error("os.path: submodule of a dangerous package not matched")
	}
	if _, ok := dangerousWhy("osx"); ok {
		t.Error("osx matched os")
	}
}

func TestPolicyLintDangerousImports(t *testing.T) {
	src := "policy \"p\" {\n  allowed_imports = [\"re\", \"os\", \"pickle\"]\n  allow_dangerous_imports = [\"os\", \"sys\"]\n}\nsandbox \"a\" {\n  plugin = \"subprocess\"\n  policy = \"p\"\n}\n"
	cfg, diags := ParseConfig("/x/config.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ws := LintPolicy(cfg)
	var buf bytes.Buffer
	WriteDiagnostics(&buf, cfg.Files, ws)
	out := buf.String()
	for _, want := range []string{
		"/x/config.hcl:2:21: Error: Dangerous module in allowed_imports", "pickle (",
		"Warning: Dangerous module allowed deliberately", "allows os (",
		"/x/config.hcl:3:29: Warning: allow_dangerous_imports entry has no effect", "acknowledges sys,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lint output lacks %q:\n%s", want, out)
		}
	}
	if len(ws) != 3 {
		t.Errorf("want 3 diagnostics, got %d:\n%s", len(ws), out)
	}
	p, _ := cfg.Policy("p")
	if got := p.UnacknowledgedDangerous(); len(got) != 1 || got[0] != "pickle" {
		t.Errorf("UnacknowledgedDangerous = %v", got)
	}
	if got := p.UnacknowledgedDangerous("subprocess", "json"); len(got) != 2 {
		t.Errorf("UnacknowledgedDangerous(extra) = %v", got)
	}
}

func TestExecuteRefusesUnacknowledgedDangerousImports(t *testing.T) {
	h := newHost(t, `
policy "default" {
  allowed_imports = ["re"]
}
policy "trusted" {
  allowed_imports         = ["re", "os"]
  allow_dangerous_imports = ["os"]
}
policy "careless" {
  allowed_imports = ["re", "os"]
}
sandbox "plain" {
  plugin = "subprocess"
}
sandbox "trusted" {
  plugin = "subprocess"
  policy = "trusted"
}
sandbox "careless" {
  plugin = "subprocess"
  policy = "careless"
}
`)
	ctx := context.Background()
	get := func(name string) *Sandbox {
		sb, err := h.Sandbox(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	// A call that adds a dangerous module is refused before any plugin call.
	_, err := get("plain").Execute(ctx, shared.ExecuteRequest{Code: "import os\nreturn os.getcwd()", AllowedImports: []string{"os"}})
	if !errors.Is(err, shared.ErrFailedPrecondition) || !strings.Contains(err.Error(), "allow_dangerous_imports") {
		t.Fatalf("plain + os: err = %v", err)
	}
	// A policy that allows os without acknowledging it refuses every run.
	_, err = get("careless").Execute(ctx, shared.ExecuteRequest{Code: "return 1"})
	if !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Fatalf("careless: err = %v", err)
	}
	// RunInSandbox (and so the tool factory) refuses it too.
	if _, err := RunInSandbox(ctx, get("careless"), "return 1", RunOptions{}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Fatalf("RunInSandbox under careless policy: %v", err)
	}
	// Acknowledged: runs; an unrelated dangerous extra is still refused.
	res, err := get("trusted").Execute(ctx, shared.ExecuteRequest{Code: "import os\nreturn os.sep"})
	if err != nil || !res.Success || string(res.Output) != `"/"` {
		t.Fatalf("trusted: %v %+v", err, res)
	}
	if _, err := get("trusted").Execute(ctx, shared.ExecuteRequest{Code: "return 1", AllowedImports: []string{"subprocess"}}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Fatalf("trusted + subprocess: err = %v", err)
	}
	// Benign neighbour: safe extras pass.
	res, err = get("plain").Execute(ctx, shared.ExecuteRequest{Code: "import json\nreturn json.dumps([1])", AllowedImports: []string{"json"}})
	if err != nil || !res.Success {
		t.Fatalf("plain + json: %v %+v", err, res)
	}
}
