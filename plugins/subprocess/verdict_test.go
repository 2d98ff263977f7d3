package subprocess

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// hostVerdict is the verdict a host's validator gives code it accepts.
func hostVerdict(t *testing.T, code string, imports []string, f validator.Features) *shared.Verdict {
	t.Helper()
	found, v := validator.New().Accept(context.Background(), code, imports, f)
	if len(found) > 0 || v == nil {
		t.Fatalf("the host's validator refuses %q: %v", code, found)
	}
	return v
}

// TestVerdictSkipsSecondValidation: a body the host accepted, with the
// host's verdict, runs without the backend's own Go validation (its
// validator counts a trusted skip, no check); without a verdict it is
// checked as before.
func TestVerdictSkipsSecondValidation(t *testing.T) {
	b := newTestBackend(t)
	code, imports := "import json\nreturn json.dumps(args)", []string{"json"}
	vd := hostVerdict(t, code, imports, b.features())

	before := b.validator.Stats()
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: imports, Verdict: vd}), `"{}"`)
	after := b.validator.Stats()
	if after.Trusted != before.Trusted+1 || after.Checked != before.Checked {
		t.Fatalf("with the host's verdict: stats %+v -> %+v, want one trusted skip and no check", before, after)
	}

	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: imports}), `"{}"`)
	if again := b.validator.Stats(); again.Checked != after.Checked+1 || again.Trusted != after.Trusted {
		t.Fatalf("without a verdict: stats %+v -> %+v, want one check", after, again)
	}
}

// TestVerdictMismatchValidates: a verdict for another body, another rules
// version or other options is not trusted: the backend validates and
// refuses the bad body.
func TestVerdictMismatchValidates(t *testing.T) {
	b := newTestBackend(t)
	good, bad := "return 1", "import os\nreturn os.getcwd()"
	f := b.features()
	forBad := hostVerdict(t, bad, []string{"os"}, f) // accepted only where os is allowed
	otherRules := *hostVerdict(t, good, nil, f)
	otherRules.CodeSHA256 = sha256.Sum256([]byte(bad))
	otherRules.Rules = "0" + rules.Version()[1:]
	for name, req := range map[string]shared.ExecuteRequest{
		"another body":           {Code: bad, Verdict: hostVerdict(t, good, nil, f)},
		"another options digest": {Code: bad, Verdict: forBad}, // os not allowed here
		"another classes":        {Code: bad, Verdict: hostVerdict(t, bad, []string{"os"}, validator.Features{Classes: !f.Classes})},
		"another rules version":  {Code: bad, Verdict: &otherRules},
	} {
		before := b.validator.Stats()
		res := execute(t, b, req)
		after := b.validator.Stats()
		if res.Success || res.ErrorKind != shared.KindValidation {
			t.Errorf("%s: success=%v kind=%q, want the backend's validation to refuse it", name, res.Success, res.ErrorKind)
		}
		if after.Checked != before.Checked+1 || after.Trusted != before.Trusted {
			t.Errorf("%s: stats %+v -> %+v, want a check of the backend's own", name, before, after)
		}
	}
}

// TestVerdictLeavesInterpreterChecks: a verdict that matches a bad body
// exactly (as if the host had accepted it) skips only the Go validator;
// the checks in the child still refuse the body.
func TestVerdictLeavesInterpreterChecks(t *testing.T) {
	b := newTestBackend(t)
	bad := "import os\nreturn os.getcwd()"
	f := b.features()
	forged := &shared.Verdict{CodeSHA256: sha256.Sum256([]byte(bad)), Rules: rules.Version(), Options: b.validator.Options(nil, f).Digest()}
	before := b.validator.Stats()
	res := execute(t, b, shared.ExecuteRequest{Code: bad, Verdict: forged})
	if b.validator.Stats().Trusted != before.Trusted+1 {
		t.Fatalf("the matching verdict was not trusted")
	}
	if res.Success {
		t.Fatalf("a bad body with a matching verdict ran: %s", res.Output)
	}
	t.Logf("refused in the child: kind=%s error=%s", res.ErrorKind, res.Error)
}
