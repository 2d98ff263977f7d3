package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/loadtest"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// validateOnceBody is a 1.3 KB body (no imports, no classes): the size of a
// small LLM-written tool, where the plugin's second parse is measurable.
const validateOnceBody = `def clean(s):
    out = []
    for ch in s.strip().lower():
        if ch.isalnum() or ch == ' ':
            out.append(ch)
    return ''.join(out)

def words(text):
    return [w for w in clean(text).split(' ') if w]

def counts(ws):
    c = {}
    for w in ws:
        c[w] = c.get(w, 0) + 1
    return c

def top(c, n):
    items = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
    return [k for k, _ in items[:n]]

def stats(xs):
    if not xs:
        return {'n': 0, 'mean': 0.0, 'min': None, 'max': None}
    total = 0
    lo, hi = xs[0], xs[0]
    for x in xs:
        total += x
        if x < lo:
            lo = x
        if x > hi:
            hi = x
    return {'n': len(xs), 'mean': total / len(xs), 'min': lo, 'max': hi}

def bucket(xs, width):
    b = {}
    for x in xs:
        k = int(x // width) * width
        b[k] = b.get(k, 0) + 1
    return [[k, b[k]] for k in sorted(b)]

text = args.get('text', 'the quick brown fox jumps over the lazy dog the end')
ws = words(text)
lens = [len(w) for w in ws]
summary = {
    'words': len(ws),
    'unique': len(set(ws)),
    'top': top(counts(ws), 3),
    'lengths': stats(lens),
    'histogram': bucket(lens, 2),
    'longest': max(ws, key=len) if ws else '',
}
return summary['words']
`

// BenchmarkValidateOnce runs the same bodies through the host to tier 1
// (the subprocess plugin's fork server) on two hosts, interleaved call by
// call: "verdict", the default host, whose verdict spares the plugin its
// own Go validation, and "no-verdict", a host whose checker gives no
// verdict (the plugin validates again, as before). The "-new" cases send
// a body neither side has seen on every call (an LLM's new code), the
// others the same body again and again (a tool), which the plugin's
// verdict cache already answers without a parse. It reports each
// side's p50 per call, the fork floor (python fork+exit+wait) measured
// before and after the calls, and x_floor (p50 / floor) of each side.
func BenchmarkValidateOnce(b *testing.B) {
	if pluginDir == "" {
		b.Skip(pluginSkipMsg)
	}
	ctx := context.Background()
	load := func(checker StaticChecker) *Sandbox {
		cfg, diags := ParseConfig(filepath.Join(b.TempDir(), "config.hcl"), []byte("sandbox \"s\" {\n  plugin = \"subprocess\"\n}\n"))
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		opts := []Option{WithPluginDirs(pluginDir), WithLogger(hclog.NewNullLogger())}
		if fc := os.Getenv("ORQEST_FORKCORE"); fc != "" {
			opts = append(opts, WithPluginEnv("ORQEST_FORKCORE="+fc))
		}
		if checker != nil {
			opts = append(opts, WithStaticChecker(checker))
		}
		h, err := Load(ctx, cfg, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Close() })
		sb, _ := h.Sandbox(ctx, "")
		return sb
	}
	with := load(nil)
	without := load(plainChecker{validator.New(validator.WithCache(validator.DefaultCacheSize))})
	for _, body := range []struct {
		name string
		code string
		new  bool
	}{
		{"trivial", "return args['x'] * 2", false},
		{"1.3KB", validateOnceBody, false},
		{"trivial-new", "return args['x'] * 2", true},
		{"1.3KB-new", validateOnceBody, true},
	} {
		b.Run(body.name, func(b *testing.B) {
			req := shared.ExecuteRequest{Code: body.code, Args: json.RawMessage(`{"x": 21}`)}
			n := 0
			call := func(sb *Sandbox) time.Duration {
				req := req
				if body.new {
					// A body neither validator has seen: no verdict-cache hit.
					n++
					req.Code = fmt.Sprintf("%s\n# call %d\n", body.code, n)
				}
				t := time.Now()
				res, err := sb.Execute(ctx, req)
				if err != nil || !res.Success {
					b.Fatalf("%+v %v", res, err)
				}
				return time.Since(t)
			}
			for range 20 { // warm both plugins, their zygotes and caches
				call(with)
				call(without)
			}
			floorBefore, err := loadtest.ForkFloor(ctx, "/usr/bin/python3", 300)
			if err != nil {
				b.Fatal(err)
			}
			var dw, dn []time.Duration
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					dw = append(dw, call(with))
					dn = append(dn, call(without))
				} else {
					dn = append(dn, call(without))
					dw = append(dw, call(with))
				}
				i++
			}
			floorAfter, err := loadtest.ForkFloor(ctx, "/usr/bin/python3", 300)
			if err != nil {
				b.Fatal(err)
			}
			floor := (floorBefore.P50MS + floorAfter.P50MS) / 2
			pw, pn := p50ms(dw), p50ms(dn)
			b.ReportMetric(pw, "verdict_p50_ms")
			b.ReportMetric(pn, "no-verdict_p50_ms")
			b.ReportMetric(floor, "floor_p50_ms")
			b.ReportMetric(pw/floor, "verdict_x_floor")
			b.ReportMetric(pn/floor, "no-verdict_x_floor")
			b.ReportMetric(pn/pw, "no-verdict/verdict")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func p50ms(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}
