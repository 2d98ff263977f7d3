package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orqest/sandbox/shared"

	"github.com/orqest/sandbox/shared/plugin/internal/proto"
)

// Compile-time guards for the optional shared.SessionTools service.
var (
	_ shared.SessionTools      = (*GRPCClient)(nil)
	_ proto.SessionToolsServer = (*GRPCToolsServer)(nil)
)

// MintToken implements shared.SessionTools. Against a plugin that does not serve
// shared.SessionTools it returns an error wrapping shared.ErrNotSupported.
func (c *GRPCClient) MintToken(ctx context.Context, req shared.MintTokenRequest) (shared.MintTokenResponse, error) {
	ctx, done := c.begin(ctx)
	if c.tools == nil {
		return shared.MintTokenResponse{}, fmt.Errorf("session tools: %w", shared.ErrNotSupported)
	}
	r, err := c.tools.MintToken(ctx, &proto.MintTokenRequest{SessionId: req.SessionID, Scope: req.Scope, TtlMs: req.TTL.Milliseconds()})
	if err != nil {
		return shared.MintTokenResponse{}, done(err)
	}
	out := shared.MintTokenResponse{Token: r.GetToken()}
	if ms := r.GetExpiresAtUnixMs(); ms > 0 {
		out.ExpiresAt = time.UnixMilli(ms)
	}
	return out, nil
}

// CallTool implements shared.SessionTools.
func (c *GRPCClient) CallTool(ctx context.Context, req shared.CallToolRequest) (shared.CallToolResponse, error) {
	ctx, done := c.begin(ctx)
	if c.tools == nil {
		return shared.CallToolResponse{}, fmt.Errorf("session tools: %w", shared.ErrNotSupported)
	}
	r, err := c.tools.CallTool(ctx, callToolRequestToProto(req))
	if err != nil {
		return shared.CallToolResponse{}, done(err)
	}
	return callToolResponseFromProto(r), nil
}

func callToolRequestToProto(req shared.CallToolRequest) *proto.CallToolRequest {
	preq := &proto.CallToolRequest{SessionId: req.SessionID, Tool: req.Tool, ArgumentsJson: req.Arguments, Token: req.Token}
	if p := req.Policy; p != nil {
		preq.Policy = &proto.ToolPolicy{AllowedImports: p.AllowedImports, TimeoutMs: p.Timeout.Milliseconds(), MemoryMb: int64(p.MemoryMB), MaxOutputBytes: int64(p.MaxOutputBytes)}
	}
	return preq
}

func callToolRequestFromProto(req *proto.CallToolRequest) shared.CallToolRequest {
	creq := shared.CallToolRequest{SessionID: req.GetSessionId(), Tool: req.GetTool(), Arguments: json.RawMessage(req.GetArgumentsJson()), Token: req.GetToken()}
	if p := req.GetPolicy(); p != nil {
		creq.Policy = &shared.ToolPolicy{AllowedImports: p.GetAllowedImports(), Timeout: time.Duration(p.GetTimeoutMs()) * time.Millisecond, MemoryMB: int(p.GetMemoryMb()), MaxOutputBytes: int(p.GetMaxOutputBytes())}
	}
	return creq
}

func callToolResponseToProto(r shared.CallToolResponse) *proto.CallToolResponse {
	return &proto.CallToolResponse{ResultJson: r.Result, Events: eventsToProto(r.Events)}
}

func callToolResponseFromProto(r *proto.CallToolResponse) shared.CallToolResponse {
	out := shared.CallToolResponse{Events: eventsFromProto(r.GetEvents())}
	if len(r.GetResultJson()) > 0 {
		out.Result = json.RawMessage(r.GetResultJson())
	}
	return out
}

// GRPCToolsServer serves a backend's shared.SessionTools over gRPC. SandboxPlugin
// registers it only when the backend implements shared.SessionTools.
type GRPCToolsServer struct {
	proto.UnimplementedSessionToolsServer
	Impl shared.SessionTools
}

// MintToken implements proto.SessionToolsServer.
func (s *GRPCToolsServer) MintToken(ctx context.Context, req *proto.MintTokenRequest) (*proto.MintTokenResponse, error) {
	r, err := s.Impl.MintToken(ctx, shared.MintTokenRequest{SessionID: req.GetSessionId(), Scope: req.GetScope(), TTL: time.Duration(req.GetTtlMs()) * time.Millisecond})
	if err != nil {
		return nil, ToGRPC(err)
	}
	out := &proto.MintTokenResponse{Token: r.Token}
	if !r.ExpiresAt.IsZero() {
		out.ExpiresAtUnixMs = r.ExpiresAt.UnixMilli()
	}
	return out, nil
}

// CallTool implements proto.SessionToolsServer.
func (s *GRPCToolsServer) CallTool(ctx context.Context, req *proto.CallToolRequest) (*proto.CallToolResponse, error) {
	r, err := s.Impl.CallTool(ctx, callToolRequestFromProto(req))
	if err != nil {
		return nil, ToGRPC(err)
	}
	return callToolResponseToProto(r), nil
}

func eventsToProto(evs []shared.Event) []*proto.Event {
	if len(evs) == 0 {
		return nil
	}
	out := make([]*proto.Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, &proto.Event{Type: e.Type, PayloadJson: e.Payload})
	}
	return out
}

func eventsFromProto(evs []*proto.Event) []shared.Event {
	if len(evs) == 0 {
		return nil
	}
	out := make([]shared.Event, 0, len(evs))
	for _, e := range evs {
		ev := shared.Event{Type: e.GetType()}
		if len(e.GetPayloadJson()) > 0 {
			ev.Payload = json.RawMessage(e.GetPayloadJson())
		}
		out = append(out, ev)
	}
	return out
}
