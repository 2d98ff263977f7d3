package gvisor

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
)

// needRunsc skips (loudly) when runsc is absent, unless
// ORQEST_REQUIRE_GVISOR=1 makes that a failure (CI sets it).
func needRunsc(t *testing.T) {
	t.Helper()
	if _, err := lookRunsc(""); err != nil {
		if os.Getenv("ORQEST_REQUIRE_GVISOR") == "1" {
			t.Fatalf("ORQEST_REQUIRE_GVISOR=1 but %v", err)
		}
		t.Skipf("SKIPPING the gVisor tests: %v", err)
	}
}

// newBackend returns a configured backend, shut down at cleanup; after the
// shutdown no sandbox of it may be left.
func newBackend(t *testing.T, hooks testHooks) *Backend {
	t.Helper()
	needRunsc(t)
	b := NewBackend(hclog.NewNullLogger())
	b.test = hooks
	t.Cleanup(func() {
		state := b.state
		b.Shutdown()
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("state directory %s left after Shutdown (%v)", state, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Classes: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return b
}

func execute(t *testing.T, b *Backend, req shared.ExecuteRequest) shared.ExecutionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := b.Execute(ctx, req)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	return resp.Result
}

func TestRunsInGVisor(t *testing.T) {
	b := newBackend(t, testHooks{})
	res := execute(t, b, shared.ExecuteRequest{Code: "print('hi')\nreturn args['x'] * 2", Args: []byte(`{"x":21}`)})
	if !res.Success || string(res.Output) != "42" || res.Stdout != "hi\n" {
		t.Fatalf("result %+v", res)
	}
	t.Logf("layers in force inside gVisor: %v; missing: %v", b.layers.Layers, b.layers.Missing)
}

// runscProcesses lists runsc processes whose command line names dir.
func runscProcesses(t *testing.T, dir string) []string {
	out, _ := exec.Command("ps", "-eo", "pid,args").Output()
	var found []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, dir) && !strings.Contains(l, " ps ") {
			found = append(found, strings.TrimSpace(l))
		}
	}
	return found
}
