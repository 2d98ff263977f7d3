package validator

import (
	"context"
	"slices"
	"testing"
	"time"

	ts "github.com/tree-sitter/go-tree-sitter"
)

// BenchmarkFlatten50KB is the one-C-call copy of an already parsed tree.
func BenchmarkFlatten2KB(b *testing.B)  { benchFlatten(b, body2KB) }
func BenchmarkFlatten50KB(b *testing.B) { benchFlatten(b, body50KB()) }

func benchFlatten(b *testing.B, code string) {
	p := newParser()
	defer p.close()
	t, ok := p.parse([]byte(code), false, 0, nil)
	if !ok {
		b.Fatal("parse failed")
	}
	defer t.close()
	b.SetBytes(int64(len(code)))
	m := startLatency(b)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		p.flatten(t)
		m.add(t0)
	}
	m.report()
	b.ReportMetric(float64(len(p.flatten(t))), "nodes")
}

// BenchmarkParseC2KB is the parse as Check does it (one C call, no copy of
// the source), for comparison with BenchmarkParseOnly (go-tree-sitter).
func BenchmarkParseC2KB(b *testing.B)  { benchParseC(b, body2KB) }
func BenchmarkParseC50KB(b *testing.B) { benchParseC(b, body50KB()) }

func benchParseC(b *testing.B, code string) {
	p := newParser()
	defer p.close()
	src := []byte(code)
	b.SetBytes(int64(len(code)))
	m := startLatency(b)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		t, _ := p.parse(src, false, 0, nil)
		t.close()
		m.add(t0)
	}
	m.report()
}

// BenchmarkCheckOverParse2KB/50KB alternate one go-tree-sitter parse-only
// call and one Check call, so both see the same machine load, and report
// the ratio of their median wall times (x-parse): on a shared, loaded
// machine this ratio is steadier than comparing two separate benchmarks.
func BenchmarkCheckOverParse2KB(b *testing.B)  { benchCheckOverParse(b, body2KB) }
func BenchmarkCheckOverParse50KB(b *testing.B) { benchCheckOverParse(b, body50KB()) }

func benchCheckOverParse(b *testing.B, code string) {
	gp := ts.NewParser()
	defer gp.Close()
	_ = gp.SetLanguage(language)
	v := New()
	src := []byte(code)
	ctx := context.Background()
	var parse, check []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		gp.Parse(src, nil).Close()
		t1 := time.Now()
		v.Check(ctx, code, benchAllow)
		parse, check = append(parse, t1.Sub(t0)), append(check, time.Since(t1))
	}
	b.StopTimer()
	slices.Sort(parse)
	slices.Sort(check)
	p50p, p50c := parse[len(parse)/2], check[len(check)/2]
	b.ReportMetric(float64(p50p.Nanoseconds()), "parse-p50-ns")
	b.ReportMetric(float64(p50c.Nanoseconds()), "check-p50-ns")
	b.ReportMetric(float64(p50c)/float64(p50p), "x-parse")
}
