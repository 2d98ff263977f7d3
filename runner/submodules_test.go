package runner_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/validator"
)

// rulesWithSubmodules is the real rules table with package_submodules
// replaced by subs.
func rulesWithSubmodules(t *testing.T, subs map[string][]string) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(validator.RulesJSON(), &m); err != nil {
		t.Fatal(err)
	}
	m["package_submodules"] = subs
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPackageSubmodules: a listed package allows its reviewed submodules
// (package_submodules), imported before the code runs, so one whose
// import the audit hook would refuse works; a submodule that is not
// reviewed and whose first import the sandbox refuses fails with an
// ImportError naming what to list, and works once listed; an entry that
// names no submodule of its package allows nothing.
func TestPackageSubmodules(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "orqpkg")
	if err := os.Mkdir(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"__init__.py": "",
		// Refused under the audit hook, harmless before it is armed.
		"intro.py": "import gc\n_n = len(gc.get_objects(generation=0))\nVALUE = 7\n",
	} {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code := "import orqpkg.intro\nreturn orqpkg.intro.VALUE"

	reviewed := rulesWithSubmodules(t, map[string][]string{"orqpkg": {"orqpkg.intro"}})
	resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: []string{"orqpkg"}, ExtraSysPath: []string{dir}, Rules: reviewed})
	wantOutput(t, resp, "7")

	resp, _, _ = run(t, runner.Request{Code: code, AllowedImports: []string{"orqpkg"}, ExtraSysPath: []string{dir}})
	if resp.Success || !strings.Contains(resp.Error, "ImportError") || !strings.Contains(resp.Error, "list 'orqpkg.intro' in allowed_imports") {
		t.Fatalf("an unreviewed submodule the sandbox refuses to import: want an ImportError naming it, got %+v", resp)
	}
	resp, _, _ = run(t, runner.Request{Code: code, AllowedImports: []string{"orqpkg", "orqpkg.intro"}, ExtraSysPath: []string{dir}})
	wantOutput(t, resp, "7")

	// A table entry outside its package (rules.Decode refuses it; the
	// runner ignores it) does not let another module in.
	forged := rulesWithSubmodules(t, map[string][]string{"orqpkg": {"os", "orqpkgx"}})
	resp, _, _ = run(t, runner.Request{Code: "import os\nreturn 1", AllowedImports: []string{"orqpkg"}, ExtraSysPath: []string{dir}, Rules: forged})
	if resp.Success || !strings.Contains(resp.Error, "import-not-allowed") {
		t.Fatalf("a forged package_submodules entry let os in: %+v", resp)
	}
}
