package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// TracerName is the instrumentation name of the host's spans.
const TracerName = "github.com/orqest/sandbox/host"

// Span names of the host (see docs/observability.md).
const (
	// SpanExecute is the span around one execution: policy, validation,
	// admission and the plugin call.
	SpanExecute = "orqest.execute"
	// SpanPluginCall is the child of SpanExecute around the plugin's
	// Execute (including a relaunch of a dead plugin).
	SpanPluginCall = "orqest.plugin_call"
	// SpanSessionTool is the span around one CallSessionTool.
	SpanSessionTool = "orqest.session_tool"
)

// Outcomes of an execution other than an ErrorKind: "success", and
// OutcomeErrorPrefix followed by the first error class of an infrastructure
// error (plugin.ErrorClasses: "error_unavailable", "error_plugin_shutdown",
// ...; "error_unknown" when the error matches none).
const (
	OutcomeSuccess     = "success"
	OutcomeErrorPrefix = "error_"
)

// WithTracerProvider sets the OpenTelemetry tracer provider of the host's
// spans; the trace context of every plugin call is propagated to the
// plugin over gRPC (W3C trace context). The default is otel's global
// provider, a no-op unless the embedder installed one, so nothing is
// exported unless asked for.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

type callerKey struct{}

// WithCaller returns ctx carrying caller, the identity of whoever asked for
// an execution (an embedder's service name, "cli:<os user>", "mcp:<client>").
// Execute records it in the audit log, the log line and the span.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerFromContext returns the caller WithCaller put in ctx ("" when none).
func CallerFromContext(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

// CodeSHA256 returns the hex sha256 of code, the code_sha256 of audit
// records and spans.
func CodeSHA256(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

// metrics are the Prometheus collectors of one Host, registered on the
// host's own registry.
type metrics struct {
	reg          *prometheus.Registry
	executions   *prometheus.CounterVec
	queueWait    *prometheus.HistogramVec
	pluginCall   *prometheus.HistogramVec
	total        *prometheus.HistogramVec
	rejections   *prometheus.CounterVec
	kills        *prometheus.CounterVec
	launches     *prometheus.CounterVec
	relaunches   *prometheus.CounterVec
	sessionTools *prometheus.CounterVec
	reclaimed    *prometheus.CounterVec
	reopened     *prometheus.CounterVec
	refused      *prometheus.CounterVec
	egress       *egressMetrics // egress.go
}

// latencyBuckets span a warm fork (about a millisecond) to a long timeout.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_executions_total",
			Help: "Executions by sandbox, tier and outcome (success, the result's error_kind, or error_<class> for an infrastructure error).",
		}, []string{"sandbox", "tier", "outcome"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orqest_queue_wait_seconds",
			Help:    "Time an execution waited for a slot of its sandbox (max_concurrency).",
			Buckets: latencyBuckets,
		}, []string{"sandbox"}),
		pluginCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orqest_plugin_call_seconds",
			Help:    "Duration of the plugin's Execute call, as the host sees it.",
			Buckets: latencyBuckets,
		}, []string{"sandbox"}),
		total: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orqest_execution_seconds",
			Help:    "Duration of a whole Execute: policy, validation, queue wait and plugin call.",
			Buckets: latencyBuckets,
		}, []string{"sandbox"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_validation_rejections_total",
			Help: "Validation findings of rejected executions, by the finding's rule.",
		}, []string{"sandbox", "rule"}),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_kills_total",
			Help: "Executions ended by a limit, by reason (timeout, memory, killed).",
		}, []string{"sandbox", "reason"}),
		launches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_plugin_launches_total",
			Help: "Plugin processes launched and configured, the first and every relaunch.",
		}, []string{"sandbox", "plugin"}),
		relaunches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_plugin_relaunches_total",
			Help: "Plugin processes launched after an earlier one of the sandbox had exited.",
		}, []string{"sandbox", "plugin"}),
		sessionTools: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_session_tool_calls_total",
			Help: "Session tool calls (tool library operations) by tool and outcome.",
		}, []string{"sandbox", "tool", "outcome"}),
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_sessions_reclaimed_total",
			Help: "Sessions the host closed, by reason: idle (idle_timeout), lifetime (max_lifetime), capacity (room for an Open at max_sessions or max_sessions_per_user).",
		}, []string{"sandbox", "reason"}),
		reopened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_sessions_reopened_total",
			Help: "Sessions opened again under their id for a call, by cause: relaunch (the plugin was relaunched), lost (the plugin no longer knew it), reclaimed (the host had closed it).",
		}, []string{"sandbox", "cause"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_sessions_refused_total",
			Help: "Opens refused at a session cap with no session idle long enough to make room, by limit (max_sessions, max_sessions_per_user).",
		}, []string{"sandbox", "limit"}),
	}
	reg.MustRegister(m.executions, m.queueWait, m.pluginCall, m.total, m.rejections, m.kills, m.launches, m.relaunches, m.sessionTools,
		m.reclaimed, m.reopened, m.refused)
	m.egress = newEgressMetrics(reg)
	return m
}

// sessionGauge registers the gauge of one sandbox's open sessions, read
// from the host's session table at scrape time.
func (m *metrics) sessionGauge(sandbox string, t *sessionTable) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "orqest_sessions_open", Help: "Sessions of the sandbox open now (reclaimed ones not counted).",
		ConstLabels: prometheus.Labels{"sandbox": sandbox},
	}, func() float64 { return float64(t.openIn(sandbox)) }))
}

// gauges registers the in-flight and queued gauges of one sandbox, read
// from its admission counters at scrape time.
func (m *metrics) gauges(sandbox string, a *admission) {
	labels := prometheus.Labels{"sandbox": sandbox}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orqest_in_flight", Help: "Executions of the sandbox running now.", ConstLabels: labels,
		}, func() float64 { return float64(a.inFlight.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orqest_queued", Help: "Callers waiting for a slot of the sandbox now.", ConstLabels: labels,
		}, func() float64 { return float64(a.queued.Load()) }),
	)
}

// Registry returns the host's Prometheus registry: a Registerer (an
// embedder may add its own collectors) and a Gatherer of the host's
// metrics. Every Host has its own; nothing is registered globally.
func (h *Host) Registry() *prometheus.Registry { return h.metrics.reg }

// MetricsHandler serves the host's metrics in the Prometheus text format.
func (h *Host) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(h.metrics.reg, promhttp.HandlerOpts{Registry: h.metrics.reg})
}

// outcomeOf names how an execution ended: success, the result's error
// kind, or error_<class> for an infrastructure error.
func outcomeOf(res shared.ExecutionResult, err error) string {
	switch {
	case err != nil:
		if cls := plugin.ErrorClasses(err); len(cls) > 0 {
			return OutcomeErrorPrefix + cls[0]
		}
		return OutcomeErrorPrefix + "unknown"
	case res.Success:
		return OutcomeSuccess
	case res.ErrorKind != shared.KindNone:
		return string(res.ErrorKind)
	default:
		return "failed"
	}
}

// errorClassOf is the first error class of an infrastructure error ("" for
// none).
func errorClassOf(err error) string {
	if err == nil {
		return ""
	}
	if cls := plugin.ErrorClasses(err); len(cls) > 0 {
		return cls[0]
	}
	return "unknown"
}

// execObservation collects what one execution reports to the metrics, the
// span, the log line and the audit log.
type execObservation struct {
	start     time.Time
	queueWait time.Duration
	plugin    time.Duration
	called    bool // the plugin was called
}

// observeExecute runs fn (the body of Execute) inside the execution's span
// and reports its end everywhere: metrics, span attributes, the log line and
// the audit record. Every execution of a sandbox passes here once.
func (s *Sandbox) observeExecute(ctx context.Context, req shared.ExecuteRequest, fn func(context.Context, *execObservation) (shared.ExecutionResult, error)) (shared.ExecutionResult, error) {
	h := s.host
	obs := &execObservation{start: time.Now()}
	codeHash := CodeSHA256(req.Code)
	caller := CallerFromContext(ctx)
	ctx, span := h.tracer.Start(ctx, SpanExecute, trace.WithAttributes(
		attribute.String("orqest.sandbox", s.cfg.Name),
		attribute.String("orqest.plugin", s.cfg.Plugin),
		attribute.String("orqest.code.sha256", codeHash),
		attribute.String("orqest.user", req.UserID),
		attribute.String("orqest.session", req.SessionID),
		attribute.String("orqest.caller", caller),
	))
	defer span.End()

	res, err := fn(ctx, obs)
	elapsed := time.Since(obs.start)
	outcome := outcomeOf(res, err)
	tier := s.inst.tierLabel()

	m := h.metrics
	m.executions.WithLabelValues(s.cfg.Name, tier, outcome).Inc()
	m.total.WithLabelValues(s.cfg.Name).Observe(elapsed.Seconds())
	if obs.called {
		m.pluginCall.WithLabelValues(s.cfg.Name).Observe(obs.plugin.Seconds())
	}
	if err == nil {
		switch res.ErrorKind {
		case shared.KindTimeout, shared.KindMemory, shared.KindKilled:
			m.kills.WithLabelValues(s.cfg.Name, string(res.ErrorKind)).Inc()
		case shared.KindValidation:
			for _, f := range res.Findings {
				m.rejections.WithLabelValues(s.cfg.Name, f.Rule).Inc()
			}
		}
	}

	span.SetAttributes(
		attribute.String("orqest.tier", tier),
		attribute.String("orqest.outcome", outcome),
		attribute.String("orqest.error_kind", string(res.ErrorKind)),
		attribute.Int("orqest.findings", len(res.Findings)),
	)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, errorClassOf(err))
	}

	short := codeHash[:12]
	h.opts.logger.Info("execution",
		"sandbox", s.cfg.Name, "plugin", s.cfg.Plugin, "tier", tier,
		"user", req.UserID, "session", req.SessionID, "caller", caller,
		"code_sha256", short, "duration_ms", msOf(elapsed),
		"outcome", outcome, "error_kind", string(res.ErrorKind), "findings", len(res.Findings))

	if a := h.audit; a != nil {
		rec := map[string]any{
			"code_sha256": codeHash,
			"caller":      caller,
			"user":        req.UserID,
			"session":     req.SessionID,
			"plugin":      s.cfg.Plugin,
			"tier":        tier,
			"outcome":     outcome,
			"error_kind":  string(res.ErrorKind),
			"duration_ms": msOf(elapsed),
			"findings":    len(res.Findings),
		}
		if req.ToolName != "" {
			rec["tool_name"] = req.ToolName
		}
		if c := errorClassOf(err); c != "" {
			rec["error_class"] = c
		}
		if werr := a.Record(Event{Type: EventExecution, Sandbox: s.cfg.Name, Payload: rec}); werr != nil {
			h.opts.logger.Error("audit log: cannot record an execution", "sandbox", s.cfg.Name, "code_sha256", short, "error", werr)
		}
	}
	return res, err
}

// observeSessionTool reports one CallSessionTool: its span, a metric, the
// log line and an audit record.
func (s *Sandbox) observeSessionTool(ctx context.Context, sessionID, tool string, fn func(context.Context) error) error {
	h := s.host
	start := time.Now()
	caller := CallerFromContext(ctx)
	ctx, span := h.tracer.Start(ctx, SpanSessionTool, trace.WithAttributes(
		attribute.String("orqest.sandbox", s.cfg.Name),
		attribute.String("orqest.plugin", s.cfg.Plugin),
		attribute.String("orqest.session", sessionID),
		attribute.String("orqest.tool", tool),
		attribute.String("orqest.caller", caller),
	))
	defer span.End()
	err := fn(ctx)
	elapsed := time.Since(start)
	outcome := OutcomeSuccess
	if err != nil {
		outcome = OutcomeErrorPrefix + errorClassOf(err)
		span.RecordError(err)
		span.SetStatus(codes.Error, errorClassOf(err))
	}
	span.SetAttributes(attribute.String("orqest.outcome", outcome))
	h.metrics.sessionTools.WithLabelValues(s.cfg.Name, tool, outcome).Inc()
	h.opts.logger.Info("session tool call", "sandbox", s.cfg.Name, "plugin", s.cfg.Plugin,
		"session", sessionID, "tool", tool, "caller", caller, "duration_ms", msOf(elapsed), "outcome", outcome)
	if a := h.audit; a != nil {
		rec := map[string]any{
			"tool_name": tool, "caller": caller, "session": sessionID, "plugin": s.cfg.Plugin,
			"outcome": outcome, "duration_ms": msOf(elapsed),
		}
		if c := errorClassOf(err); c != "" {
			rec["error_class"] = c
		}
		if werr := a.Record(Event{Type: EventSessionToolCall, Sandbox: s.cfg.Name, Payload: rec}); werr != nil {
			h.opts.logger.Error("audit log: cannot record a session tool call", "sandbox", s.cfg.Name, "error", werr)
		}
	}
	return err
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// tierLabel is the tier the plugin reported, or "unknown" before its first
// launch.
func (in *instance) tierLabel() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.launches == 0 {
		return "unknown"
	}
	return strconv.Itoa(in.info.Tier)
}
