package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orqest/sandbox/shared"
	"google.golang.org/grpc"

	"github.com/orqest/sandbox/shared/plugin/internal/proto"
)

// Compile-time guards: both adapters honour the contract.
var (
	_ shared.Sandbox      = (*GRPCClient)(nil)
	_ proto.SandboxServer = (*GRPCServer)(nil)
)

// GRPCClient is the host side of the wire: it implements shared.Sandbox
// (and shared.SessionTools) by calling a plugin over gRPC, and maps the
// error classes a status carries back to shared's.
type GRPCClient struct {
	client proto.SandboxClient
	tools  proto.SessionToolsClient
	files  proto.FileStoreClient
	stream proto.StreamingClient
	pause  proto.SessionPauseClient
	// exited is done when the plugin process has exited (go-plugin's
	// plugin-exit context; never done for a connection without a process).
	exited context.Context
}

// NewGRPCClient returns the host side of a plugin connection. exited is done
// once the plugin process has exited (nil: never); a call begun after that
// fails at once with an error matching shared.ErrPluginShutdown and
// shared.ErrNotRun.
func NewGRPCClient(conn grpc.ClientConnInterface, exited context.Context) *GRPCClient {
	if exited == nil {
		exited = context.Background()
	}
	return &GRPCClient{client: proto.NewSandboxClient(conn), tools: proto.NewSessionToolsClient(conn), files: proto.NewFileStoreClient(conn), stream: proto.NewStreamingClient(conn), pause: proto.NewSessionPauseClient(conn), exited: exited}
}

// begin starts a call: it returns the context to make it with and the
// function that converts its error. A call on a plugin already gone is
// refused before anything is sent.
func (c *GRPCClient) begin(ctx context.Context) (context.Context, func(error) error) {
	ctx, conv := tracked(outgoingCancelAfter(ctx))
	if c.exited.Err() != nil {
		return ctx, func(err error) error {
			if err == nil {
				return nil
			}
			return &classedError{msg: "the plugin process has exited: " + err.Error(),
				classes: []error{shared.ErrPluginShutdown, shared.ErrNotRun}}
		}
	}
	return ctx, conv
}

// Info implements shared.Sandbox.
func (c *GRPCClient) Info(ctx context.Context, _ shared.InfoRequest) (shared.InfoResponse, error) {
	ctx, done := c.begin(ctx)
	r, err := c.client.Info(ctx, &proto.InfoRequest{})
	if err != nil {
		return shared.InfoResponse{}, done(err)
	}
	out := shared.InfoResponse{
		Name:        r.GetName(),
		Tier:        int(r.GetTier()),
		Version:     r.GetVersion(),
		Description: r.GetDescription(),
	}
	for _, v := range r.GetApiVersions() {
		out.APIVersions = append(out.APIVersions, int(v))
	}
	for _, c := range r.GetCapabilities() {
		out.Capabilities = append(out.Capabilities, shared.Capability(c))
	}
	out.ConfigSchema = schemaFromProto(r.GetConfigSchema())
	return out, nil
}

// Configure implements shared.Sandbox.
func (c *GRPCClient) Configure(ctx context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	var egress []byte
	if req.Egress != nil {
		var err error
		if egress, err = json.Marshal(req.Egress); err != nil {
			return shared.ConfigureResponse{}, fmt.Errorf("encoding the egress policy: %w: %w", err, shared.ErrInternal)
		}
	}
	ctx, done := c.begin(ctx)
	_, err := c.client.Configure(ctx, &proto.ConfigureRequest{ConfigJson: req.Config, Unsafe: req.Unsafe, AllowedPackages: req.AllowedPackages, Classes: req.Classes, AllowedImports: req.AllowedImports, Stateful: req.Stateful, EgressJson: egress})
	return shared.ConfigureResponse{}, done(err)
}

// Validate implements shared.Sandbox.
func (c *GRPCClient) Validate(ctx context.Context, req shared.ValidateRequest) (shared.ValidateResponse, error) {
	ctx, done := c.begin(ctx)
	r, err := c.client.Validate(ctx, &proto.ValidateRequest{Code: req.Code, AllowedImports: req.AllowedImports})
	if err != nil {
		return shared.ValidateResponse{}, done(err)
	}
	return shared.ValidateResponse{Findings: findingsFromProto(r.GetFindings())}, nil
}

// Execute implements shared.Sandbox.
func (c *GRPCClient) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	ctx, done := c.begin(ctx)
	r, err := c.client.Execute(ctx, executeRequestToProto(req))
	if err != nil {
		return shared.ExecuteResponse{}, done(err)
	}
	return shared.ExecuteResponse{Result: resultFromProto(r.GetResult()), Events: eventsFromProto(r.GetEvents())}, nil
}

// Open implements shared.Sandbox.
func (c *GRPCClient) Open(ctx context.Context, req shared.OpenRequest) (shared.OpenResponse, error) {
	ctx, done := c.begin(ctx)
	r, err := c.client.Open(ctx, &proto.OpenRequest{UserId: req.UserID, SessionId: req.SessionID})
	if err != nil {
		return shared.OpenResponse{}, done(err)
	}
	return shared.OpenResponse{SessionID: r.GetSessionId()}, nil
}

// Close implements shared.Sandbox.
func (c *GRPCClient) Close(ctx context.Context, req shared.CloseRequest) (shared.CloseResponse, error) {
	ctx, done := c.begin(ctx)
	_, err := c.client.Close(ctx, &proto.CloseRequest{SessionId: req.SessionID})
	return shared.CloseResponse{}, done(err)
}

// GRPCServer is the plugin side of the wire: it serves a shared.Sandbox
// implementation over gRPC and maps its errors to status codes.
type GRPCServer struct {
	proto.UnimplementedSandboxServer
	Impl shared.Sandbox
}

// Info implements proto.SandboxServer.
func (s *GRPCServer) Info(ctx context.Context, _ *proto.InfoRequest) (*proto.InfoResponse, error) {
	r, err := s.Impl.Info(ctx, shared.InfoRequest{})
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
	out.ConfigSchema = schemaToProto(r.ConfigSchema)
	return out, nil
}

// Configure implements proto.SandboxServer.
func (s *GRPCServer) Configure(ctx context.Context, req *proto.ConfigureRequest) (*proto.ConfigureResponse, error) {
	var egress *shared.EgressPolicy
	if b := req.GetEgressJson(); len(b) > 0 {
		egress = new(shared.EgressPolicy)
		if err := json.Unmarshal(b, egress); err != nil {
			return nil, ToGRPC(fmt.Errorf("decoding the egress policy: %w: %w", err, shared.ErrInvalidArgument))
		}
	}
	_, err := s.Impl.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(req.GetConfigJson()), Unsafe: req.GetUnsafe(), AllowedPackages: req.GetAllowedPackages(), Classes: req.GetClasses(), AllowedImports: req.GetAllowedImports(), Stateful: req.GetStateful(), Egress: egress})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.ConfigureResponse{}, nil
}

// Validate implements proto.SandboxServer.
func (s *GRPCServer) Validate(ctx context.Context, req *proto.ValidateRequest) (*proto.ValidateResponse, error) {
	r, err := s.Impl.Validate(ctx, shared.ValidateRequest{Code: req.GetCode(), AllowedImports: req.GetAllowedImports()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.ValidateResponse{Findings: findingsToProto(r.Findings)}, nil
}

// Execute implements proto.SandboxServer.
func (s *GRPCServer) Execute(ctx context.Context, req *proto.ExecuteRequest) (*proto.ExecuteResponse, error) {
	r, err := s.Impl.Execute(ctx, executeRequestFromProto(req))
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.ExecuteResponse{Result: resultToProto(r.Result), Events: eventsToProto(r.Events)}, nil
}

// Open implements proto.SandboxServer.
func (s *GRPCServer) Open(ctx context.Context, req *proto.OpenRequest) (*proto.OpenResponse, error) {
	r, err := s.Impl.Open(ctx, shared.OpenRequest{UserID: req.GetUserId(), SessionID: req.GetSessionId()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.OpenResponse{SessionId: r.SessionID}, nil
}

// Close implements proto.SandboxServer.
func (s *GRPCServer) Close(ctx context.Context, req *proto.CloseRequest) (*proto.CloseResponse, error) {
	if _, err := s.Impl.Close(ctx, shared.CloseRequest{SessionID: req.GetSessionId()}); err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.CloseResponse{}, nil
}

func findingsToProto(fs []shared.Finding) []*proto.Finding {
	out := make([]*proto.Finding, 0, len(fs))
	for _, f := range fs {
		out = append(out, &proto.Finding{
			Rule: f.Rule, Message: f.Message, Line: int32(f.Line), Column: int32(f.Column), Snippet: f.Snippet,
		})
	}
	return out
}

func findingsFromProto(fs []*proto.Finding) []shared.Finding {
	if len(fs) == 0 {
		return nil
	}
	out := make([]shared.Finding, 0, len(fs))
	for _, f := range fs {
		out = append(out, shared.Finding{
			Rule: f.GetRule(), Message: f.GetMessage(), Line: int(f.GetLine()), Column: int(f.GetColumn()), Snippet: f.GetSnippet(),
		})
	}
	return out
}

func resultToProto(r shared.ExecutionResult) *proto.ExecutionResult {
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
		Findings:  findingsToProto(r.Findings),
		StateLost: r.StateLost,
		Artifacts: artifactsToProto(r.Artifacts),
	}
}

func resultFromProto(r *proto.ExecutionResult) shared.ExecutionResult {
	out := shared.ExecutionResult{
		Success:         r.GetSuccess(),
		Error:           r.GetError(),
		ErrorKind:       shared.ErrorKind(r.GetErrorKind()),
		Stdout:          r.GetStdout(),
		Stderr:          r.GetStderr(),
		StdoutTruncated: r.GetStdoutTruncated(),
		StderrTruncated: r.GetStderrTruncated(),
		DurationMS:      r.GetDurationMs(),
		Findings:        findingsFromProto(r.GetFindings()),
		StateLost:       r.GetStateLost(),
		Artifacts:       artifactsFromProto(r.GetArtifacts()),
	}
	if len(r.GetOutputJson()) > 0 {
		out.Output = json.RawMessage(r.GetOutputJson())
	}
	if l := r.GetLimits(); l != nil {
		out.Limits = shared.Limits{TimeoutMS: l.GetTimeoutMs(), MemoryMB: int(l.GetMemoryMb()), MaxOutputBytes: int(l.GetMaxOutputBytes())}
	}
	return out
}

// schemaToProto converts a config schema, nested blocks included.
func schemaToProto(schema []shared.ConfigAttribute) []*proto.ConfigAttribute {
	var out []*proto.ConfigAttribute
	for _, a := range schema {
		out = append(out, &proto.ConfigAttribute{
			Name: a.Name, Type: a.Type, Required: a.Required, Description: a.Description,
			Attributes: schemaToProto(a.Attributes),
		})
	}
	return out
}

// schemaFromProto is the inverse of schemaToProto.
func schemaFromProto(schema []*proto.ConfigAttribute) []shared.ConfigAttribute {
	var out []shared.ConfigAttribute
	for _, a := range schema {
		out = append(out, shared.ConfigAttribute{
			Name: a.GetName(), Type: a.GetType(), Required: a.GetRequired(), Description: a.GetDescription(),
			Attributes: schemaFromProto(a.GetAttributes()),
		})
	}
	return out
}

// executeRequestToProto and executeRequestFromProto convert an
// ExecuteRequest for the wire (Execute and ExecuteStream carry the same
// message).
func executeRequestToProto(req shared.ExecuteRequest) *proto.ExecuteRequest {
	return &proto.ExecuteRequest{
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
		Stateful:       req.Stateful, // Stateless is not sent: the host resolves it (host.Sandbox)
		Verdict:        verdictToProto(req.Verdict),
	}
}

func executeRequestFromProto(req *proto.ExecuteRequest) shared.ExecuteRequest {
	return shared.ExecuteRequest{
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
		Stateful:       req.GetStateful(),
		Verdict:        verdictFromProto(req.GetVerdict()),
	}
}

func verdictToProto(v *shared.Verdict) *proto.Verdict {
	if v == nil {
		return nil
	}
	return &proto.Verdict{CodeSha256: v.CodeSHA256[:], Rules: v.Rules, Options: v.Options}
}

// verdictFromProto is nil for an absent verdict and for one whose code
// hash is not 32 bytes: the backend then validates.
func verdictFromProto(v *proto.Verdict) *shared.Verdict {
	if v == nil || len(v.GetCodeSha256()) != 32 {
		return nil
	}
	out := &shared.Verdict{Rules: v.GetRules(), Options: v.GetOptions()}
	copy(out.CodeSHA256[:], v.GetCodeSha256())
	return out
}
