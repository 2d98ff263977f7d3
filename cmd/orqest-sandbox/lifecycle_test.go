package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared/plugin"
)

// A plugin that never answers the handshake (a script whose sleep holds
// its pipes) makes `policy check`, `run` and `mcp serve` fail within the
// host's start timeout (10 s) plus a little, as a configuration or
// infrastructure error, instead of waiting for the plugin's sleep to end.
func TestHungPluginFailsWithinStartTimeout(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, plugin.PluginPrefix+"sleeper")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n/bin/sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "plugin_dir = \""+dir+"\"\nsandbox \"s\" {\n  plugin = \"sleeper\"\n}\n")
	for name, args := range map[string][]string{
		"policy check": {"policy", "check", cfg},
		"run":          {"run", "--config", cfg, "-e", "return 1"},
		"mcp serve":    {"mcp", "serve", "--config", cfg},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, "", "", args...)
			if r.code != exitError || !strings.Contains(r.stderr, "timeout while waiting for plugin to start") {
				t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			if bound := 15 * time.Second; r.elapsed > bound {
				t.Errorf("took %s, want under %s", r.elapsed.Round(time.Millisecond), bound)
			}
		})
	}
}
