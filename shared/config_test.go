package shared

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type testPool struct {
	Size int    `json:"size"`
	TTL  string `json:"ttl"`
}

type testConfig struct {
	Image   string    `json:"image"`
	Memory  int       `json:"memory_mb"`
	Require []string  `json:"require"`
	Warm    *bool     `json:"warm"`
	Pool    *testPool `json:"pool"`
	Inline  testPool  `json:"inline"`
	Since   time.Time `json:"since"` // decodes itself: not a block
	Hidden  string    `json:"-"`
}

func TestDecodeConfigKeepsDefaultsAndDecodes(t *testing.T) {
	cfg := testConfig{Image: "default", Memory: 256, Inline: testPool{Size: 3, TTL: "1m"}}
	raw := `{"memory_mb": 512, "require": ["a"], "warm": false, "pool": {"size": 2}, "inline": {"size": 4}, "since": "2026-01-02T03:04:05Z"}`
	if err := DecodeConfig("test", []byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Image != "default" || cfg.Memory != 512 || len(cfg.Require) != 1 || cfg.Warm == nil || *cfg.Warm {
		t.Errorf("cfg %+v", cfg)
	}
	if cfg.Pool == nil || cfg.Pool.Size != 2 {
		t.Errorf("pool %+v", cfg.Pool)
	}
	if cfg.Inline.Size != 4 || cfg.Inline.TTL != "1m" {
		t.Errorf("inline %+v: the nested block's default ttl must stay", cfg.Inline)
	}
	if cfg.Since.Year() != 2026 {
		t.Errorf("since %v", cfg.Since)
	}
	for _, empty := range []string{"", "  ", "null"} {
		c := testConfig{Image: "x"}
		if err := DecodeConfig("test", []byte(empty), &c); err != nil || c.Image != "x" {
			t.Errorf("%q: %v %+v", empty, err, c)
		}
	}
}

// Every refusal names the attribute (a dotted path inside a nested block),
// so the host can point at it in the policy file.
func TestDecodeConfigRefusesAtTheAttribute(t *testing.T) {
	for _, c := range []struct {
		raw, field, reason string
	}{
		{`{"imagee": "x"}`, "imagee", `unknown attribute "imagee"; this block takes image, inline, memory_mb, pool, require, since, warm`},
		{`{"Image": "x"}`, "Image", "unknown attribute"}, // exact names, not encoding/json's case folding
		{`{"Hidden": "x"}`, "Hidden", "unknown attribute"},
		{`{"memory_mb": "lots"}`, "memory_mb", "a string value where a whole number is wanted"},
		{`{"memory_mb": 1.5}`, "memory_mb", "where a whole number is wanted"},
		{`{"require": "a"}`, "require", "where a list is wanted"},
		{`{"pool": {"size": 1, "sise": 2}}`, "pool.sise", `unknown attribute "sise"; this block takes size, ttl`},
		{`{"pool": {"size": "two"}}`, "pool.size", "where a whole number is wanted"},
		{`{"pool": 3}`, "pool", "want a block of attributes"},
		{`{"inline": {"ttl": 5}}`, "inline.ttl", "a number value where a string is wanted"},
	} {
		cfg := testConfig{}
		err := DecodeConfig("test", []byte(c.raw), &cfg)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Reason, c.reason) {
			t.Errorf("%s: %v, want a FieldError on %s saying %q", c.raw, err, c.field, c.reason)
			continue
		}
		if !errors.Is(err, ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "test config: ") {
			t.Errorf("%s: %v", c.raw, err)
		}
	}
	// Not an object at all: no attribute to name, still invalid.
	err := DecodeConfig("test", []byte(`[1]`), &testConfig{})
	var fe *FieldError
	if !errors.Is(err, ErrInvalidArgument) || errors.As(err, &fe) {
		t.Errorf("array: %v", err)
	}
	if err := DecodeConfig("test", []byte(`{}`), testConfig{}); !errors.Is(err, ErrInternal) {
		t.Errorf("non-pointer: %v", err)
	}
}

func TestConfigErrorWrapsClass(t *testing.T) {
	err := ConfigError("docker", "image", ErrUnavailable, "%q is not built", "x")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "image" || !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("%v", err)
	}
	if got := err.Error(); !strings.HasPrefix(got, "docker config: ") || !strings.Contains(got, `"x" is not built`) {
		t.Errorf("%q", got)
	}
}
