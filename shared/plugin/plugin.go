package plugin

import (
	"context"
	"os"

	"github.com/orqest/sandbox/shared"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/orqest/sandbox/shared/plugin/internal/proto"
)

// PluginName is the name under which every backend dispenses its shared.Sandbox.
const PluginName = "sandbox"

// PluginPrefix is the binary-name prefix the host discovers plugins by, in the
// terraform-provider-<name> habit: orqest-sandbox-plugin-subprocess, ...
const PluginPrefix = "orqest-sandbox-plugin-"

// Handshake is the go-plugin handshake shared by host and plugins. It is a
// UX guard (a plugin binary run by hand says so), not a security feature;
// plugin integrity is the catalog's sha256 check. The protocol version is
// negotiated through VersionedPlugins.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  shared.APIVersion,
	MagicCookieKey:   "ORQEST_SANDBOX_PLUGIN",
	MagicCookieValue: "4e0f6c1b-orqest-sandbox-a9d2",
}

// SandboxPlugin is the go-plugin Plugin type for the shared.Sandbox interface. Only
// gRPC is supported.
type SandboxPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	// Impl is the backend; set on the plugin side only.
	Impl shared.Sandbox
}

var _ goplugin.GRPCPlugin = (*SandboxPlugin)(nil)

// GRPCServer registers the backend on the plugin's gRPC server.
func (p *SandboxPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	srv := &GRPCServer{Impl: p.Impl}
	proto.RegisterSandboxServer(s, srv)
	if _, ok := p.Impl.(shared.SessionTools); ok {
		// Optional: absent, the host gets codes.Unimplemented.
		proto.RegisterSessionToolsServer(s, &GRPCToolsServer{Impl: p.Impl.(shared.SessionTools)})
	}
	if sp, ok := p.Impl.(shared.SessionPauser); ok {
		proto.RegisterSessionPauseServer(s, &GRPCPauseServer{Impl: sp})
	}
	if fs, ok := p.Impl.(shared.FileStore); ok {
		proto.RegisterFileStoreServer(s, &GRPCFilesServer{Impl: fs})
	}
	if st, ok := p.Impl.(shared.Streamer); ok {
		proto.RegisterStreamingServer(s, &GRPCStreamServer{Impl: st})
	}
	return nil
}

// GRPCClient returns the host-side shared.Sandbox for a plugin connection.
// ctx is go-plugin's plugin-exit context: done once the process exited.
func (p *SandboxPlugin) GRPCClient(ctx context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (interface{}, error) {
	return NewGRPCClient(c, ctx), nil
}

// VersionedPlugins returns the plugin sets per protocol version for go-plugin's
// version negotiation. impl is nil on the host side.
func VersionedPlugins(impl shared.Sandbox) map[int]goplugin.PluginSet {
	return map[int]goplugin.PluginSet{
		shared.APIVersion: {PluginName: &SandboxPlugin{Impl: impl}},
	}
}

// ServeOption adjusts Serve.
type ServeOption func(*goplugin.ServeConfig)

// WithLogger sets the logger go-plugin uses in the plugin process.
func WithLogger(l hclog.Logger) ServeOption {
	return func(c *goplugin.ServeConfig) { c.Logger = l }
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
func Serve(impl shared.Sandbox, opts ...ServeOption) {
	cfg := &goplugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: VersionedPlugins(impl),
		GRPCServer:       grpcServer,
	}
	for _, o := range opts {
		o(cfg)
	}
	goplugin.Serve(cfg)
}
