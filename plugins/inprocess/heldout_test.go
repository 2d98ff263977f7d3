package inprocess

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
)

// TestHeldOutAttacksTier0 runs the held-out attack corpus
// (validator/testdata/heldout/attacks, written without looking at the
// checkers) on tier 0 with classes on — the sandbox whose Python layers are
// the only wall, in its most permissive setting: no attack succeeds, and
// the interpreter still serves a call afterwards.
func TestHeldOutAttacksTier0(t *testing.T) {
	b := NewBackend(hclog.NewNullLogger())
	if _, err := b.Configure(context.Background(), shared.ConfigureRequest{Unsafe: true, Classes: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	allow := strings.Fields("re json math collections itertools datetime functools string operator statistics typing dataclasses enum heapq bisect textwrap decimal fractions random hashlib base64 uuid difflib csv html unicodedata zoneinfo copy")
	paths, err := filepath.Glob(filepath.Join("..", "..", "validator", "testdata", "heldout", "attacks", "*.py"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no held-out attack corpus: %v", err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		code, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		res := execute(t, b, shared.ExecuteRequest{Code: string(code), AllowedImports: allow, Timeout: 5 * time.Second})
		if res.Success {
			t.Errorf("attack %s succeeded on tier 0: %s", filepath.Base(p), res.Output)
		}
	}
	if res := execute(t, b, shared.ExecuteRequest{Code: "import json\nreturn json.dumps({'a': 1})", AllowedImports: []string{"json"}}); !res.Success || string(res.Output) != `"{\"a\": 1}"` {
		t.Fatalf("after the attacks: %s %s: %s", res.Output, res.ErrorKind, res.Error)
	}
}
