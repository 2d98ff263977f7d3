package host

import (
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orqest/sandbox/egress"
)

// The egress proxy's events, as a backend reports them (egress.Event as
// JSON), are counted by verdict and bytes; other events are not.
func TestEgressMetricsCountProxyEvents(t *testing.T) {
	m := newEgressMetrics(prometheus.NewRegistry())
	for _, ev := range []egress.Event{
		{Type: egress.EventAllowed, Host: "api.example.com", Port: 443, BytesSent: 100, BytesReceived: 2000},
		{Type: egress.EventAllowed, Host: "api.example.com", Port: 443, BytesSent: 5, BytesReceived: 7},
		{Type: egress.EventRefused, Host: "evil.example", Port: 443, Reason: "not in allow"},
	} {
		b, _ := json.Marshal(ev)
		payload := map[string]any{}
		if err := json.Unmarshal(b, &payload); err != nil {
			t.Fatal(err)
		}
		m.observe("docker", ev.Type, payload)
	}
	m.observe("docker", "tool.promoted", map[string]any{"bytes_sent": 1e6})
	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.connections.WithLabelValues("docker", "allowed")), 2, "allowed"},
		{testutil.ToFloat64(m.connections.WithLabelValues("docker", "refused")), 1, "refused"},
		{testutil.ToFloat64(m.bytes.WithLabelValues("docker", "sent")), 105, "bytes sent"},
		{testutil.ToFloat64(m.bytes.WithLabelValues("docker", "received")), 2007, "bytes received"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}
