package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// TestConfigErrors: a bad `config {}` block is refused before anything
// touches a cluster, naming the attribute (the host turns a FieldError
// into a diagnostic at that attribute's source range).
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		cfg   string
		field string
	}{
		{`{"image_pull_policy": "Sometimes"}`, "image_pull_policy"},
		{`{"namespace": "Not_A_Name"}`, "namespace"},
		{`{"runtime_class": "gVisor!"}`, "runtime_class"},
		{`{"storage_class": "-bad-"}`, "storage_class"},
		{`{"library_size": "lots"}`, "library_size"},
		{`{"library_size": "-1Gi"}`, "library_size"},
		{`{"open_timeout": "soon"}`, "open_timeout"},
		{`{"memory_mb": 16}`, "memory_mb"},
		{`{"cpus": 0.5, "cpu_request": 2}`, "cpu_request"},
		{`{"run_as_user": -5}`, "run_as_user"},
		{`{"pool": {"size": -1}}`, "pool.size"},
		{`{"pool": {"size": 1, "max_idle": "forever"}}`, "pool.max_idle"},
		{`{"promotion": {"policy": "sometimes"}}`, "promotion.policy"},
		{`{"memory_mb": -1}`, "memory_mb"},
		{`{"cpus": -2}`, "cpus"},
		{`{"imagee": "typo"}`, "imagee"},
		{`{"memory_mb": "lots"}`, "memory_mb"},
		{`{"pool": {"sise": 1}}`, "pool.sise"},
		{`{"kubeconfig": "relative/path"}`, "kubeconfig"},
		{`{"kubeconfig": "/nonexistent/kubeconfig"}`, "kubeconfig"},
	}
	for _, c := range cases {
		b := NewBackend(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := b.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(c.cfg)})
		cancel()
		if !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", c.cfg, err)
			continue
		}
		var fe *shared.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: err = %v, want a FieldError on %q", c.cfg, err, c.field)
		}
	}
	// Dependencies need a wheel source the pod does not have.
	_, err := NewBackend(nil).Configure(context.Background(), shared.ConfigureRequest{AllowedPackages: []string{"requests"}})
	if !errors.Is(err, shared.ErrNotSupported) {
		t.Errorf("allowed_packages: %v, want ErrNotSupported", err)
	}
	// The defaults are valid.
	if cfg, err := decodeConfig(nil, false); err != nil || cfg.Image != DefaultImage() || cfg.MemoryMB != DefaultMemoryMB || cfg.CPURequest != DefaultCPURequest {
		t.Errorf("defaults: %+v %v", cfg, err)
	}
}

// TestConfigAgainstTheCluster: a runtime or storage class the cluster
// does not have is a FieldError on that attribute.
func TestConfigAgainstTheCluster(t *testing.T) {
	requireCluster(t)
	for field, extra := range map[string]map[string]any{
		"runtime_class": {"runtime_class": "no-such-runtime"},
		"storage_class": {"storage_class": "no-such-storage"},
	} {
		b := NewBackend(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := b.Configure(ctx, shared.ConfigureRequest{Config: testConfig(extra)})
		cancel()
		var fe *shared.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%v: err = %v, want a FieldError on %s", extra, err, field)
		}
		b.Shutdown(context.Background())
	}
}

// TestIDsAndNames: label values and claim names are valid Kubernetes
// names for every valid id, and distinct ids get distinct claims.
func TestIDsAndNames(t *testing.T) {
	long := "A" + strings.Repeat("b", 62) + "_" // 64 characters, ends in _
	for _, id := range []string{"alice", "Alice", "a_b-", long, "0"} {
		if v := LabelValue(id); len(v) > 63 || !labelValueRE.MatchString(v) {
			t.Errorf("LabelValue(%q) = %q: not a label value", id, v)
		}
		if n := ClaimName(id); !isDNSName(n) {
			t.Errorf("ClaimName(%q) = %q: not a DNS name", id, n)
		}
	}
	if ClaimName("Alice") == ClaimName("alice") {
		t.Error("Alice and alice share a claim")
	}
	if LabelValue("alice") != "alice" {
		t.Error("a valid id is not its own label value")
	}
}
