package subprocess

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// heldoutAllow is the allowlist validator/testdata/heldout was written for.
var heldoutAllow = strings.Fields("re json math collections itertools datetime functools string operator statistics typing dataclasses enum heapq bisect textwrap decimal fractions random hashlib base64 uuid difflib csv html unicodedata zoneinfo copy")

func heldoutCorpus(t *testing.T, dir string) ([]string, map[string]string) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "validator", "testdata", "heldout", dir, "*.py"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no held-out %s corpus: %v", dir, err)
	}
	sort.Strings(paths)
	bodies := map[string]string{}
	var names []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(p))
		bodies[filepath.Base(p)] = string(b)
	}
	return names, bodies
}

func heldoutBackend(t *testing.T) *Backend {
	b := newTestBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Classes: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return b
}

// TestHeldOutCorpusRuns runs the held-out corpus (written without looking
// at the checkers) on tier 1 as the host configures it: the benign bodies
// run to a result at 97 % or better; no attack body succeeds.
func TestHeldOutCorpusRuns(t *testing.T) {
	b := heldoutBackend(t)
	names, bodies := heldoutCorpus(t, "benign")
	ok := 0
	for _, n := range names {
		res := execute(t, b, shared.ExecuteRequest{Code: bodies[n], AllowedImports: heldoutAllow, Timeout: 10 * time.Second})
		if res.Success {
			ok++
			continue
		}
		t.Logf("benign %s: %s: %s", n, res.ErrorKind, lastLine(res.Error))
	}
	rate := 100 * float64(ok) / float64(len(names))
	t.Logf("held-out benign corpus on tier 1: %d of %d ran to a result (%.1f %%)", ok, len(names), rate)
	if rate < 97 {
		t.Errorf("held-out benign success %.1f %% is below 97 %%", rate)
	}

	names, bodies = heldoutCorpus(t, "attacks")
	for _, n := range names {
		res := execute(t, b, shared.ExecuteRequest{Code: bodies[n], AllowedImports: heldoutAllow, Timeout: 10 * time.Second})
		if res.Success {
			t.Errorf("attack %s succeeded: %s", n, res.Output)
			continue
		}
		t.Logf("attack %s: %s: %s", n, res.ErrorKind, lastLine(res.Error))
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}
