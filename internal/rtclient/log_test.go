package rtclient

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// The runtime's JSON log reaches the plugin's log at its own level (a
// runtime warning is a plugin warning); other stderr lines at debug.
func TestLineLoggerKeepsRuntimeLevels(t *testing.T) {
	var out bytes.Buffer
	l := &LogWriter{Log: hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})}
	_, _ = l.Write([]byte(`{"time":"2026-12-03T08:00:00Z","level":"WARN","msg":"fork-server died; restarting","agent":"default","pid":42}` + "\n"))
	_, _ = l.Write([]byte(`{"level":"DEBUG","msg":"quiet"}` + "\nTraceback (most recent call last):\n"))
	_, _ = l.Write([]byte(`{"level":"ERROR","msg":"broken",`))
	_, _ = l.Write([]byte(`"error":"x"}` + "\n"))
	got := out.String()
	for _, want := range []string{"[WARN]  fork-server died; restarting: agent=default pid=42", "[ERROR] broken: error=x"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"quiet", "Traceback"} {
		if strings.Contains(got, not) {
			t.Errorf("%q logged above debug:\n%s", not, got)
		}
	}
}
