package shared

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orqest/sandbox/shared/proto"
)

// Compile-time guards for the optional SessionTools service.
var (
	_ SessionTools             = (*GRPCClient)(nil)
	_ proto.SessionToolsServer = (*GRPCToolsServer)(nil)
)

// MintToken implements SessionTools. Against a plugin that does not serve
// SessionTools it returns an error wrapping ErrNotSupported.
func (c *GRPCClient) MintToken(ctx context.Context, req MintTokenRequest) (MintTokenResponse, error) {
	if c.tools == nil {
		return MintTokenResponse{}, fmt.Errorf("session tools: %w", ErrNotSupported)
	}
	r, err := c.tools.MintToken(ctx, &proto.MintTokenRequest{SessionId: req.SessionID, Scope: req.Scope, TtlMs: req.TTL.Milliseconds()})
	if err != nil {
		return MintTokenResponse{}, FromGRPC(err)
	}
	out := MintTokenResponse{Token: r.GetToken()}
	if ms := r.GetExpiresAtUnixMs(); ms > 0 {
		out.ExpiresAt = time.UnixMilli(ms)
	}
	return out, nil
}

// CallTool implements SessionTools.
func (c *GRPCClient) CallTool(ctx context.Context, req CallToolRequest) (CallToolResponse, error) {
	if c.tools == nil {
		return CallToolResponse{}, fmt.Errorf("session tools: %w", ErrNotSupported)
	}
	r, err := c.tools.CallTool(ctx, &proto.CallToolRequest{SessionId: req.SessionID, Tool: req.Tool, ArgumentsJson: req.Arguments, Token: req.Token})
	if err != nil {
		return CallToolResponse{}, FromGRPC(err)
	}
	out := CallToolResponse{Events: eventsFromProto(r.GetEvents())}
	if len(r.GetResultJson()) > 0 {
		out.Result = json.RawMessage(r.GetResultJson())
	}
	return out, nil
}

// GRPCToolsServer serves a backend's SessionTools over gRPC. SandboxPlugin
// registers it only when the backend implements SessionTools.
type GRPCToolsServer struct {
	proto.UnimplementedSessionToolsServer
	Impl SessionTools
}

// MintToken implements proto.SessionToolsServer.
func (s *GRPCToolsServer) MintToken(ctx context.Context, req *proto.MintTokenRequest) (*proto.MintTokenResponse, error) {
	r, err := s.Impl.MintToken(ctx, MintTokenRequest{SessionID: req.GetSessionId(), Scope: req.GetScope(), TTL: time.Duration(req.GetTtlMs()) * time.Millisecond})
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
	r, err := s.Impl.CallTool(ctx, CallToolRequest{SessionID: req.GetSessionId(), Tool: req.GetTool(), Arguments: json.RawMessage(req.GetArgumentsJson()), Token: req.GetToken()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.CallToolResponse{ResultJson: r.Result, Events: eventsToProto(r.Events)}, nil
}

func eventsToProto(evs []Event) []*proto.Event {
	if len(evs) == 0 {
		return nil
	}
	out := make([]*proto.Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, &proto.Event{Type: e.Type, PayloadJson: e.Payload})
	}
	return out
}

func eventsFromProto(evs []*proto.Event) []Event {
	if len(evs) == 0 {
		return nil
	}
	out := make([]Event, 0, len(evs))
	for _, e := range evs {
		ev := Event{Type: e.GetType()}
		if len(e.GetPayloadJson()) > 0 {
			ev.Payload = json.RawMessage(e.GetPayloadJson())
		}
		out = append(out, ev)
	}
	return out
}
