package subprocess

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/heldout"
	"github.com/orqest/sandbox/shared"
)

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
	bodies, allow, err := heldout.Load("benign")
	if err != nil {
		t.Fatalf("held-out corpus: %v", err)
	}
	ok := 0
	for _, bd := range bodies {
		n := bd.Name
		res := execute(t, b, shared.ExecuteRequest{Code: bd.Code, AllowedImports: allow, Timeout: 10 * time.Second})
		if res.Success {
			ok++
			continue
		}
		t.Logf("benign %s: %s: %s", n, res.ErrorKind, lastLine(res.Error))
	}
	rate := 100 * float64(ok) / float64(len(bodies))
	t.Logf("held-out benign corpus on tier 1: %d of %d ran to a result (%.1f %%)", ok, len(bodies), rate)
	if rate < 97 {
		t.Errorf("held-out benign success %.1f %% is below 97 %%", rate)
	}

	attacks, allow, err := heldout.Load("attacks")
	if err != nil {
		t.Fatalf("held-out corpus: %v", err)
	}
	for _, bd := range attacks {
		n := bd.Name
		res := execute(t, b, shared.ExecuteRequest{Code: bd.Code, AllowedImports: allow, Timeout: 10 * time.Second})
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
