package procfs

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	line := []byte("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615")
	s, err := ParseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != 'S' || s.PPID != 1 || s.PGRP != 4242 || s.StartTime != 987654 || s.Gone() {
		t.Fatalf("ParseStat = %+v", s)
	}
	if z, _ := ParseStat([]byte("7 (x) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0")); !z.Gone() {
		t.Error("a zombie is not Gone")
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1", "1 (x) S a 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0"} {
		if _, err := ParseStat([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseStat(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	s, err := ReadStat(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if s.PPID != os.Getppid() || s.StartTime == 0 || s.Gone() {
		t.Fatalf("ReadStat(self) = %+v (ppid %d)", s, os.Getppid())
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadStat(no such pid) = %v, want fs.ErrNotExist", err)
	}
}

func TestExitingFlag(t *testing.T) {
	line := "9 (x) R 1 9 9 0 -1 4194372 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0"
	s, err := ParseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if s.Flags != 4194372 || !s.Exiting() || s.Gone() {
		t.Errorf("ParseStat = %+v: want flags 4194372, exiting, not gone", s)
	}
	if s, _ := ParseStat([]byte(strings.Replace(line, "4194372", "4194368", 1))); s.Exiting() {
		t.Error("a process without PF_EXITING is exiting")
	}
}

func TestKillPending(t *testing.T) {
	for _, c := range []struct {
		status string
		want   bool
	}{
		{"Name:\tsleep\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n", true},
		{"SigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n", true},
		{"SigPnd:\t0000000000000002\nShdPnd:\t0000000000004000\n", false}, // SIGINT, SIGTERM
	} {
		got, err := ParseKillPending([]byte(c.status))
		if err != nil || got != c.want {
			t.Errorf("ParseKillPending(%q) = %v %v, want %v", c.status, got, err, c.want)
		}
	}
	for _, bad := range []string{"Name:\tx\n", "SigPnd:\tzz\n"} {
		if _, err := ParseKillPending([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseKillPending(%q) = %v, want ErrMalformed", bad, err)
		}
	}
	// A real process: none pending for this one.
	if got, err := KillPending(os.Getpid()); err != nil || got {
		t.Errorf("KillPending(self) = %v %v", got, err)
	}
}
