package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/orqest/sandbox/internal/procfs"
)

// An Endpoint serves the proxy on a socket that only its directory's
// traversal reaches (0711, a random name, the socket 0666), and Close
// removes the directory.
func TestEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	defer srv.Close()
	to := srv.Listener.Addr().String()
	w := &world{routes: map[string]string{fmt.Sprintf("203.0.113.10:%d", netip.MustParseAddrPort(to).Port()): to}}
	pol, err := ParsePolicy("p", []string{"allowed.test"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	ep, err := Listen(tmp, os.Getpid(), procfs.StartTime(os.Getpid()), Options{Policy: pol, Lookup: resolver(map[string][]string{"allowed.test": {"203.0.113.10"}}), Dial: w.dial}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(ep.Dir)
	if err != nil || st.Mode().Perm() != 0o711 || !strings.HasPrefix(filepath.Base(ep.Dir), DirPrefix+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("directory %s: %v %v", ep.Dir, st.Mode(), err)
	}
	if st, err := os.Stat(filepath.Join(ep.Dir, ep.Socket)); err != nil || st.Mode().Perm() != 0o666 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket: %v %v", st.Mode(), err)
	}
	c := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(mustURL(t, "http://proxy")),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(ep.Dir, ep.Socket))
		},
	}}
	resp, err := c.Get(fmt.Sprintf("http://allowed.test:%d/", netip.MustParseAddrPort(to).Port()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("through the socket: %q", body)
	}
	c.CloseIdleConnections()
	if err := ep.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := os.Stat(ep.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory outlived Close: %v", err)
	}
}

// TestReapDirs: the socket directory of a process that is gone is
// removed; this process's and unrelated directories stay.
func TestReapDirs(t *testing.T) {
	tmp := t.TempDir()
	pid := strconv.Itoa(os.Getpid())
	mine := filepath.Join(tmp, DirPrefix+pid+"-"+procfs.StartTime(os.Getpid())+"-abc")
	dead := filepath.Join(tmp, DirPrefix+pid+"-1-abc") // a recycled pid: another start time
	other := filepath.Join(tmp, "orqest-egressive")
	for _, d := range []string{mine, dead, other} {
		if err := os.Mkdir(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dead, "x.sock"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if n := ReapDirs(tmp); n != 1 {
		t.Errorf("removed %d, want 1", n)
	}
	for d, want := range map[string]bool{mine: true, dead: false, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(d), err == nil, want)
		}
	}
}
