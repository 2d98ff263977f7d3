package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared/plugin"
)

// writePlugin puts an executable named like a plugin in dir.
func writePlugin(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, plugin.PluginPrefix+name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A program that embeds the host finds plugins through ORQEST_PLUGIN_DIR
// (a list) and the user's plugin directory, in that order, after the
// policy's plugin_dir; a plugin found nowhere names every directory
// searched and how to add one.
func TestCatalogSearchPath(t *testing.T) {
	cfgHome := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfgHome)
	envA, envB := t.TempDir(), t.TempDir()
	t.Setenv(PluginDirEnv, envA+string(os.PathListSeparator)+envB)
	user := UserPluginDir()
	if user != filepath.Join(cfgHome, "orqest-sandbox", "plugins") {
		t.Fatalf("UserPluginDir() = %q", user)
	}
	policyDir := t.TempDir()
	writePlugin(t, policyDir, "both")
	writePlugin(t, envA, "both")
	inB := writePlugin(t, envB, "envonly")
	writePlugin(t, user, "envonly")
	inUser := writePlugin(t, user, "useronly")

	cfg, diags := ParseConfig(filepath.Join(policyDir, "config.hcl"), []byte(`plugin_dir = "."
sandbox "a" { plugin = "both" }
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cat, diags := NewCatalog(cfg, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, c := range []struct {
		name   string
		path   string
		source PluginSource
	}{
		{"both", filepath.Join(policyDir, plugin.PluginPrefix+"both"), SourcePluginDir},
		{"envonly", inB, SourceEnvDir},
		{"useronly", inUser, SourceUserDir},
	} {
		e, ok := cat.Lookup(c.name)
		if !ok || e.Path != c.path || e.Source != c.source {
			t.Errorf("%s: %+v (found %v), want %s from %s", c.name, e, ok, c.path, c.source)
		}
	}

	cfg, _ = ParseConfig(filepath.Join(policyDir, "config.hcl"), []byte(`
plugin "missing" {}
sandbox "a" { plugin = "missing" }
`))
	_, diags = NewCatalog(cfg, nil)
	msg := diags.Error()
	for _, want := range []string{envA + " (env)", user + " (user_config_dir)", PluginDirEnv} {
		if !strings.Contains(msg, want) {
			t.Errorf("plugin-not-found diagnostic does not name %q: %s", want, msg)
		}
	}
}
