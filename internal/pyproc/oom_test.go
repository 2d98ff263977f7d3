package pyproc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestOOMFileCandidates(t *testing.T) {
	v2 := oomFileCandidates("/r", []byte("0::/user.slice/app.scope\n"))
	if want := []string{"/r/user.slice/app.scope/memory.events", "/r/memory.events"}; !slices.Equal(v2, want) {
		t.Errorf("v2: %v, want %v", v2, want)
	}
	v1 := oomFileCandidates("/r", []byte("5:devices:/\n4:memory:/docker/abc\n1:cpu,cpuacct:/\n0::/\n"))
	if want := []string{"/r/memory/docker/abc/memory.oom_control", "/r/memory/memory.oom_control", "/r/memory.events", "/r/memory.events"}; !slices.Equal(v1, want) {
		t.Errorf("v1: %v, want %v", v1, want)
	}
}

func TestParseOOMKills(t *testing.T) {
	for text, want := range map[string]uint64{
		"low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n": 2, // memory.events
		"oom_kill_disable 0\nunder_oom 0\noom_kill 7\n":               7, // memory.oom_control
	} {
		if n, ok := parseOOMKills([]byte(text)); !ok || n != want {
			t.Errorf("parseOOMKills(%q) = %d %v, want %d", text, n, ok, want)
		}
	}
	if _, ok := parseOOMKills([]byte("oom_kill_disable 0\n")); ok {
		t.Error("a file without oom_kill parsed")
	}
}

// The count read at a child's start and again at its death: grown is the
// evidence of an OOM kill.
func TestOOMWatch(t *testing.T) {
	f := filepath.Join(t.TempDir(), "memory.events")
	write := func(n string) {
		if err := os.WriteFile(f, []byte("oom 0\noom_kill "+n+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("4")
	n, _ := readOOMKills(f)
	w := oomWatch{file: f, count: n}
	if w.fired() {
		t.Error("fired with the same count")
	}
	write("5")
	if !w.fired() {
		t.Error("did not fire when the count grew")
	}
	if (oomWatch{}).fired() {
		t.Error("a watch without a file fired")
	}
}
