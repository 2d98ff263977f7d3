package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// buildPlugin builds the plugin binary into a directory of its own.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, plugin.PluginPrefix+"kubernetes"), "./cmd/orqest-sandbox-plugin-kubernetes")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	return dir
}

// kubeconfigForHost is the test cluster's kubeconfig, or a skip (a failure
// with ORQEST_REQUIRE_K8S=1) when there is none.
func kubeconfigForHost(t *testing.T) string {
	t.Helper()
	path := os.Getenv("ORQEST_KUBECONFIG")
	if path == "" {
		root := os.Getenv("K8S_ROOT")
		if root == "" {
			root = "/var/tmp/orqest-k8s"
		}
		path = filepath.Join(root, "kubeconfig", "admin.kubeconfig")
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("ORQEST_REQUIRE_K8S") == "1" {
			t.Fatalf("ORQEST_REQUIRE_K8S=1 and no kubeconfig at %s", path)
		}
		t.Skipf("SKIPPING Kubernetes host test: no kubeconfig at %s (make k8s-up; ORQEST_REQUIRE_K8S=1 makes this a failure)", path)
	}
	return path
}

// TestThroughTheHost loads an HCL policy naming the built plugin binary:
// a mistyped attribute is a diagnostic at its line and column (the
// plugin's schema), a value the plugin refuses points at its attribute,
// and a valid block runs code in a pod through host -> plugin (gRPC) ->
// pod, sessionless and in a session.
func TestThroughTheHost(t *testing.T) {
	kubeconfig := kubeconfigForHost(t)
	dir := buildPlugin(t)
	image := os.Getenv("ORQEST_K8S_IMAGE")
	if image == "" {
		image = "orqest/agent-runtime:0.1.0"
	}
	load := func(block string) (*host.Sandbox, func(), error) {
		src := fmt.Sprintf(`policy "p" {
  timeout = "10s"
}

sandbox "k8s" {
  plugin = "kubernetes"
  policy = "p"
  config {
%s
  }
}
`, block)
		cfg, diags := host.ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(src))
		if diags.HasErrors() {
			t.Fatalf("parse: %v", diags)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		h, err := host.Load(ctx, cfg, host.WithPluginDirs(dir), host.WithStartTimeout(60*time.Second))
		if err != nil {
			return nil, func() {}, err
		}
		sb, err := h.Sandbox(ctx, "k8s")
		if err == nil {
			err = sb.Start(ctx)
		}
		return sb, func() { h.Close() }, err
	}
	base := fmt.Sprintf("    kubeconfig = %q\n    namespace = \"default\"\n    image = %q\n    cpu_request = 0.05\n", kubeconfig, image)

	_, done, err := load(base + "    image_pul_policy = \"Never\"\n")
	done()
	var de *host.DiagnosticsError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "config.hcl:13:") || !strings.Contains(err.Error(), "image_pul_policy") {
		t.Errorf("a mistyped attribute: %v; want a diagnostic at config.hcl:13", err)
	}
	_, done, err = load(base + "    pool {\n      size = -3\n    }\n")
	done()
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "config.hcl:14:") || !strings.Contains(err.Error(), "pool.size") {
		t.Errorf("a refused value: %v; want a diagnostic at the pool block (config.hcl:14)", err)
	}

	sb, done, err := load(base)
	defer done()
	if err != nil {
		t.Fatalf("a valid block: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return sum(range(10))"})
	if err != nil || !res.Success || string(res.Output) != "45" {
		t.Fatalf("sessionless through the host: %+v %v", res, err)
	}
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: "host-test"})
	if err != nil {
		t.Fatalf("Open through the host: %v", err)
	}
	res, err = sb.Execute(ctx, shared.ExecuteRequest{Code: "return args['x'] * 2", Args: []byte(`{"x": 21}`), SessionID: open.SessionID, UserID: "host-test"})
	if err != nil || string(res.Output) != "42" {
		t.Fatalf("in a session through the host: %+v %v", res, err)
	}
	if err := sb.CloseSession(ctx, open.SessionID); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
}
