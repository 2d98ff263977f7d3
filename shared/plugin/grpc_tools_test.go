package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"

	"github.com/hashicorp/go-plugin"
)

// toolsBackend is a session backend with shared.SessionTools that reports events.
type toolsBackend struct {
	mint shared.MintTokenRequest
	call shared.CallToolRequest
}

func (b *toolsBackend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	return shared.InfoResponse{Name: "tools", APIVersions: []int{shared.APIVersion}, Capabilities: []shared.Capability{shared.CapSessions, shared.CapToolLibrary}}, nil
}
func (b *toolsBackend) Configure(context.Context, shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	return shared.ConfigureResponse{}, nil
}
func (b *toolsBackend) Validate(context.Context, shared.ValidateRequest) (shared.ValidateResponse, error) {
	return shared.ValidateResponse{}, nil
}
func (b *toolsBackend) Execute(context.Context, shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	return shared.ExecuteResponse{
		Result: shared.ExecutionResult{Success: true, Output: json.RawMessage("2")},
		Events: []shared.Event{{Type: "tool.promotion_pending", Payload: json.RawMessage(`{"tool_name":"add","code_hash":"ab"}`)}, {Type: "tool.promoted"}},
	}, nil
}
func (b *toolsBackend) Open(context.Context, shared.OpenRequest) (shared.OpenResponse, error) {
	return shared.OpenResponse{SessionID: "s1"}, nil
}
func (b *toolsBackend) Close(context.Context, shared.CloseRequest) (shared.CloseResponse, error) {
	return shared.CloseResponse{}, nil
}
func (b *toolsBackend) MintToken(_ context.Context, req shared.MintTokenRequest) (shared.MintTokenResponse, error) {
	b.mint = req
	return shared.MintTokenResponse{Token: "tok-" + req.Scope, ExpiresAt: time.UnixMilli(1_700_000_000_123)}, nil
}
func (b *toolsBackend) CallTool(_ context.Context, req shared.CallToolRequest) (shared.CallToolResponse, error) {
	b.call = req
	if req.Token != "tok-operator" {
		return shared.CallToolResponse{}, fmt.Errorf("tool %s needs operator scope: %w", req.Tool, shared.ErrPermissionDenied)
	}
	return shared.CallToolResponse{Result: json.RawMessage(`{"forgotten":1}`), Events: []shared.Event{{Type: "tool.forgotten", Payload: json.RawMessage(`{"tool_name":"add"}`)}}}, nil
}

func dispenseTools(t *testing.T, impl shared.Sandbox) shared.Sandbox {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{PluginName: &SandboxPlugin{Impl: impl}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(shared.Sandbox)
}

// TestEventsAndSessionToolsRoundTripGRPC: shared.ExecuteResponse.Events and the
// optional shared.SessionTools service cross gRPC field by field, and a refused
// token keeps its class.
func TestEventsAndSessionToolsRoundTripGRPC(t *testing.T) {
	be := &toolsBackend{}
	sb := dispenseTools(t, be)
	ctx := context.Background()
	resp, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 2"})
	if err != nil {
		t.Fatal(err)
	}
	want := []shared.Event{{Type: "tool.promotion_pending", Payload: json.RawMessage(`{"tool_name":"add","code_hash":"ab"}`)}, {Type: "tool.promoted"}}
	if !reflect.DeepEqual(resp.Events, want) {
		t.Fatalf("events: got %+v want %+v", resp.Events, want)
	}
	st, ok := sb.(shared.SessionTools)
	if !ok {
		t.Fatal("the gRPC client does not implement shared.SessionTools")
	}
	mt, err := st.MintToken(ctx, shared.MintTokenRequest{SessionID: "s1", Scope: shared.ScopeOperator, TTL: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if mt.Token != "tok-operator" || mt.ExpiresAt.UnixMilli() != 1_700_000_000_123 {
		t.Fatalf("mint: %+v", mt)
	}
	if be.mint != (shared.MintTokenRequest{SessionID: "s1", Scope: shared.ScopeOperator, TTL: 90 * time.Second}) {
		t.Fatalf("mint request: %+v", be.mint)
	}
	cr, err := st.CallTool(ctx, shared.CallToolRequest{SessionID: "s1", Tool: "forget_tool", Arguments: json.RawMessage(`{"name":"add"}`), Token: mt.Token})
	if err != nil {
		t.Fatal(err)
	}
	if string(cr.Result) != `{"forgotten":1}` || len(cr.Events) != 1 || cr.Events[0].Type != "tool.forgotten" {
		t.Fatalf("call: %+v", cr)
	}
	if string(be.call.Arguments) != `{"name":"add"}` || be.call.Tool != "forget_tool" || be.call.SessionID != "s1" || be.call.Policy != nil {
		t.Fatalf("call request: %+v", be.call)
	}
	// A promoted tool's call carries the policy in force.
	pol := &shared.ToolPolicy{AllowedImports: []string{"re", "json"}, Timeout: 1500 * time.Millisecond, MemoryMB: 96, MaxOutputBytes: 4096}
	if _, err := st.CallTool(ctx, shared.CallToolRequest{SessionID: "s1", Tool: "forget_tool", Token: mt.Token, Policy: pol}); err != nil {
		t.Fatal(err)
	}
	if p := be.call.Policy; p == nil || strings.Join(p.AllowedImports, ",") != "re,json" || p.Timeout != pol.Timeout || p.MemoryMB != 96 || p.MaxOutputBytes != 4096 {
		t.Fatalf("policy over the wire: %+v", p)
	}
	_, err = st.CallTool(ctx, shared.CallToolRequest{SessionID: "s1", Tool: "forget_tool", Token: "tok-agent"})
	if !errors.Is(err, shared.ErrPermissionDenied) {
		t.Fatalf("agent token: want shared.ErrPermissionDenied, got %v", err)
	}
}

type noTools struct {
	shared.NoSessions
	inner *toolsBackend
}

func (n noTools) Info(ctx context.Context, r shared.InfoRequest) (shared.InfoResponse, error) {
	return n.inner.Info(ctx, r)
}
func (n noTools) Configure(ctx context.Context, r shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	return n.inner.Configure(ctx, r)
}
func (n noTools) Validate(ctx context.Context, r shared.ValidateRequest) (shared.ValidateResponse, error) {
	return n.inner.Validate(ctx, r)
}
func (n noTools) Execute(ctx context.Context, r shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	return shared.ExecuteResponse{Result: shared.ExecutionResult{Success: true}}, nil
}

func TestSessionToolsAbsentIsNotSupported(t *testing.T) {
	sb := dispenseTools(t, noTools{inner: &toolsBackend{}})
	st := sb.(shared.SessionTools)
	if _, err := st.MintToken(context.Background(), shared.MintTokenRequest{SessionID: "s"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Fatalf("mint: want shared.ErrNotSupported, got %v", err)
	}
	if _, err := st.CallTool(context.Background(), shared.CallToolRequest{SessionID: "s", Tool: "x"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Fatalf("call: want shared.ErrNotSupported, got %v", err)
	}
	resp, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1"})
	if err != nil || resp.Events != nil {
		t.Fatalf("execute: %+v %v", resp, err)
	}
}

// streamingToolsBackend is toolsBackend that also streams executions and
// tool calls (shared.Streamer, shared.SessionToolStreamer).
type streamingToolsBackend struct{ toolsBackend }

func (b *streamingToolsBackend) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk) error) (shared.ExecuteResponse, error) {
	return b.Execute(ctx, req)
}

func (b *streamingToolsBackend) CallToolStream(ctx context.Context, req shared.CallToolRequest, send func(shared.OutputChunk) error) (shared.CallToolResponse, error) {
	for _, c := range []shared.OutputChunk{{Stream: shared.StreamStdout, Data: []byte("one\n")}, {Stream: shared.StreamStderr, Data: []byte("warn\n")}} {
		if err := send(c); err != nil {
			return shared.CallToolResponse{}, err
		}
	}
	return b.CallTool(ctx, req)
}

// A tool call streams over gRPC (chunks, then the response with its
// events; a refusal keeps its class); against a backend that serves
// streaming but not tool-call streaming, or no streaming at all, the
// client gets ErrNotSupported with ErrNotRun (the host then calls
// CallTool: nothing ran).
func TestCallToolStreamGRPC(t *testing.T) {
	sb := dispenseTools(t, &streamingToolsBackend{})
	ts, ok := sb.(shared.SessionToolStreamer)
	if !ok {
		t.Fatal("the gRPC client is no shared.SessionToolStreamer")
	}
	ctx := context.Background()
	var got []shared.OutputChunk
	resp, err := ts.CallToolStream(ctx, shared.CallToolRequest{SessionID: "s1", Tool: "forget_tool", Token: "tok-operator"}, func(c shared.OutputChunk) error {
		got = append(got, c)
		return nil
	})
	if err != nil || string(resp.Result) != `{"forgotten":1}` || len(resp.Events) != 1 {
		t.Fatalf("CallToolStream: %+v %v", resp, err)
	}
	if len(got) != 2 || string(got[0].Data) != "one\n" || got[1].Stream != shared.StreamStderr {
		t.Errorf("chunks: %+v", got)
	}
	if _, err := ts.CallToolStream(ctx, shared.CallToolRequest{SessionID: "s1", Tool: "forget_tool", Token: "tok-agent"}, func(shared.OutputChunk) error { return nil }); !errors.Is(err, shared.ErrPermissionDenied) || errors.Is(err, shared.ErrNotRun) {
		t.Errorf("a refused call: %v, want ErrPermissionDenied", err)
	}
	sendErr := errors.New("client gone")
	if _, err := ts.CallToolStream(ctx, shared.CallToolRequest{SessionID: "s1", Tool: "forget_tool", Token: "tok-operator"}, func(shared.OutputChunk) error { return sendErr }); !errors.Is(err, sendErr) {
		t.Errorf("a failing send: %v", err)
	}

	for name, impl := range map[string]shared.Sandbox{"no streaming": &toolsBackend{}, "no tool streaming": &executeOnlyStreamer{}} {
		ts := dispenseTools(t, impl).(shared.SessionToolStreamer)
		_, err := ts.CallToolStream(ctx, shared.CallToolRequest{SessionID: "s1", Tool: "forget_tool", Token: "tok-operator"}, func(shared.OutputChunk) error { return nil })
		if !errors.Is(err, shared.ErrNotSupported) || !errors.Is(err, shared.ErrNotRun) {
			t.Errorf("%s: %v, want ErrNotSupported and ErrNotRun", name, err)
		}
	}
}

// executeOnlyStreamer streams executions but not tool calls.
type executeOnlyStreamer struct{ toolsBackend }

func (b *executeOnlyStreamer) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk) error) (shared.ExecuteResponse, error) {
	return b.Execute(ctx, req)
}
