package host

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orqest/sandbox/egress"
)

// A backend's egress proxy reports every connection it allowed or refused
// as an event (egress.EventAllowed, egress.EventRefused: session, user,
// host, port, the address dialed, bytes each way, the reason of a
// refusal) in its responses' Events; the host publishes them on its bus,
// so the audit log records each one, and counts them here.

// egressMetrics count the egress proxies' connections and bytes.
type egressMetrics struct {
	connections *prometheus.CounterVec
	bytes       *prometheus.CounterVec
}

func newEgressMetrics(reg *prometheus.Registry) *egressMetrics {
	m := &egressMetrics{
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_egress_connections_total",
			Help: "Outbound connections of sessions through the egress proxy, by verdict (allowed, refused).",
		}, []string{"sandbox", "verdict"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orqest_egress_bytes_total",
			Help: "Bytes sessions' allowed connections carried through the egress proxy, by direction (sent, received).",
		}, []string{"sandbox", "direction"}),
	}
	reg.MustRegister(m.connections, m.bytes)
	return m
}

// observe counts one backend event if it is an egress proxy's.
func (m *egressMetrics) observe(sandbox, typ string, payload map[string]any) {
	var verdict string
	switch typ {
	case egress.EventAllowed:
		verdict = "allowed"
	case egress.EventRefused:
		verdict = "refused"
	default:
		return
	}
	m.connections.WithLabelValues(sandbox, verdict).Inc()
	for _, d := range []struct{ key, direction string }{{"bytes_sent", "sent"}, {"bytes_received", "received"}} {
		if n, ok := payload[d.key].(float64); ok && n > 0 {
			m.bytes.WithLabelValues(sandbox, d.direction).Add(n)
		}
	}
}
