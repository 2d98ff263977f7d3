package gvisor

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// BenchmarkPauseResume: a stateful session that holds a name pauses
// (runsc checkpoint: the sandbox's memory to paused_dir, the sandbox
// gone) and resumes (runsc restore), b.N times in a row, each resume
// checked by reading the name back. Reported: the medians pause-ms and
// resume-ms, the first call after a resume (first-call-ms, it waits for
// nothing the restore did not bring back) against a warm call in the same
// session (warm-ms), and the checkpoint's size (image-MB).
func BenchmarkPauseResume(b *testing.B) {
	be, _ := newSessionBackend(b, map[string]any{"paused_dir": filepath.Join(b.TempDir(), "paused")})
	id := openSession(b, be, "bench")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	call := func(code string) (time.Duration, string) {
		t0 := time.Now()
		resp, err := be.Execute(ctx, shared.ExecuteRequest{SessionID: id, UserID: "bench", Code: code, Stateful: true, Timeout: 30 * time.Second})
		d := time.Since(t0)
		if err != nil || !resp.Result.Success {
			b.Fatalf("%q: %+v %v", code, resp.Result, err)
		}
		return d, string(resp.Result.Output)
	}
	call("kept = list(range(1000))\nreturn len(kept)")
	var pauses, resumes, firsts, warms []time.Duration
	var image int64
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		p, err := be.Pause(ctx, shared.PauseRequest{SessionID: id})
		if err != nil {
			b.Fatalf("Pause: %v", err)
		}
		pauses = append(pauses, time.Since(t0))
		image = p.Bytes
		t0 = time.Now()
		if _, err := be.Resume(ctx, shared.ResumeRequest{SessionID: id}); err != nil {
			b.Fatalf("Resume: %v", err)
		}
		resumes = append(resumes, time.Since(t0))
		d, out := call("return sum(kept)")
		if out != "499500" {
			b.Fatalf("after resume the name holds %s, want 499500", out)
		}
		firsts = append(firsts, d)
		d, _ = call("return sum(kept)")
		warms = append(warms, d)
	}
	b.StopTimer()
	b.ReportMetric(medianMS(pauses), "pause-ms")
	b.ReportMetric(medianMS(resumes), "resume-ms")
	b.ReportMetric(medianMS(firsts), "first-call-ms")
	b.ReportMetric(medianMS(warms), "warm-ms")
	b.ReportMetric(float64(image)/(1<<20), "image-MB")
	if _, err := be.Close(ctx, shared.CloseRequest{SessionID: id}); err != nil {
		b.Fatal(err)
	}
}

// medianMS is the median of ds in milliseconds (ds is sorted in place).
func medianMS(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Microseconds()) / 1000
}
