package docker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
)

// A bad `config {}` block is refused naming the attribute (the host turns
// the FieldError into a diagnostic at it), before the engine is asked
// anything: these refusals need no Docker engine.
func TestConfigRefusalsNameTheAttribute(t *testing.T) {
	for cfg, field := range map[string]string{
		`{"memory_mb": -1}`:                  "memory_mb",
		`{"cpus": -0.5}`:                     "cpus",
		`{"pids_limit": -3}`:                 "pids_limit",
		`{"workspace_mb": -1}`:               "workspace_mb",
		`{"memory_mb": 3000000000}`:          "memory_mb",
		`{"open_timeout": "soon"}`:           "open_timeout",
		`{"wheel_dir": "relative"}`:          "wheel_dir",
		`{"wheel_dir": "/nonexistent/dir"}`:  "wheel_dir",
		`{"network": "host"}`:                "network",
		`{"imagee": "typo"}`:                 "imagee",
		`{"memory_mb": "lots"}`:              "memory_mb",
		`{"pool": {"size": -1}}`:             "pool.size",
		`{"pool": {"sise": 1}}`:              "pool.sise",
		`{"promotion": {"policy": "often"}}`: "promotion.policy",
	} {
		b := NewBackend(hclog.NewNullLogger())
		_, err := b.Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(cfg)})
		var fe *shared.FieldError
		if !errors.Is(err, shared.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: %v, want a FieldError on %s", cfg, err, field)
		}
		b.Shutdown(context.Background())
	}
}

// An image the engine does not have is a refusal of the image attribute
// that also says the machine lacks it (ErrUnavailable).
func TestConfigMissingImageNamesTheAttribute(t *testing.T) {
	requireDocker(t)
	b := NewBackend(hclog.NewNullLogger())
	defer b.Shutdown(context.Background())
	_, err := b.Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(`{"image": "orqest/no-such-image:never"}`)})
	var fe *shared.FieldError
	if !errors.Is(err, shared.ErrUnavailable) || !errors.As(err, &fe) || fe.Field != "image" {
		t.Errorf("%v, want a FieldError on image wrapping ErrUnavailable", err)
	}
}
