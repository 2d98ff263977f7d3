package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// Modules that hand out the real builtins or the OS through a lint-silent
// door (rlcompleter's eval inserts builtins into a caller's namespace,
// optparse's Values.read_module imports any module, posixpath is os.path)
// have no reviewed surface: a policy that allows them is refused unless it
// says allow_unreviewed_imports, and policy check warns.
func TestUnreviewedImportsRefused(t *testing.T) {
	for _, m := range []string{"rlcompleter", "optparse", "posixpath", "genericpath"} {
		p := Policy{Name: "p", AllowedImports: []string{"re", m}}
		err := p.checkUnreviewed()
		if !errors.Is(err, shared.ErrFailedPrecondition) || !strings.Contains(err.Error(), "allow_unreviewed_imports") || !strings.Contains(err.Error(), m) {
			t.Errorf("%s: %v, want ErrFailedPrecondition naming it and allow_unreviewed_imports", m, err)
		}
		p.AllowUnreviewedImports = []string{m}
		if err := p.checkUnreviewed(); err != nil {
			t.Errorf("%s acknowledged: %v", m, err)
		}
	}
	// Reviewed modules (and their reviewed submodules) pass; dangerous ones
	// are the dangerous-import gate's business.
	p := Policy{Name: "p", AllowedImports: []string{"re", "json", "collections", "collections.abc", "math", "os"}}
	if got := p.Unreviewed(); len(got) != 0 {
		t.Errorf("Unreviewed = %v, want none", got)
	}

	cfg, diags := ParseConfig("/x/config.hcl", []byte("policy \"default\" {\n  allowed_imports = [\"re\", \"optparse\"]\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	found := false
	for _, d := range LintPolicy(cfg) {
		found = found || (d.Summary == "Unreviewed module in allowed_imports" && strings.Contains(d.Detail, "optparse") && d.Subject != nil && d.Subject.Start.Line == 2)
	}
	if !found {
		t.Errorf("no warning naming optparse at line 2: %v", LintPolicy(cfg))
	}
}

func TestExecuteRefusesUnreviewedImport(t *testing.T) {
	h := newHost(t, "policy \"default\" {\n  allowed_imports = [\"optparse\"]\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n")
	_, err := defaultSandbox(t, h).Execute(context.Background(), shared.ExecuteRequest{Code: "return 1"})
	if !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Fatalf("Execute: %v, want ErrFailedPrecondition", err)
	}
	h = newHost(t, "policy \"default\" {\n  allowed_imports = [\"optparse\"]\n  allow_unreviewed_imports = [\"optparse\"]\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n")
	res, err := defaultSandbox(t, h).Execute(context.Background(), shared.ExecuteRequest{Code: "import optparse\nreturn 1"})
	if err != nil || !res.Success {
		t.Fatalf("acknowledged: %v %+v", err, res)
	}
}
