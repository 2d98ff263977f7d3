package shared

import (
	"context"
	"encoding/json"
	"time"

	"github.com/orqest/sandbox/shared/proto"
)

// Compile-time guards: both adapters honour the contract.
var (
	_ Sandbox             = (*GRPCClient)(nil)
	_ proto.SandboxServer = (*GRPCServer)(nil)
)

// GRPCClient is the host side of the wire: it implements Sandbox by calling a
// plugin over gRPC and maps status codes back to this package's error classes.
type GRPCClient struct {
	client proto.SandboxClient
	tools  proto.SessionToolsClient // nil: SessionTools calls are ErrNotSupported
}

// NewGRPCClient wraps a generated client. The go-plugin Plugin type uses it;
// it is exported for tests and tools that dial a plugin themselves.
func NewGRPCClient(c proto.SandboxClient) *GRPCClient { return &GRPCClient{client: c} }

// Info implements Sandbox.
func (c *GRPCClient) Info(ctx context.Context, _ InfoRequest) (InfoResponse, error) {
	r, err := c.client.Info(ctx, &proto.InfoRequest{})
	if err != nil {
		return InfoResponse{}, FromGRPC(err)
	}
	out := InfoResponse{
		Name:        r.GetName(),
		Tier:        int(r.GetTier()),
		Version:     r.GetVersion(),
		Description: r.GetDescription(),
	}
	for _, v := range r.GetApiVersions() {
		out.APIVersions = append(out.APIVersions, int(v))
	}
	for _, c := range r.GetCapabilities() {
		out.Capabilities = append(out.Capabilities, Capability(c))
	}
	for _, a := range r.GetConfigSchema() {
		out.ConfigSchema = append(out.ConfigSchema, ConfigAttribute{
			Name: a.GetName(), Type: a.GetType(), Required: a.GetRequired(), Description: a.GetDescription(),
		})
	}
	return out, nil
}

// Configure implements Sandbox.
func (c *GRPCClient) Configure(ctx context.Context, req ConfigureRequest) (ConfigureResponse, error) {
	_, err := c.client.Configure(ctx, &proto.ConfigureRequest{ConfigJson: req.Config, Unsafe: req.Unsafe, AllowedPackages: req.AllowedPackages})
	return ConfigureResponse{}, FromGRPC(err)
}

// Validate implements Sandbox.
func (c *GRPCClient) Validate(ctx context.Context, req ValidateRequest) (ValidateResponse, error) {
	r, err := c.client.Validate(ctx, &proto.ValidateRequest{Code: req.Code, AllowedImports: req.AllowedImports})
	if err != nil {
		return ValidateResponse{}, FromGRPC(err)
	}
	return ValidateResponse{Findings: findingsFromProto(r.GetFindings())}, nil
}

// Execute implements Sandbox.
func (c *GRPCClient) Execute(ctx context.Context, req ExecuteRequest) (ExecuteResponse, error) {
	r, err := c.client.Execute(ctx, &proto.ExecuteRequest{
		Code:           req.Code,
		ArgsJson:       req.Args,
		AllowedImports: req.AllowedImports,
		TimeoutMs:      req.Timeout.Milliseconds(),
		MemoryMb:       int32(req.MemoryMB),
		MaxOutputBytes: int64(req.MaxOutputBytes),
		SessionId:      req.SessionID,
		UserId:         req.UserID,
		AgentId:        req.AgentID,
		ToolName:       req.ToolName,
		Dependencies:   req.Dependencies,
	})
	if err != nil {
		return ExecuteResponse{}, FromGRPC(err)
	}
	return ExecuteResponse{Result: resultFromProto(r.GetResult()), Events: eventsFromProto(r.GetEvents())}, nil
}

// Open implements Sandbox.
func (c *GRPCClient) Open(ctx context.Context, req OpenRequest) (OpenResponse, error) {
	r, err := c.client.Open(ctx, &proto.OpenRequest{UserId: req.UserID, SessionId: req.SessionID})
	if err != nil {
		return OpenResponse{}, FromGRPC(err)
	}
	return OpenResponse{SessionID: r.GetSessionId()}, nil
}

// Close implements Sandbox.
func (c *GRPCClient) Close(ctx context.Context, req CloseRequest) (CloseResponse, error) {
	_, err := c.client.Close(ctx, &proto.CloseRequest{SessionId: req.SessionID})
	return CloseResponse{}, FromGRPC(err)
}

// GRPCServer is the plugin side of the wire: it serves a Sandbox
// implementation over gRPC and maps its errors to status codes.
type GRPCServer struct {
	proto.UnimplementedSandboxServer
	Impl Sandbox
}

// Info implements proto.SandboxServer.
func (s *GRPCServer) Info(ctx context.Context, _ *proto.InfoRequest) (*proto.InfoResponse, error) {
	r, err := s.Impl.Info(ctx, InfoRequest{})
	if err != nil {
		return nil, ToGRPC(err)
	}
	out := &proto.InfoResponse{
		Name: r.Name, Tier: int32(r.Tier), Version: r.Version, Description: r.Description,
	}
	for _, v := range r.APIVersions {
		out.ApiVersions = append(out.ApiVersions, int32(v))
	}
	for _, c := range r.Capabilities {
		out.Capabilities = append(out.Capabilities, string(c))
	}
	for _, a := range r.ConfigSchema {
		out.ConfigSchema = append(out.ConfigSchema, &proto.ConfigAttribute{
			Name: a.Name, Type: a.Type, Required: a.Required, Description: a.Description,
		})
	}
	return out, nil
}

// Configure implements proto.SandboxServer.
func (s *GRPCServer) Configure(ctx context.Context, req *proto.ConfigureRequest) (*proto.ConfigureResponse, error) {
	_, err := s.Impl.Configure(ctx, ConfigureRequest{Config: json.RawMessage(req.GetConfigJson()), Unsafe: req.GetUnsafe(), AllowedPackages: req.GetAllowedPackages()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.ConfigureResponse{}, nil
}

// Validate implements proto.SandboxServer.
func (s *GRPCServer) Validate(ctx context.Context, req *proto.ValidateRequest) (*proto.ValidateResponse, error) {
	r, err := s.Impl.Validate(ctx, ValidateRequest{Code: req.GetCode(), AllowedImports: req.GetAllowedImports()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.ValidateResponse{Findings: findingsToProto(r.Findings)}, nil
}

// Execute implements proto.SandboxServer.
func (s *GRPCServer) Execute(ctx context.Context, req *proto.ExecuteRequest) (*proto.ExecuteResponse, error) {
	r, err := s.Impl.Execute(ctx, ExecuteRequest{
		Code:           req.GetCode(),
		Args:           json.RawMessage(req.GetArgsJson()),
		AllowedImports: req.GetAllowedImports(),
		Timeout:        time.Duration(req.GetTimeoutMs()) * time.Millisecond,
		MemoryMB:       int(req.GetMemoryMb()),
		MaxOutputBytes: int(req.GetMaxOutputBytes()),
		SessionID:      req.GetSessionId(),
		UserID:         req.GetUserId(),
		AgentID:        req.GetAgentId(),
		ToolName:       req.GetToolName(),
		Dependencies:   req.GetDependencies(),
	})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.ExecuteResponse{Result: resultToProto(r.Result), Events: eventsToProto(r.Events)}, nil
}

// Open implements proto.SandboxServer.
func (s *GRPCServer) Open(ctx context.Context, req *proto.OpenRequest) (*proto.OpenResponse, error) {
	r, err := s.Impl.Open(ctx, OpenRequest{UserID: req.GetUserId(), SessionID: req.GetSessionId()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.OpenResponse{SessionId: r.SessionID}, nil
}

// Close implements proto.SandboxServer.
func (s *GRPCServer) Close(ctx context.Context, req *proto.CloseRequest) (*proto.CloseResponse, error) {
	if _, err := s.Impl.Close(ctx, CloseRequest{SessionID: req.GetSessionId()}); err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.CloseResponse{}, nil
}

func findingsToProto(fs []Finding) []*proto.Finding {
	out := make([]*proto.Finding, 0, len(fs))
	for _, f := range fs {
		out = append(out, &proto.Finding{
			Rule: f.Rule, Message: f.Message, Line: int32(f.Line), Column: int32(f.Column), Snippet: f.Snippet,
		})
	}
	return out
}

func findingsFromProto(fs []*proto.Finding) []Finding {
	if len(fs) == 0 {
		return nil
	}
	out := make([]Finding, 0, len(fs))
	for _, f := range fs {
		out = append(out, Finding{
			Rule: f.GetRule(), Message: f.GetMessage(), Line: int(f.GetLine()), Column: int(f.GetColumn()), Snippet: f.GetSnippet(),
		})
	}
	return out
}

func resultToProto(r ExecutionResult) *proto.ExecutionResult {
	return &proto.ExecutionResult{
		Success:         r.Success,
		OutputJson:      r.Output,
		Error:           r.Error,
		ErrorKind:       string(r.ErrorKind),
		Stdout:          r.Stdout,
		Stderr:          r.Stderr,
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		DurationMs:      r.DurationMS,
		Limits: &proto.Limits{
			TimeoutMs: r.Limits.TimeoutMS, MemoryMb: int32(r.Limits.MemoryMB), MaxOutputBytes: int64(r.Limits.MaxOutputBytes),
		},
		Findings: findingsToProto(r.Findings),
	}
}

func resultFromProto(r *proto.ExecutionResult) ExecutionResult {
	out := ExecutionResult{
		Success:         r.GetSuccess(),
		Error:           r.GetError(),
		ErrorKind:       ErrorKind(r.GetErrorKind()),
		Stdout:          r.GetStdout(),
		Stderr:          r.GetStderr(),
		StdoutTruncated: r.GetStdoutTruncated(),
		StderrTruncated: r.GetStderrTruncated(),
		DurationMS:      r.GetDurationMs(),
		Findings:        findingsFromProto(r.GetFindings()),
	}
	if len(r.GetOutputJson()) > 0 {
		out.Output = json.RawMessage(r.GetOutputJson())
	}
	if l := r.GetLimits(); l != nil {
		out.Limits = Limits{TimeoutMS: l.GetTimeoutMs(), MemoryMB: int(l.GetMemoryMb()), MaxOutputBytes: int(l.GetMaxOutputBytes())}
	}
	return out
}
