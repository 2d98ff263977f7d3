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
	return StreamCall(ctx, "execute stream", send, execute)
}

// StreamCall is StreamExecute for any call that streams output (what
// names the call in the error): a backend's CallToolStream uses it too.
func StreamCall[R any](ctx context.Context, what string, send func(OutputChunk) error, call func(ctx context.Context, onChunk func(OutputChunk)) (R, error)) (R, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	resp, err := call(ctx, func(c OutputChunk) {
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
		var zero R
		return zero, fmt.Errorf("%s: sending output: %w", what, cause)
	}
	return resp, err
}
