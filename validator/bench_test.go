package validator

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	ts "github.com/tree-sitter/go-tree-sitter"
)

// body2KB is a realistic LLM-written tool body of about 2 KB.
const body2KB = `import re
import json
from collections import Counter, defaultdict
from datetime import datetime, timedelta

text = args.get("text", "")
limit = int(args.get("limit", 10))
stop = {"the", "a", "an", "and", "or", "of", "to", "in"}

def tokenize(s: str) -> list[str]:
    """Split into lowercase words, dropping stop words."""
    return [w for w in re.findall(r"[a-z']+", s.lower()) if w not in stop]

def score(word: str, counts: Counter) -> float:
    base = counts[word] / max(1, sum(counts.values()))
    return round(base * (1.5 if len(word) > 6 else 1.0), 4)

words = tokenize(text)
counts = Counter(words)
by_len = defaultdict(list)
for w in sorted(set(words)):
    by_len[len(w)].append(w)

ranked = sorted(counts, key=lambda w: (-score(w, counts), w))[:limit]
summary = {
    "total": len(words),
    "unique": len(counts),
    "top": [{"word": w, "count": counts[w], "score": score(w, counts)} for w in ranked],
    "lengths": {str(k): v[:3] for k, v in sorted(by_len.items())},
}

try:
    when = datetime.fromisoformat(args.get("date", "2024-01-01"))
except ValueError as e:
    return {"error": f"bad date: {e}"}

deadline = when + timedelta(days=limit)
summary["deadline"] = deadline.strftime("%Y-%m-%d")
summary["label"] = f"{len(ranked)} of {len(counts):,} words ({(len(ranked) / max(1, len(counts))):.1%})"

match args.get("mode", "full"):
    case "full":
        pass
    case "short":
        summary = {k: summary[k] for k in ("total", "unique")}
    case _:
        return {"error": "unknown mode"}

if (n := len(summary.get("top", []))) > 3:
    summary["more"] = n - 3

def walk(node, depth=0):
    if isinstance(node, dict):
        return max((walk(v, depth + 1) for v in node.values()), default=depth)
    if isinstance(node, list):
        return max((walk(v, depth + 1) for v in node), default=depth)
    return depth

summary["depth"] = walk(summary)
return json.loads(json.dumps(summary))
`

func body50KB() string {
	var b strings.Builder
	for i := 0; b.Len() < 50*1024; i++ {
		fmt.Fprintf(&b, "def tool_%d(args):\n", i)
		for _, line := range strings.Split(strings.TrimRight(body2KB, "\n"), "\n") {
			if line == "" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("    " + line + "\n")
		}
	}
	return b.String()
}

var benchAllow = []string{"re", "json", "collections", "datetime"}

func TestBenchBodiesAreBenign(t *testing.T) {
	v := New()
	if fs := v.Check(context.Background(), body2KB, benchAllow); len(fs) != 0 {
		t.Fatalf("2KB body: %v", fs)
	}
	if fs := v.Check(context.Background(), body50KB(), benchAllow); len(fs) != 0 {
		t.Fatalf("50KB body: %v", fs[:1])
	}
}

func benchCheck(b *testing.B, code string) {
	v := New()
	ctx := context.Background()
	b.SetBytes(int64(len(code)))
	b.ReportAllocs()
	m := startLatency(b)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if fs := v.Check(ctx, code, benchAllow); len(fs) != 0 {
			b.Fatal(fs[0])
		}
		m.add(t0)
	}
	m.report()
}

// latency adds to a benchmark, beside ns/op, the median (p50-ns) and p90
// of the per-call wall time and the CPU time the calling thread spent per
// call (cpu-ns/op). On a shared, loaded machine the wall time includes time
// spent waiting for a core; the thread's CPU time mostly does not.
type latency struct {
	b    *testing.B
	d    []time.Duration
	cpu0 time.Duration
}

func startLatency(b *testing.B) *latency {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	m := &latency{b: b, d: make([]time.Duration, 0, b.N)}
	b.ResetTimer()
	m.cpu0 = threadCPU()
	return m
}

func (m *latency) add(t0 time.Time) { m.d = append(m.d, time.Since(t0)) }

func (m *latency) report() {
	cpu := threadCPU() - m.cpu0
	m.b.StopTimer()
	if len(m.d) == 0 {
		return
	}
	slices.Sort(m.d)
	m.b.ReportMetric(float64(m.d[len(m.d)/2].Nanoseconds()), "p50-ns")
	m.b.ReportMetric(float64(m.d[len(m.d)*9/10].Nanoseconds()), "p90-ns")
	m.b.ReportMetric(float64(cpu.Nanoseconds())/float64(len(m.d)), "cpu-ns/op")
}

// threadCPU is the calling OS thread's user+system CPU time (Linux).
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkCheck2KB(b *testing.B)  { benchCheck(b, body2KB) }
func BenchmarkCheck50KB(b *testing.B) { benchCheck(b, body50KB()) }

// BenchmarkParseOnly2KB/50KB are tree-sitter's parse alone (through
// go-tree-sitter, as the validator parsed before flat.go), for comparison.
func BenchmarkParseOnly2KB(b *testing.B)  { benchParse(b, body2KB) }
func BenchmarkParseOnly50KB(b *testing.B) { benchParse(b, body50KB()) }

func benchParse(b *testing.B, code string) {
	p := ts.NewParser()
	defer p.Close()
	_ = p.SetLanguage(language)
	src := []byte(code)
	b.SetBytes(int64(len(code)))
	m := startLatency(b)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		p.Parse(src, nil).Close()
		m.add(t0)
	}
	m.report()
}
