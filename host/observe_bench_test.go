package host

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
)

// BenchmarkObserveExecuteOverhead measures what observing one execution
// costs the host (sha256, metrics, the span with the default no-op
// provider, the log line at a level that drops it, and, in "audit", the
// audit record under flock), around a body that returns at once.
func BenchmarkObserveExecuteOverhead(b *testing.B) {
	if pluginDir == "" {
		b.Skip(pluginSkipMsg)
	}
	for _, audit := range []bool{false, true} {
		name := "no-audit"
		src := "sandbox \"s\" {\n  plugin = \"subprocess\"\n}\n"
		dir := b.TempDir()
		if audit {
			name = "audit"
			src = "audit_log = \"audit.jsonl\"\n" + src
		}
		b.Run(name, func(b *testing.B) {
			cfg, diags := ParseConfig(filepath.Join(dir, "config.hcl"), []byte(src))
			if diags.HasErrors() {
				b.Fatal(diags)
			}
			h, err := Load(context.Background(), cfg, WithPluginDirs(pluginDir), WithLogger(hclog.NewNullLogger()))
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			sb, _ := h.Sandbox(context.Background(), "")
			req := shared.ExecuteRequest{Code: "return args['x'] * 2", UserID: "u"}
			res := shared.ExecutionResult{Success: true, Output: json.RawMessage("1")}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				sb.observeExecute(ctx, req, func(context.Context, *execObservation) (shared.ExecutionResult, error) { return res, nil })
			}
		})
	}
}
