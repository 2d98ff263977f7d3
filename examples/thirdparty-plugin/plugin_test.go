package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// TestBinaryServesThePlugin builds the plugin binary and launches it the way
// the host does (go-plugin client, the shared handshake, gRPC only): the
// handshake succeeds, Info names the backend and code runs through it.
func TestBinaryServesThePlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	bin := filepath.Join(t.TempDir(), plugin.PluginPrefix+Name)
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		VersionedPlugins: plugin.VersionedPlugins(nil),
		Cmd:              exec.Command(bin),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Managed:          true,
		AutoMTLS:         true,
		SkipHostEnv:      true,
		StartTimeout:     30 * time.Second,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "host", Level: hclog.Warn}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	raw, err := rpc.Dispense(plugin.PluginName)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	sb := raw.(shared.Sandbox)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := sb.Info(ctx, shared.InfoRequest{})
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.Name != Name || info.Tier != 3 {
		t.Errorf("Info = %q tier %d, want %q tier 3", info.Name, info.Tier, Name)
	}
	if _, err := sb.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(`{"max_parallel": 2}`)}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	resp, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1+1"})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !resp.Result.Success || string(resp.Result.Output) != "2" {
		t.Errorf("Execute(`return 1+1`) = %+v, want success with 2", resp.Result)
	}
	// A typo in the config block is an invalid argument, across the wire.
	if _, err := sb.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(`{"pyhton": "/usr/bin/python3"}`)}); err == nil {
		t.Error("Configure accepted an unknown attribute")
	}
}
