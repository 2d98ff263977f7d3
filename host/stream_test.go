package host

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// streamed collects the chunks of one ExecuteStream call with the time
// each arrived.
type streamed struct {
	mu     sync.Mutex
	chunks []shared.OutputChunk
	at     []time.Time
}

func (s *streamed) add(c shared.OutputChunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunks = append(s.chunks, c)
	s.at = append(s.at, time.Now())
}

func (s *streamed) text(stream string) string {
	var b strings.Builder
	for _, c := range s.chunks {
		if c.Stream == stream {
			b.Write(c.Data)
		}
	}
	return b.String()
}

// On tier 1 (both modes) output reaches the caller while the code runs:
// the first line arrives well before the call ends, the chunks add up to
// the result's stdout (and stderr), and a call that times out keeps what it
// wrote before the wall clock struck.
func TestExecuteStreamTier1(t *testing.T) {
	for _, mode := range []string{"forkserver", "spawn"} {
		t.Run(mode, func(t *testing.T) {
			h := newHost(t, `
policy "default" { allowed_imports = ["time"] }
sandbox "a" {
  plugin = "subprocess"
  config { mode = "`+mode+`" }
}
`)
			sb := defaultSandbox(t, h)
			var got streamed
			res, err := sb.ExecuteStream(context.Background(), shared.ExecuteRequest{
				Code: "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')\nreturn 1",
			}, got.add)
			end := time.Now()
			if err != nil || !res.Success {
				t.Fatalf("%v %+v", err, res)
			}
			if got.text(shared.StreamStdout) != res.Stdout || got.text(shared.StreamStderr) != res.Stderr {
				t.Fatalf("chunks %q / %q, result %q / %q", got.text(shared.StreamStdout), got.text(shared.StreamStderr), res.Stdout, res.Stderr)
			}
			if res.Stdout != "first\nsecond\n" {
				t.Fatalf("result stdout %q stderr %q", res.Stdout, res.Stderr)
			}
			if len(got.chunks) < 2 || !strings.HasPrefix(string(got.chunks[0].Data), "first") {
				t.Fatalf("chunks: %+v", got.chunks)
			}
			if early := end.Sub(got.at[0]); early < 700*time.Millisecond {
				t.Errorf("the first line arrived %v before the call ended, want it while the code slept 1.5 s", early)
			}

			var late streamed
			res, err = sb.ExecuteStream(context.Background(), shared.ExecuteRequest{
				Code:    "import time\nprint('before', flush=True)\ntime.sleep(30)",
				Timeout: time.Second,
			}, late.add)
			if err != nil || res.ErrorKind != shared.KindTimeout {
				t.Fatalf("want a timeout: %v %+v", err, res)
			}
			if late.text(shared.StreamStdout) != "before\n" || res.Stdout != "before\n" {
				t.Errorf("a timed-out call's output: chunks %q, result %q", late.text(shared.StreamStdout), res.Stdout)
			}
		})
	}
}

// A plugin without the streaming capability still answers ExecuteStream:
// each stream arrives whole, once, when the call ends.
func TestExecuteStreamFallback(t *testing.T) {
	if inprocessSkipMsg != "" {
		t.Skip(inprocessSkipMsg)
	}
	cfg, diags := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(`
policy "default" {}
sandbox "a" {
  plugin = "inprocess"
  unsafe = true
}
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h, err := Load(context.Background(), cfg, WithPluginDirs(pluginDir, inprocessDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sb := defaultSandbox(t, h)
	info, err := sb.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Has(shared.CapStreaming) {
		t.Fatal("the in-process plugin declares streaming; this test needs a plugin without it")
	}
	var got streamed
	res, err := sb.ExecuteStream(context.Background(), shared.ExecuteRequest{Code: "print('a')\nprint('b')\nreturn 2"}, got.add)
	if err != nil || !res.Success {
		t.Fatalf("%v %+v", err, res)
	}
	if len(got.chunks) != 1 || string(got.chunks[0].Data) != "a\nb\n" || res.Stdout != "a\nb\n" {
		t.Fatalf("chunks %+v, stdout %q", got.chunks, res.Stdout)
	}
}
