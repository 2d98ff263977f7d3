package shared

import (
	"context"
	"fmt"
	"sync"
)

// StreamExecute is the body of a backend's ExecuteStream: it runs execute
// with a context that a failing send cancels and with an onChunk that
// hands each chunk to send, one at a time (a backend's stdout and stderr
// readers may call it concurrently). Once send has failed, later chunks
// are dropped and, when execute itself returned no error, StreamExecute
// returns one wrapping send's.
func StreamExecute(ctx context.Context, send func(OutputChunk) error, execute func(ctx context.Context, onChunk func(OutputChunk)) (ExecuteResponse, error)) (ExecuteResponse, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	resp, err := execute(ctx, func(c OutputChunk) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if err := send(c); err != nil {
			cancel(err)
		}
	})
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled && err == nil {
		return ExecuteResponse{}, fmt.Errorf("execute stream: sending output: %w", cause)
	}
	return resp, err
}
