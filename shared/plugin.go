package shared

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/orqest/sandbox/shared/proto"
)

// PluginName is the name under which every backend dispenses its Sandbox.
const PluginName = "sandbox"

// PluginPrefix is the binary-name prefix the host discovers plugins by, in the
// terraform-provider-<name> habit: orqest-sandbox-plugin-subprocess, ...
const PluginPrefix = "orqest-sandbox-plugin-"

// Handshake is the go-plugin handshake shared by host and plugins. It is a
// UX guard (a plugin binary run by hand says so), not a security feature;
// plugin integrity is the catalog's sha256 check. The protocol version is
// negotiated through VersionedPlugins.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  APIVersion,
	MagicCookieKey:   "ORQEST_SANDBOX_PLUGIN",
	MagicCookieValue: "4e0f6c1b-orqest-sandbox-a9d2",
}

// SandboxPlugin is the go-plugin Plugin type for the Sandbox interface. Only
// gRPC is supported.
type SandboxPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the backend; set on the plugin side only.
	Impl Sandbox
}

var _ plugin.GRPCPlugin = (*SandboxPlugin)(nil)

// GRPCServer registers the backend on the plugin's gRPC server.
func (p *SandboxPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	srv := &GRPCServer{Impl: p.Impl}
	proto.RegisterSandboxServer(s, srv)
	if _, ok := p.Impl.(SessionTools); ok {
		// Optional: absent, the host gets codes.Unimplemented.
		proto.RegisterSessionToolsServer(s, &GRPCToolsServer{Impl: p.Impl.(SessionTools)})
	}
	return nil
}

// GRPCClient returns the host-side Sandbox for a plugin connection.
func (p *SandboxPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (interface{}, error) {
	gc := NewGRPCClient(proto.NewSandboxClient(c))
	gc.tools = proto.NewSessionToolsClient(c)
	return gc, nil
}

// VersionedPlugins returns the plugin sets per protocol version for go-plugin's
// version negotiation. impl is nil on the host side.
func VersionedPlugins(impl Sandbox) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		APIVersion: {PluginName: &SandboxPlugin{Impl: impl}},
	}
}

// ServeOption adjusts Serve.
type ServeOption func(*plugin.ServeConfig)

// WithLogger sets the logger go-plugin uses in the plugin process.
func WithLogger(l hclog.Logger) ServeOption {
	return func(c *plugin.ServeConfig) { c.Logger = l }
}

// NewPluginLogger returns the logger plugins should use: JSON hclog on stderr
// (stdout carries the go-plugin handshake), which the host re-emits.
func NewPluginLogger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Output:     os.Stderr,
		JSONFormat: true,
		Level:      hclog.LevelFromString(envOr("ORQEST_PLUGIN_LOG_LEVEL", "info")),
	})
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Serve runs impl as a go-plugin gRPC plugin. It is what a backend's main
// calls; it returns when the host disconnects.
func Serve(impl Sandbox, opts ...ServeOption) {
	cfg := &plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: VersionedPlugins(impl),
		GRPCServer:       plugin.DefaultGRPCServer,
	}
	for _, o := range opts {
		o(cfg)
	}
	plugin.Serve(cfg)
}
