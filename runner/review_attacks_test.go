package runner_test

// Payloads of an attack review of the Python layer (tier 1's runner, one
// execution per process), each run against both audit hooks and, where the
// payload needs names the in-child checker refuses, with weakRules. Every
// test says which layer stops the payload; the Go validator's verdict is
// recorded too (goAccepts), so a payload that only a later layer stops is
// visible as such.

import (
	"context"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/validator"
)

// goAccepts reports whether the Go validator (the host's and the plugin's
// static layer) accepts code with classes on and the given imports.
func goAccepts(t *testing.T, code string, imports []string) bool {
	t.Helper()
	return len(validator.New().CheckWith(context.Background(), code, imports, validator.Features{Classes: true})) == 0
}

// wantRefused fails unless resp is a refusal whose error contains want and
// that shows nothing of the runner or the real builtins.
func wantRefused(t *testing.T, resp runner.Response, stdout, want string) {
	t.Helper()
	wantNoEscape(t, resp, stdout)
	if resp.Success {
		t.Fatalf("want a refusal (%q), got %s", want, resp.Output)
	}
	if !strings.Contains(resp.Error, want) {
		t.Fatalf("want %q, got %s: %s", want, resp.ErrorKind, resp.Error)
	}
}

// TestReviewUserStringFormatFields: collections.UserString's format and
// format_map call its data's str.format from the library's frame, so the
// run-time format guard (which saw a UserString, not a str) handed out
// the real method: '{0.__globals__[codecs].sys.modules[os].environ}'
// read the process environment as a string (tier 0: the plugin's). Both
// static layers accept the payload (the template is not the receiver of
// .format); the format guard now follows UserString to its data, bound or
// unbound, nested or not. The benign side: index keys and specs work.
func TestReviewUserStringFormatFields(t *testing.T) {
	imports := []string{"collections", "json"}
	for _, c := range []struct{ name, code string }{
		{"bound format", "import collections, json\nreturn collections.UserString('{0.__globals__[codecs].sys.modules[os].environ}').format(json.loads)"},
		{"bound format_map", "import collections, json\nreturn collections.UserString('{a.__globals__}').format_map({'a': json.loads})"},
		{"unbound format", "import collections, json\nU = collections.UserString\nreturn U.format(U('{0.__globals__}'), json.loads)"},
		{"nested", "import collections, json\nU = collections.UserString\nreturn U(U(U('{0.__globals__}'))).format(json.loads)"},
		{"subclass via super", "import collections, json\nclass V(collections.UserString):\n    def f(self, x):\n        return super().format(x)\nreturn V('{0.__globals__}').f(json.loads)"},
		{"format_map as format", "import collections, json\nclass V(collections.UserString):\n    format = collections.UserString.format_map\nreturn V('{a.__globals__}').format({'a': json.loads})"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !goAccepts(t, c.code, imports) {
				t.Logf("the Go validator refuses %q too", c.name)
			}
			hooks(t, func(t *testing.T, hook string) {
				resp, out, _ := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: imports})
				wantRefused(t, resp, out, "reads the attribute '__globals__'")
				if strings.Contains(resp.Error, "environ(") {
					t.Fatalf("the environment leaked: %s", resp.Error)
				}
			})
		})
	}
	benign := "import collections\nU = collections.UserString\nreturn [U('{0[k]} {n:>3}').format({'k': 'v'}, n=7), U('{n}!').format_map({'n': 1}), U.format(U('{}-{}'), 1, 2)]"
	if !goAccepts(t, benign, imports) {
		t.Fatal("the Go validator refuses the benign UserString body")
	}
	hooks(t, func(t *testing.T, hook string) {
		resp, _, _ := run(t, runner.Request{Code: benign, Classes: true, AllowedImports: imports})
		wantOutput(t, resp, `["v   7", "1!", "1-2"]`)
	})
}
