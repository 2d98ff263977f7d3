package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

const depsPolicy = `
policy "default" {
  allowed_packages = ["Orq_Demo"]
}
sandbox "sub" {
  plugin = "subprocess"
}
`

// A dependency outside allowed_packages is refused by the host before the
// plugin is even launched, with ErrPermissionDenied naming the package.
func TestDependencyNotAllowedRefusedBeforePlugin(t *testing.T) {
	h := newHost(t, depsPolicy)
	sb, err := h.Sandbox(context.Background(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	_, err = sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", Dependencies: []string{"requests"}})
	if !errors.Is(err, shared.ErrPermissionDenied) || !strings.Contains(err.Error(), `"requests"`) || !strings.Contains(err.Error(), "allowed_packages") {
		t.Fatalf("want ErrPermissionDenied naming requests and allowed_packages, got %v", err)
	}
	if n := sb.Launches(); n != 0 {
		t.Fatalf("the plugin was launched %d times for a refused dependency", n)
	}
	_, err = sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", Dependencies: []string{"orq-demo>=1"}})
	if !errors.Is(err, shared.ErrInvalidArgument) {
		t.Fatalf("malformed dependency: want ErrInvalidArgument, got %v", err)
	}
}

// An allowed dependency on a backend that does not install dependencies
// (tier 1 has no "dependencies" capability) is ErrNotSupported, not ignored.
func TestDependencyOnBackendWithoutCapability(t *testing.T) {
	h := newHost(t, depsPolicy)
	sb, err := h.Sandbox(context.Background(), "sub")
	if err != nil {
		t.Fatal(err)
	}
	_, err = sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", Dependencies: []string{"orq.demo"}})
	if !errors.Is(err, shared.ErrNotSupported) {
		t.Fatalf("want ErrNotSupported, got %v", err)
	}
	res, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1"})
	if err != nil || !res.Success {
		t.Fatalf("no dependencies: %v %+v", err, res)
	}
}

func TestAllowedPackagesDiagnostics(t *testing.T) {
	_, diags := ParseConfig("config.hcl", []byte(`
policy "default" {
  allowed_packages = ["six", "requests>=2"]
}
`))
	if !diags.HasErrors() || !strings.Contains(diags.Error(), `"requests>=2"`) || !strings.Contains(diags.Error(), "config.hcl:3") {
		t.Fatalf("want a diagnostic at config.hcl:3 naming requests>=2, got %v", diags)
	}
}
