package pyproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// firstSubID takes the first well-formed range of the account, named by
// uid or by user name, and skips malformed lines and other accounts.
func TestFirstSubID(t *testing.T) {
	p := filepath.Join(t.TempDir(), "subuid")
	text := "other:100000:65536\nbroken line\nsvc:x:1\nsvc:0:10\n4242:300000:0\nsvc:231072:65536\n4242:400000:10\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		keys []string
		want int
	}{{[]string{"4242", "svc"}, 231072}, {[]string{"4242"}, 400000}, {[]string{"other"}, 100000}} {
		got, err := firstSubID(p, c.keys)
		if err != nil || got != c.want {
			t.Errorf("%v: %d, %v; want %d", c.keys, got, err, c.want)
		}
	}
	if _, err := firstSubID(p, []string{"4243", "nobody"}); err == nil || !strings.Contains(err.Error(), "no subordinate id range") {
		t.Errorf("an account without a range: %v", err)
	}
	if _, err := firstSubID(filepath.Join(t.TempDir(), "none"), []string{"1"}); err == nil {
		t.Error("a missing file: no error")
	}
}

// As root, SubordinateIDs declines (the runner drops to 65534 instead);
// otherwise missing helpers are named.
func TestSubordinateIDsWhy(t *testing.T) {
	f := DefaultSubIDFiles()
	f.NewUIDMap = filepath.Join(t.TempDir(), "newuidmap")
	_, err := SubordinateIDs(f)
	if err == nil {
		t.Fatal("no error without newuidmap")
	}
	want := "newuidmap not installed"
	if os.Geteuid() == 0 {
		want = "running as root"
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want %q", err, want)
	}
}
