package host

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/egress/egresstest"
	"github.com/orqest/sandbox/shared"
)

// TestDockerEgressAudited: through the host, with the real docker plugin
// process and its system resolver, a session of a sandbox with a network
// block reaches the allowed address and nothing else ("localhost", an
// allowed name, resolves to 127.0.0.1 and is refused); each attempt is a
// record of the audit log (session, user, host, port, bytes) and counted
// in orqest_egress_connections_total.
func TestDockerEgressAudited(t *testing.T) {
	addr := egresstest.HostAddr(t)
	allowedPort := egresstest.Serve(t, addr, "allowed", false)
	forbiddenPort := egresstest.Serve(t, addr, "forbidden", false)
	user := testUser("orqtest-egress-")
	network := fmt.Sprintf("network {\n    allow = [%q, \"localhost\"]\n  }", fmt.Sprintf("%s:%d", addr, allowedPort))
	h, sb := dockerHost(t, `audit_log = "audit.jsonl"`, network, user)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: user})
	if err != nil {
		t.Fatal(err)
	}
	id := open.SessionID
	t.Cleanup(func() { sb.CloseSession(context.Background(), id) })

	// The session container, not its forwarder.
	out, err := exec.Command("docker", "ps", "--filter", "label="+dockerSessionLabel+"="+id, "--format", `{{.ID}} {{.Label "org.orqest.sandbox.role"}}`).Output()
	if err != nil {
		t.Fatal(err)
	}
	var ctr string
	roles := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 1:
			ctr = f[0]
		case len(f) == 2 && f[1] == "egress-forwarder":
			roles++
		}
	}
	if ctr == "" || roles != 1 {
		t.Fatalf("want a session container and one forwarder, got %q", out)
	}
	py := `import sys, urllib.request, urllib.error
for url in sys.argv[1:]:
    try:
        print(url, urllib.request.urlopen(url, timeout=10).read().decode())
    except urllib.error.HTTPError as e:
        print(url, e.code, e.read().decode().strip())
`
	urls := []string{
		fmt.Sprintf("http://%s:%d/", addr, allowedPort),
		fmt.Sprintf("http://%s:%d/", addr, forbiddenPort),
		fmt.Sprintf("http://localhost:%d/", allowedPort),
		"http://169.254.169.254/",
	}
	probe, err := exec.Command("docker", append([]string{"exec", "-u", "65534:65534", ctr, "python3", "-I", "-c", py}, urls...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, probe)
	}
	text := string(probe)
	for _, want := range []string{
		urls[0] + " hello from allowed",
		urls[1] + ` 403 orqest egress: egress to ` + fmt.Sprintf("%s:%d", addr, forbiddenPort) + ` refused by sandbox "docker" network {}`,
		urls[2] + " 403 orqest egress:", "localhost resolves to 127.0.0.1, a loopback address",
		urls[3] + " 403 orqest egress:",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("probe output lacks %q:\n%s", want, text)
		}
	}
	// The next call carries the events to the host.
	if res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1", SessionID: id, UserID: user}); err != nil || !res.Success {
		t.Fatalf("call: %+v %v", res, err)
	}
	if n := testutil.ToFloat64(h.metrics.egress.connections.WithLabelValues("docker", "allowed")); n != 1 {
		t.Errorf("allowed connections counted: %v, want 1", n)
	}
	if n := testutil.ToFloat64(h.metrics.egress.connections.WithLabelValues("docker", "refused")); n != 3 {
		t.Errorf("refused connections counted: %v, want 3", n)
	}
	// The audit log has each attempt (it writes asynchronously).
	path := h.AuditLog().Path()
	deadline := time.Now().Add(10 * time.Second)
	var records []map[string]any
	for {
		records = records[:0]
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				if typ, _ := rec["event"].(string); typ == egress.EventAllowed || typ == egress.EventRefused {
					records = append(records, rec)
				}
			}
		}
		f.Close()
		if len(records) >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(records) != 4 {
		t.Fatalf("%d egress records in the audit log, want 4: %v", len(records), records)
	}
	for _, rec := range records {
		b, _ := json.Marshal(rec)
		s := string(b)
		for _, want := range []string{`"session":"` + id + `"`, `"user":"` + user + `"`, `"host":`, `"port":`, `"bytes_received":`} {
			if !strings.Contains(s, want) {
				t.Errorf("audit record lacks %s: %s", want, s)
			}
		}
	}
}
