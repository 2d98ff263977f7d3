package runner_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/orqest/sandbox/runner"
)

// The probe op seals the process and reports what is in force, without
// running code; every layer it names is one Go knows.
func TestProbeOp(t *testing.T) {
	resp, _, stderr := run(t, runner.Request{Op: runner.OpProbe, Seal: &runner.Seal{}})
	if !resp.Success {
		t.Fatalf("%s: %s (stderr %s)", resp.ErrorKind, resp.Error, stderr)
	}
	var pr runner.ProbeResult
	if err := json.Unmarshal(resp.Output, &pr); err != nil {
		t.Fatal(err)
	}
	for _, l := range pr.Layers {
		if !slices.Contains(runner.Layers, l) {
			t.Errorf("unknown layer %q", l)
		}
		if _, ok := pr.Missing[l]; ok {
			t.Errorf("layer %q both in force and missing", l)
		}
	}
	for l := range pr.Missing {
		if !slices.Contains(runner.Layers, l) {
			t.Errorf("unknown missing layer %q", l)
		}
	}
	if len(pr.Stdlib) == 0 {
		t.Error("no stdlib directories reported")
	}
	t.Logf("in force: %v; missing: %v", pr.Layers, pr.Missing)
}

// A spawn-mode request with a seal runs sealed, and a required layer that
// cannot be had fails closed before any code runs.
func TestSealedExecuteAndFailClosed(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "return 6*7", Seal: &runner.Seal{}})
	wantOutput(t, resp, "42")
	resp, _, _ = run(t, runner.Request{Code: "return 1", Seal: &runner.Seal{
		Disable: []string{runner.LayerSeccomp}, Require: []string{runner.LayerSeccomp}}})
	if resp.Success || resp.ErrorKind != runner.KindInternal {
		t.Fatalf("required-but-disabled layer did not fail closed: %+v", resp)
	}
}
