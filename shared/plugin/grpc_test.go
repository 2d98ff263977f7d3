package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"

	"github.com/hashicorp/go-plugin"
)

// recorder is a shared.Sandbox that remembers the requests it received.
type recorder struct {
	shared.NoSessions
	configure shared.ConfigureRequest
	execute   shared.ExecuteRequest
	err       error
}

func (r *recorder) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	return shared.InfoResponse{Name: "recorder", APIVersions: []int{shared.APIVersion}}, nil
}

func (r *recorder) Configure(_ context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	r.configure = req
	return shared.ConfigureResponse{}, nil
}

func (r *recorder) Validate(context.Context, shared.ValidateRequest) (shared.ValidateResponse, error) {
	return shared.ValidateResponse{}, nil
}

func (r *recorder) Execute(_ context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	r.execute = req
	if r.err != nil {
		return shared.ExecuteResponse{}, r.err
	}
	// A stateful request comes back with StateLost, so the round trip
	// checks the result's field too.
	return shared.ExecuteResponse{Result: shared.ExecutionResult{Success: true, Output: json.RawMessage("1"), StateLost: req.Stateful}}, nil
}

func dispense(t *testing.T, impl shared.Sandbox) shared.Sandbox {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{PluginName: &SandboxPlugin{Impl: impl}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(shared.Sandbox)
}

// TestRequestsRoundTripGRPC: every field of shared.ConfigureRequest and
// shared.ExecuteRequest (incl. AllowedPackages and Dependencies) crosses gRPC.
func TestRequestsRoundTripGRPC(t *testing.T) {
	rec := &recorder{}
	sb := dispense(t, rec)
	ctx := context.Background()
	cfg := shared.ConfigureRequest{Config: json.RawMessage(`{"a":1}`), Unsafe: true, AllowedPackages: []string{"orqdemo", "six"}, Classes: true,
		AllowedImports: []string{"pandas", "json"}, Stateful: true,
		Egress: &shared.EgressPolicy{Name: `sandbox "d" network {}`, Allow: []string{"api.example.com:443", "10.0.0.0/8:5432"}, Deny: []string{"*.bad.example"}, BudgetBytes: 1 << 20, MaxConnections: 4}}
	if _, err := sb.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec.configure, cfg) {
		t.Errorf("configure: sent %+v, plugin got %+v", cfg, rec.configure)
	}
	req := shared.ExecuteRequest{
		Code: "return 1", Args: json.RawMessage(`{"x":1}`), AllowedImports: []string{"orqdemo"},
		Timeout: 1500 * time.Millisecond, MemoryMB: 64, MaxOutputBytes: 100,
		SessionID: "s1", UserID: "u1", AgentID: "a1", ToolName: "t1",
		Dependencies: []string{"orqdemo", "six==1.16.0"},
		Stateful:     true,
		Verdict:      &shared.Verdict{CodeSHA256: [32]byte{1, 2, 3}, Rules: "r1", Options: "o1"},
	}
	resp, err := sb.Execute(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Result.StateLost {
		t.Errorf("ExecutionResult.StateLost did not cross gRPC")
	}
	if !reflect.DeepEqual(rec.execute, req) {
		t.Errorf("execute: sent %+v, plugin got %+v", req, rec.execute)
	}
	// Every exported field is compared above; a new field that the
	// converters forget shows up here as a zero value. Stateless is the
	// host's: it resolves it against the sandbox's default and never
	// sends it (a plugin sees only Stateful).
	v := reflect.ValueOf(rec.execute)
	for i := 0; i < v.NumField(); i++ {
		if v.Type().Field(i).Name == "Stateless" {
			continue
		}
		if v.Field(i).IsZero() {
			t.Errorf("ExecuteRequest.%s did not cross gRPC (set it in this test and in shared/grpc.go)", v.Type().Field(i).Name)
		}
	}
	c := reflect.ValueOf(rec.configure)
	for i := 0; i < c.NumField(); i++ {
		if c.Field(i).IsZero() {
			t.Errorf("ConfigureRequest.%s did not cross gRPC", c.Type().Field(i).Name)
		}
	}
}

// TestVerdictOverGRPC: a request without a verdict arrives without one,
// and so does one whose code hash is not 32 bytes (the backend then
// validates); a backend that ignores the verdict (the recorder) serves the
// call as any other.
func TestVerdictOverGRPC(t *testing.T) {
	rec := &recorder{}
	sb := dispense(t, rec)
	resp, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1"})
	if err != nil || !resp.Result.Success {
		t.Fatalf("Execute = %+v, %v", resp, err)
	}
	if rec.execute.Verdict != nil {
		t.Fatalf("no verdict sent, plugin got %+v", rec.execute.Verdict)
	}
	if v := verdictFromProto(verdictToProto(&shared.Verdict{Rules: "r"})); v == nil || v.Rules != "r" {
		t.Fatalf("verdict round trip = %+v", v)
	}
	short := verdictToProto(&shared.Verdict{Rules: "r", Options: "o"})
	short.CodeSha256 = short.CodeSha256[:31]
	if v := verdictFromProto(short); v != nil {
		t.Fatalf("a 31-byte code hash arrived as verdict %+v", v)
	}
}

// TestPermissionDeniedOverGRPC: a backend's shared.ErrPermissionDenied arrives as
// shared.ErrPermissionDenied with its message.
func TestPermissionDeniedOverGRPC(t *testing.T) {
	rec := &recorder{err: fmt.Errorf("runtime: unauthorized: bad token: %w", shared.ErrPermissionDenied)}
	sb := dispense(t, rec)
	_, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1"})
	if !errors.Is(err, shared.ErrPermissionDenied) || err.Error() != rec.err.Error() {
		t.Fatalf("want shared.ErrPermissionDenied %q, got %v", rec.err, err)
	}
}
