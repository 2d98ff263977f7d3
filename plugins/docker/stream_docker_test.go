package docker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// Over the runtime, output reaches the caller while the code runs: the
// first line arrives well before the call ends, and the chunks add up to
// the result's stdout, also for a call that times out.
func TestStreamingThroughTheRuntime(t *testing.T) {
	user := testUser(t)
	b := newBackend(t)
	sid := openSession(t, b, user)
	ctx := context.Background()
	var mu sync.Mutex
	var got strings.Builder
	var first time.Time
	send := func(c shared.OutputChunk) error {
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = time.Now()
		}
		if c.Stream == shared.StreamStdout {
			got.Write(c.Data)
		}
		return nil
	}
	resp, err := b.ExecuteStream(ctx, shared.ExecuteRequest{
		Code:           "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')\nreturn 1",
		AllowedImports: []string{"time"}, SessionID: sid,
	}, send)
	end := time.Now()
	if err != nil || !resp.Result.Success {
		t.Fatalf("%v %+v", err, resp.Result)
	}
	if got.String() != "first\nsecond\n" || resp.Result.Stdout != got.String() {
		t.Fatalf("streamed %q, result %q", got.String(), resp.Result.Stdout)
	}
	if early := end.Sub(first); early < 700*time.Millisecond {
		t.Errorf("the first line arrived %v before the call ended; want it while the code slept", early)
	}

	got.Reset()
	resp, err = b.ExecuteStream(ctx, shared.ExecuteRequest{
		Code:           "import time\nprint('before', flush=True)\ntime.sleep(30)",
		AllowedImports: []string{"time"}, SessionID: sid, Timeout: time.Second,
	}, send)
	if err != nil || resp.Result.ErrorKind != shared.KindTimeout {
		t.Fatalf("want a timeout: %v %+v", err, resp.Result)
	}
	if got.String() != "before\n" {
		t.Errorf("a timed-out call streamed %q, want %q", got.String(), "before\n")
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
}
