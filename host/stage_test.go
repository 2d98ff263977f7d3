package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// RunInSandbox's stage says what happened: the policy refusing the
// request (a limit above its ceiling, an import it does not acknowledge,
// a dependency outside allowed_packages) is the policy stage, whatever the
// refusal's class; a malformed request stays validation.
func TestRunErrorStages(t *testing.T) {
	h := newHost(t, `
policy "default" {
  timeout          = "2s"
  allowed_packages = ["six"]
}
policy "careless" {
  allowed_imports = ["re", "os"]
}
sandbox "a" { plugin = "subprocess" }
sandbox "careless" {
  plugin = "subprocess"
  policy = "careless"
}
`)
	ctx := context.Background()
	sb := defaultSandbox(t, h)
	careless, err := h.Sandbox(ctx, "careless")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		sb    *Sandbox
		opts  RunOptions
		stage string
		class error
	}{
		{"limit above the ceiling", sb, RunOptions{Timeout: time.Hour}, StagePolicy, shared.ErrAboveCeiling},
		{"dangerous import not acknowledged", careless, RunOptions{}, StagePolicy, shared.ErrFailedPrecondition},
		{"dangerous import asked for", sb, RunOptions{AllowedImports: []string{"subprocess"}}, StagePolicy, shared.ErrFailedPrecondition},
		{"args that are no object", sb, RunOptions{Args: "[1]"}, StageValidation, shared.ErrInvalidArgument},
	} {
		_, err := RunInSandbox(ctx, c.sb, "return 1", c.opts)
		var re *RunError
		if !errors.As(err, &re) || re.Stage != c.stage || !errors.Is(err, c.class) {
			t.Errorf("%s: %v (stage %q), want stage %q and %v", c.name, err, stageOf(re), c.stage, c.class)
		}
		var pe *PolicyError
		if c.stage == StagePolicy && (!errors.As(err, &pe) || pe.Policy == "" || !strings.HasPrefix(err.Error(), "sandbox policy refused the request: ")) {
			t.Errorf("%s: no *PolicyError naming the policy in %v", c.name, err)
		}
	}
	// A dependency outside allowed_packages is the policy's refusal too
	// (Execute: RunInSandbox has no dependencies); a malformed one is not.
	_, err = sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1", Dependencies: []string{"requests"}})
	var pe *PolicyError
	if !errors.As(err, &pe) || pe.Policy != "default" || !errors.Is(err, shared.ErrPermissionDenied) {
		t.Errorf("dependency outside allowed_packages: %v", err)
	}
	_, err = sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1", Dependencies: []string{"not a name!"}})
	if errors.As(err, &pe) || !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("malformed dependency: %v, want ErrInvalidArgument and no *PolicyError", err)
	}
}

func stageOf(re *RunError) string {
	if re == nil {
		return ""
	}
	return re.Stage
}
