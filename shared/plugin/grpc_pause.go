package plugin

import (
	"context"
	"fmt"

	"github.com/orqest/sandbox/shared"

	"github.com/orqest/sandbox/shared/plugin/internal/proto"
)

// Compile-time guards for the optional shared.SessionPauser service.
var (
	_ shared.SessionPauser     = (*GRPCClient)(nil)
	_ proto.SessionPauseServer = (*GRPCPauseServer)(nil)
)

// Pause implements shared.SessionPauser. Against a plugin that does not
// serve it, it returns an error wrapping shared.ErrNotSupported.
func (c *GRPCClient) Pause(ctx context.Context, req shared.PauseRequest) (shared.PauseResponse, error) {
	ctx, done := c.begin(ctx)
	if c.pause == nil {
		return shared.PauseResponse{}, fmt.Errorf("pause: %w", shared.ErrNotSupported)
	}
	r, err := c.pause.Pause(ctx, &proto.PauseRequest{SessionId: req.SessionID})
	if err != nil {
		return shared.PauseResponse{}, done(err)
	}
	return shared.PauseResponse{Memory: r.GetMemory(), Kept: r.GetKept(), NotKept: r.GetNotKept(), Bytes: r.GetBytes()}, nil
}

// Resume implements shared.SessionPauser.
func (c *GRPCClient) Resume(ctx context.Context, req shared.ResumeRequest) (shared.ResumeResponse, error) {
	ctx, done := c.begin(ctx)
	if c.pause == nil {
		return shared.ResumeResponse{}, fmt.Errorf("resume: %w", shared.ErrNotSupported)
	}
	r, err := c.pause.Resume(ctx, &proto.ResumeRequest{SessionId: req.SessionID})
	if err != nil {
		return shared.ResumeResponse{}, done(err)
	}
	return shared.ResumeResponse{SessionID: r.GetSessionId(), UserID: r.GetUserId(), Memory: r.GetMemory(),
		StateLost: r.GetStateLost(), Kept: r.GetKept(), NotKept: r.GetNotKept()}, nil
}

// GRPCPauseServer serves a backend's shared.SessionPauser over gRPC.
// SandboxPlugin registers it only when the backend implements
// shared.SessionPauser.
type GRPCPauseServer struct {
	proto.UnimplementedSessionPauseServer
	Impl shared.SessionPauser
}

// Pause implements proto.SessionPauseServer.
func (s *GRPCPauseServer) Pause(ctx context.Context, req *proto.PauseRequest) (*proto.PauseResponse, error) {
	r, err := s.Impl.Pause(ctx, shared.PauseRequest{SessionID: req.GetSessionId()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.PauseResponse{Memory: r.Memory, Kept: r.Kept, NotKept: r.NotKept, Bytes: r.Bytes}, nil
}

// Resume implements proto.SessionPauseServer.
func (s *GRPCPauseServer) Resume(ctx context.Context, req *proto.ResumeRequest) (*proto.ResumeResponse, error) {
	r, err := s.Impl.Resume(ctx, shared.ResumeRequest{SessionID: req.GetSessionId()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.ResumeResponse{SessionId: r.SessionID, UserId: r.UserID, Memory: r.Memory, StateLost: r.StateLost, Kept: r.Kept, NotKept: r.NotKept}, nil
}
