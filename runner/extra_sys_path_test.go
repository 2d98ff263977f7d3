package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
)

// ExtraSysPath makes a directory importable (after the stdlib), and only
// for modules that are also in allowed_imports.
func TestExtraSysPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "orqextra.py"), []byte("VALUE = 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A module named like a stdlib one must not shadow it.
	if err := os.WriteFile(filepath.Join(dir, "json.py"), []byte("SHADOWED = True\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, _, _ := run(t, runner.Request{Code: "import orqextra\nimport json\nreturn [orqextra.VALUE, json.dumps(1)]",
		AllowedImports: []string{"orqextra", "json"}, ExtraSysPath: []string{dir}})
	wantOutput(t, resp, `[42, "1"]`)

	resp, _, _ = run(t, runner.Request{Code: "import orqextra\nreturn 1", ExtraSysPath: []string{dir}})
	if resp.Success || !strings.Contains(resp.Error, "orqextra") {
		t.Fatalf("a module on extra_sys_path but not in allowed_imports must be refused: %+v", resp)
	}
	resp, _, _ = run(t, runner.Request{Code: "import orqextra\nreturn 1", AllowedImports: []string{"orqextra"}})
	if resp.Success {
		t.Fatalf("without extra_sys_path the module must not be found: %+v", resp)
	}
}
