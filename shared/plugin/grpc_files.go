package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/orqest/sandbox/shared"

	"github.com/orqest/sandbox/shared/plugin/internal/proto"
)

// Compile-time guards for the optional shared.FileStore service.
var (
	_ shared.FileStore      = (*GRPCClient)(nil)
	_ proto.FileStoreServer = (*GRPCFilesServer)(nil)
)

// PutFile implements shared.FileStore. Against a plugin that does not serve
// shared.FileStore it returns an error wrapping shared.ErrNotSupported.
func (c *GRPCClient) PutFile(ctx context.Context, req shared.PutFileRequest) (shared.PutFileResponse, error) {
	ctx, done := c.begin(ctx)
	if c.files == nil {
		return shared.PutFileResponse{}, fmt.Errorf("files: %w", shared.ErrNotSupported)
	}
	r, err := c.files.PutFile(ctx, &proto.PutFileRequest{SessionId: req.SessionID, Path: req.Path, Data: req.Data})
	if err != nil {
		return shared.PutFileResponse{}, done(err)
	}
	return shared.PutFileResponse{File: fileFromProto(r.GetFile())}, nil
}

// GetFile implements shared.FileStore.
func (c *GRPCClient) GetFile(ctx context.Context, req shared.GetFileRequest) (shared.GetFileResponse, error) {
	ctx, done := c.begin(ctx)
	if c.files == nil {
		return shared.GetFileResponse{}, fmt.Errorf("files: %w", shared.ErrNotSupported)
	}
	r, err := c.files.GetFile(ctx, &proto.GetFileRequest{SessionId: req.SessionID, Path: req.Path})
	if err != nil {
		return shared.GetFileResponse{}, done(err)
	}
	return shared.GetFileResponse{File: fileFromProto(r.GetFile()), Data: r.GetData()}, nil
}

// ListFiles implements shared.FileStore.
func (c *GRPCClient) ListFiles(ctx context.Context, req shared.ListFilesRequest) (shared.ListFilesResponse, error) {
	ctx, done := c.begin(ctx)
	if c.files == nil {
		return shared.ListFilesResponse{}, fmt.Errorf("files: %w", shared.ErrNotSupported)
	}
	r, err := c.files.ListFiles(ctx, &proto.ListFilesRequest{SessionId: req.SessionID, Path: req.Path})
	if err != nil {
		return shared.ListFilesResponse{}, done(err)
	}
	out := shared.ListFilesResponse{}
	for _, f := range r.GetFiles() {
		out.Files = append(out.Files, fileFromProto(f))
	}
	return out, nil
}

// GRPCFilesServer serves a backend's shared.FileStore over gRPC.
// SandboxPlugin registers it only when the backend implements
// shared.FileStore.
type GRPCFilesServer struct {
	proto.UnimplementedFileStoreServer
	Impl shared.FileStore
}

// PutFile implements proto.FileStoreServer.
func (s *GRPCFilesServer) PutFile(ctx context.Context, req *proto.PutFileRequest) (*proto.PutFileResponse, error) {
	r, err := s.Impl.PutFile(ctx, shared.PutFileRequest{SessionID: req.GetSessionId(), Path: req.GetPath(), Data: req.GetData()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.PutFileResponse{File: fileToProto(r.File)}, nil
}

// GetFile implements proto.FileStoreServer.
func (s *GRPCFilesServer) GetFile(ctx context.Context, req *proto.GetFileRequest) (*proto.GetFileResponse, error) {
	r, err := s.Impl.GetFile(ctx, shared.GetFileRequest{SessionID: req.GetSessionId(), Path: req.GetPath()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	return &proto.GetFileResponse{File: fileToProto(r.File), Data: r.Data}, nil
}

// ListFiles implements proto.FileStoreServer.
func (s *GRPCFilesServer) ListFiles(ctx context.Context, req *proto.ListFilesRequest) (*proto.ListFilesResponse, error) {
	r, err := s.Impl.ListFiles(ctx, shared.ListFilesRequest{SessionID: req.GetSessionId(), Path: req.GetPath()})
	if err != nil {
		return nil, ToGRPC(err)
	}
	out := &proto.ListFilesResponse{}
	for _, f := range r.Files {
		out.Files = append(out.Files, fileToProto(f))
	}
	return out, nil
}

func fileToProto(f shared.FileInfo) *proto.FileInfo {
	out := &proto.FileInfo{Name: f.Name, Size: f.Size, Mode: f.Mode}
	if !f.ModTime.IsZero() {
		out.ModTimeUnixNs = f.ModTime.UnixNano()
	}
	return out
}

func fileFromProto(f *proto.FileInfo) shared.FileInfo {
	out := shared.FileInfo{Name: f.GetName(), Size: f.GetSize(), Mode: f.GetMode()}
	if ns := f.GetModTimeUnixNs(); ns != 0 {
		out.ModTime = time.Unix(0, ns)
	}
	return out
}

func artifactsToProto(as []shared.Artifact) []*proto.Artifact {
	if len(as) == 0 {
		return nil
	}
	out := make([]*proto.Artifact, 0, len(as))
	for _, a := range as {
		out = append(out, &proto.Artifact{Name: a.Name, MimeType: a.MIMEType, Size: a.Size, Data: a.Data, Omitted: a.Omitted})
	}
	return out
}

func artifactsFromProto(as []*proto.Artifact) []shared.Artifact {
	if len(as) == 0 {
		return nil
	}
	out := make([]shared.Artifact, 0, len(as))
	for _, a := range as {
		out = append(out, shared.Artifact{Name: a.GetName(), MIMEType: a.GetMimeType(), Size: a.GetSize(), Data: a.GetData(), Omitted: a.GetOmitted()})
	}
	return out
}
