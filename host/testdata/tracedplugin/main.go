// Command tracedplugin is a test backend that installs an OpenTelemetry
// tracer provider before plugin.Serve, as a plugin author would, and writes
// every span it ends to the file named by $ORQEST_TEST_SPANS, one JSON
// object per line. Its Execute starts a span of its own and succeeds.
package main

import (
	"context"
	"encoding/json"
	"os"
	"sync"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// fileExporter appends each span as {name, trace_id, span_id, parent_id}.
type fileExporter struct {
	mu sync.Mutex
	f  *os.File
}

func (e *fileExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		b, err := json.Marshal(map[string]string{
			"name":      s.Name(),
			"trace_id":  s.SpanContext().TraceID().String(),
			"span_id":   s.SpanContext().SpanID().String(),
			"parent_id": s.Parent().SpanID().String(),
		})
		if err != nil {
			return err
		}
		if _, err := e.f.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

func (e *fileExporter) Shutdown(context.Context) error { return nil }

type backend struct {
	shared.NoSessions
	tracer trace.Tracer
}

func (backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	return shared.InfoResponse{Name: "traced", Tier: 3, Version: "0.0.1", APIVersions: []int{shared.APIVersion},
		Capabilities: []shared.Capability{shared.CapFreshProcess}}, nil
}

func (backend) Configure(context.Context, shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	return shared.ConfigureResponse{}, nil
}

func (backend) Validate(context.Context, shared.ValidateRequest) (shared.ValidateResponse, error) {
	return shared.ValidateResponse{}, nil
}

func (b backend) Execute(ctx context.Context, _ shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	_, span := b.tracer.Start(ctx, "backend.execute")
	span.End()
	return shared.ExecuteResponse{Result: shared.ExecutionResult{Success: true, Output: json.RawMessage("1")}}, nil
}

func main() {
	f, err := os.OpenFile(os.Getenv("ORQEST_TEST_SPANS"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		panic(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(&fileExporter{f: f})))
	otel.SetTracerProvider(tp)
	plugin.Serve(backend{tracer: tp.Tracer("tracedplugin")}, plugin.WithLogger(plugin.NewPluginLogger("traced")))
}
