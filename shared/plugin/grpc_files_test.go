package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// filesBackend is a session backend with shared.FileStore whose Execute
// returns artifacts.
type filesBackend struct {
	toolsBackend
	put shared.PutFileRequest
}

func (b *filesBackend) Execute(context.Context, shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	return shared.ExecuteResponse{Result: shared.ExecutionResult{Success: true, Artifacts: []shared.Artifact{
		{Name: "out/chart.png", MIMEType: "image/png", Size: 4, Data: []byte("\x89PNG")},
		{Name: "big.bin", MIMEType: "application/octet-stream", Size: 1 << 30, Omitted: true},
	}}}, nil
}

func (b *filesBackend) PutFile(_ context.Context, req shared.PutFileRequest) (shared.PutFileResponse, error) {
	b.put = req
	if err := shared.CheckFilePath("path", req.Path, false); err != nil {
		return shared.PutFileResponse{}, err
	}
	return shared.PutFileResponse{File: shared.FileInfo{Name: req.Path, Size: int64(len(req.Data)), Mode: 0o600, ModTime: time.Unix(1_700_000_000, 5)}}, nil
}

func (b *filesBackend) GetFile(_ context.Context, req shared.GetFileRequest) (shared.GetFileResponse, error) {
	if req.Path != "a.txt" {
		return shared.GetFileResponse{}, fmt.Errorf("%s: %w", req.Path, shared.ErrNotFound)
	}
	return shared.GetFileResponse{File: shared.FileInfo{Name: "a.txt", Size: 2}, Data: []byte("hi")}, nil
}

func (b *filesBackend) ListFiles(context.Context, shared.ListFilesRequest) (shared.ListFilesResponse, error) {
	return shared.ListFilesResponse{Files: []shared.FileInfo{{Name: "a.txt", Size: 2, Mode: 0o644}, {Name: "d/b.csv", Size: 9}}}, nil
}

// TestFileStoreRoundTripGRPC: the optional shared.FileStore service and
// ExecutionResult.Artifacts cross gRPC field by field, and a refused path
// keeps its class and field.
func TestFileStoreRoundTripGRPC(t *testing.T) {
	impl := &filesBackend{}
	sb := dispenseTools(t, impl)
	fs := sb.(shared.FileStore)
	ctx := context.Background()
	r, err := fs.PutFile(ctx, shared.PutFileRequest{SessionID: "s1", Path: "in/data.csv", Data: []byte("a,b\n")})
	if err != nil {
		t.Fatal(err)
	}
	if impl.put.SessionID != "s1" || impl.put.Path != "in/data.csv" || string(impl.put.Data) != "a,b\n" {
		t.Errorf("the plugin got %+v", impl.put)
	}
	if r.File.Name != "in/data.csv" || r.File.Size != 4 || r.File.Mode != 0o600 || !r.File.ModTime.Equal(time.Unix(1_700_000_000, 5)) {
		t.Errorf("put response %+v", r.File)
	}
	_, err = fs.PutFile(ctx, shared.PutFileRequest{SessionID: "s1", Path: "../etc/passwd"})
	var fe *shared.FieldError
	if !errors.Is(err, shared.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != "path" {
		t.Errorf("traversal: want a FieldError on path, got %v", err)
	}
	g, err := fs.GetFile(ctx, shared.GetFileRequest{SessionID: "s1", Path: "a.txt"})
	if err != nil || string(g.Data) != "hi" || g.File.Size != 2 {
		t.Errorf("get: %+v %v", g, err)
	}
	if _, err := fs.GetFile(ctx, shared.GetFileRequest{SessionID: "s1", Path: "nope"}); !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("get missing: want ErrNotFound, got %v", err)
	}
	l, err := fs.ListFiles(ctx, shared.ListFilesRequest{SessionID: "s1"})
	if err != nil || len(l.Files) != 2 || l.Files[1].Name != "d/b.csv" || l.Files[0].Mode != 0o644 {
		t.Errorf("list: %+v %v", l, err)
	}
	resp, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1"})
	if err != nil {
		t.Fatal(err)
	}
	as := resp.Result.Artifacts
	if len(as) != 2 || as[0].Name != "out/chart.png" || as[0].MIMEType != "image/png" || !bytes.Equal(as[0].Data, []byte("\x89PNG")) ||
		as[1].Size != 1<<30 || !as[1].Omitted || as[1].Data != nil {
		t.Errorf("artifacts: %+v", as)
	}
}

func TestFileStoreAbsentIsNotSupported(t *testing.T) {
	sb := dispenseTools(t, &toolsBackend{})
	fs := sb.(shared.FileStore)
	if _, err := fs.PutFile(context.Background(), shared.PutFileRequest{SessionID: "s", Path: "a"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Fatalf("put: want shared.ErrNotSupported, got %v", err)
	}
	if _, err := fs.ListFiles(context.Background(), shared.ListFilesRequest{SessionID: "s"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Fatalf("list: want shared.ErrNotSupported, got %v", err)
	}
}
