package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin/internal/proto"
)

// Compile-time guards for the optional shared.Streamer service.
var (
	_ shared.Streamer            = (*GRPCClient)(nil)
	_ shared.SessionToolStreamer = (*GRPCClient)(nil)
	_ proto.StreamingServer      = (*GRPCStreamServer)(nil)
)

// ExecuteStream implements shared.Streamer: it calls send with each chunk
// the plugin streams, then returns the response. Against a plugin that
// does not serve shared.Streamer it returns an error wrapping
// shared.ErrNotSupported (and nothing ran). An error from send cancels the
// call and is returned as is.
func (c *GRPCClient) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk) error) (shared.ExecuteResponse, error) {
	ctx, done := c.begin(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.stream.ExecuteStream(ctx, executeRequestToProto(req))
	if err != nil {
		return shared.ExecuteResponse{}, done(err)
	}
	var resp *proto.ExecuteResponse
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return shared.ExecuteResponse{}, done(err)
		}
		switch k := m.GetKind().(type) {
		case *proto.ExecuteStreamMessage_Chunk:
			if err := send(shared.OutputChunk{Stream: k.Chunk.GetStream(), Data: k.Chunk.GetData()}); err != nil {
				return shared.ExecuteResponse{}, err
			}
		case *proto.ExecuteStreamMessage_Response:
			resp = k.Response
		}
	}
	if resp == nil {
		return shared.ExecuteResponse{}, fmt.Errorf("execute stream: the plugin ended the stream without a result: %w", shared.ErrInternal)
	}
	return shared.ExecuteResponse{Result: resultFromProto(resp.GetResult()), Events: eventsFromProto(resp.GetEvents())}, nil
}

// GRPCStreamServer serves a backend's shared.Streamer over gRPC.
// SandboxPlugin registers it only when the backend implements
// shared.Streamer.
type GRPCStreamServer struct {
	proto.UnimplementedStreamingServer
	Impl shared.Streamer
}

// ExecuteStream implements proto.StreamingServer: chunks as the backend
// sends them, then one message with the response.
func (s *GRPCStreamServer) ExecuteStream(req *proto.ExecuteRequest, st proto.Streaming_ExecuteStreamServer) error {
	r, err := s.Impl.ExecuteStream(st.Context(), executeRequestFromProto(req), func(c shared.OutputChunk) error {
		return st.Send(&proto.ExecuteStreamMessage{Kind: &proto.ExecuteStreamMessage_Chunk{Chunk: &proto.OutputChunk{Stream: c.Stream, Data: c.Data}}})
	})
	if err != nil {
		return ToGRPC(err)
	}
	return st.Send(&proto.ExecuteStreamMessage{Kind: &proto.ExecuteStreamMessage_Response{Response: &proto.ExecuteResponse{Result: resultToProto(r.Result), Events: eventsToProto(r.Events)}}})
}

// CallToolStream implements shared.SessionToolStreamer: it calls send with
// each chunk the plugin streams, then returns the response. Against a
// plugin that does not serve it (no Streaming service, or one without
// this method) the error wraps shared.ErrNotSupported and shared.ErrNotRun:
// nothing ran, the caller may call CallTool.
func (c *GRPCClient) CallToolStream(ctx context.Context, req shared.CallToolRequest, send func(shared.OutputChunk) error) (shared.CallToolResponse, error) {
	ctx, done := c.begin(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	absent := func(err error) error {
		if status.Code(err) == codes.Unimplemented && len(status.Convert(err).Details()) == 0 {
			return &classedError{msg: "call tool stream: " + err.Error(), classes: []error{shared.ErrNotSupported, shared.ErrNotRun}}
		}
		return done(err)
	}
	st, err := c.stream.CallToolStream(ctx, callToolRequestToProto(req))
	if err != nil {
		return shared.CallToolResponse{}, absent(err)
	}
	var resp *proto.CallToolResponse
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return shared.CallToolResponse{}, absent(err)
		}
		switch k := m.GetKind().(type) {
		case *proto.CallToolStreamMessage_Chunk:
			if err := send(shared.OutputChunk{Stream: k.Chunk.GetStream(), Data: k.Chunk.GetData()}); err != nil {
				return shared.CallToolResponse{}, err
			}
		case *proto.CallToolStreamMessage_Response:
			resp = k.Response
		}
	}
	if resp == nil {
		return shared.CallToolResponse{}, fmt.Errorf("call tool stream: the plugin ended the stream without a result: %w", shared.ErrInternal)
	}
	return callToolResponseFromProto(resp), nil
}

// CallToolStream implements proto.StreamingServer: chunks as the backend
// sends them, then one message with the response; Unimplemented when the
// backend is no shared.SessionToolStreamer.
func (s *GRPCStreamServer) CallToolStream(req *proto.CallToolRequest, st proto.Streaming_CallToolStreamServer) error {
	ts, ok := s.Impl.(shared.SessionToolStreamer)
	if !ok {
		return s.UnimplementedStreamingServer.CallToolStream(req, st)
	}
	r, err := ts.CallToolStream(st.Context(), callToolRequestFromProto(req), func(c shared.OutputChunk) error {
		return st.Send(&proto.CallToolStreamMessage{Kind: &proto.CallToolStreamMessage_Chunk{Chunk: &proto.OutputChunk{Stream: c.Stream, Data: c.Data}}})
	})
	if err != nil {
		return ToGRPC(err)
	}
	return st.Send(&proto.CallToolStreamMessage{Kind: &proto.CallToolStreamMessage_Response{Response: callToolResponseToProto(r)}})
}
