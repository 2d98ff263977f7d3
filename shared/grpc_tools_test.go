package shared

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
)

// toolsBackend is a session backend with SessionTools that reports events.
type toolsBackend struct {
	mint MintTokenRequest
	call CallToolRequest
}

func (b *toolsBackend) Info(context.Context, InfoRequest) (InfoResponse, error) {
	return InfoResponse{Name: "tools", APIVersions: []int{APIVersion}, Capabilities: []Capability{CapSessions, CapToolLibrary}}, nil
}
func (b *toolsBackend) Configure(context.Context, ConfigureRequest) (ConfigureResponse, error) {
	return ConfigureResponse{}, nil
}
func (b *toolsBackend) Validate(context.Context, ValidateRequest) (ValidateResponse, error) {
	return ValidateResponse{}, nil
}
func (b *toolsBackend) Execute(context.Context, ExecuteRequest) (ExecuteResponse, error) {
	return ExecuteResponse{
		Result: ExecutionResult{Success: true, Output: json.RawMessage("2")},
		Events: []Event{{Type: "tool.promotion_pending", Payload: json.RawMessage(`{"tool_name":"add","code_hash":"ab"}`)}, {Type: "tool.promoted"}},
	}, nil
}
func (b *toolsBackend) Open(context.Context, OpenRequest) (OpenResponse, error) {
	return OpenResponse{SessionID: "s1"}, nil
}
func (b *toolsBackend) Close(context.Context, CloseRequest) (CloseResponse, error) {
	return CloseResponse{}, nil
}
func (b *toolsBackend) MintToken(_ context.Context, req MintTokenRequest) (MintTokenResponse, error) {
	b.mint = req
	return MintTokenResponse{Token: "tok-" + req.Scope, ExpiresAt: time.UnixMilli(1_700_000_000_123)}, nil
}
func (b *toolsBackend) CallTool(_ context.Context, req CallToolRequest) (CallToolResponse, error) {
	b.call = req
	if req.Token != "tok-operator" {
		return CallToolResponse{}, fmt.Errorf("tool %s needs operator scope: %w", req.Tool, ErrPermissionDenied)
	}
	return CallToolResponse{Result: json.RawMessage(`{"forgotten":1}`), Events: []Event{{Type: "tool.forgotten", Payload: json.RawMessage(`{"tool_name":"add"}`)}}}, nil
}

func dispenseTools(t *testing.T, impl Sandbox) Sandbox {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{PluginName: &SandboxPlugin{Impl: impl}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(Sandbox)
}

// TestEventsAndSessionToolsRoundTripGRPC: ExecuteResponse.Events and the
// optional SessionTools service cross gRPC field by field, and a refused
// token keeps its class.
func TestEventsAndSessionToolsRoundTripGRPC(t *testing.T) {
	be := &toolsBackend{}
	sb := dispenseTools(t, be)
	ctx := context.Background()
	resp, err := sb.Execute(ctx, ExecuteRequest{Code: "return 2"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{Type: "tool.promotion_pending", Payload: json.RawMessage(`{"tool_name":"add","code_hash":"ab"}`)}, {Type: "tool.promoted"}}
	if !reflect.DeepEqual(resp.Events, want) {
		t.Fatalf("events: got %+v want %+v", resp.Events, want)
	}
	st, ok := sb.(SessionTools)
	if !ok {
		t.Fatal("the gRPC client does not implement SessionTools")
	}
	mt, err := st.MintToken(ctx, MintTokenRequest{SessionID: "s1", Scope: ScopeOperator, TTL: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if mt.Token != "tok-operator" || mt.ExpiresAt.UnixMilli() != 1_700_000_000_123 {
		t.Fatalf("mint: %+v", mt)
	}
	if be.mint != (MintTokenRequest{SessionID: "s1", Scope: ScopeOperator, TTL: 90 * time.Second}) {
		t.Fatalf("mint request: %+v", be.mint)
	}
	cr, err := st.CallTool(ctx, CallToolRequest{SessionID: "s1", Tool: "forget_tool", Arguments: json.RawMessage(`{"name":"add"}`), Token: mt.Token})
	if err != nil {
		t.Fatal(err)
	}
	if string(cr.Result) != `{"forgotten":1}` || len(cr.Events) != 1 || cr.Events[0].Type != "tool.forgotten" {
		t.Fatalf("call: %+v", cr)
	}
	if string(be.call.Arguments) != `{"name":"add"}` || be.call.Tool != "forget_tool" || be.call.SessionID != "s1" {
		t.Fatalf("call request: %+v", be.call)
	}
	_, err = st.CallTool(ctx, CallToolRequest{SessionID: "s1", Tool: "forget_tool", Token: "tok-agent"})
	if !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("agent token: want ErrPermissionDenied, got %v", err)
	}
}

type noTools struct {
	NoSessions
	inner *toolsBackend
}

func (n noTools) Info(ctx context.Context, r InfoRequest) (InfoResponse, error) {
	return n.inner.Info(ctx, r)
}
func (n noTools) Configure(ctx context.Context, r ConfigureRequest) (ConfigureResponse, error) {
	return n.inner.Configure(ctx, r)
}
func (n noTools) Validate(ctx context.Context, r ValidateRequest) (ValidateResponse, error) {
	return n.inner.Validate(ctx, r)
}
func (n noTools) Execute(ctx context.Context, r ExecuteRequest) (ExecuteResponse, error) {
	return ExecuteResponse{Result: ExecutionResult{Success: true}}, nil
}

func TestSessionToolsAbsentIsNotSupported(t *testing.T) {
	sb := dispenseTools(t, noTools{inner: &toolsBackend{}})
	st := sb.(SessionTools)
	if _, err := st.MintToken(context.Background(), MintTokenRequest{SessionID: "s"}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("mint: want ErrNotSupported, got %v", err)
	}
	if _, err := st.CallTool(context.Background(), CallToolRequest{SessionID: "s", Tool: "x"}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("call: want ErrNotSupported, got %v", err)
	}
	resp, err := sb.Execute(context.Background(), ExecuteRequest{Code: "return 1"})
	if err != nil || resp.Events != nil {
		t.Fatalf("execute: %+v %v", resp, err)
	}
}
