package docker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/internal/procfs"
	"github.com/orqest/sandbox/shared"
)

// The image carries the fork-server's C loop and the runtime hands it to
// its zygotes: after a session's first call, a Python process of the
// container (its zygote) has forkcore mapped, read from the host's /proc
// (inside the container nothing may read a sealed process's maps).
func TestSessionZygoteRunsTheCLoop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: reading the container's processes from the host's /proc needs root")
	}
	user := testUser(t)
	b := newBackend(t)
	sid := openSession(t, b, user)
	execOK(t, b, shared.ExecuteRequest{Code: "return 1", SessionID: sid, UserID: user})
	dc := requireDocker(t)
	ins, err := dc.ContainerInspect(context.Background(), containerOf(t, b, sid), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := ins.Container.State.Pid
	// Every process below the runtime (the container's pid 1).
	below := map[int]bool{root: true}
	for changed := true; changed; {
		changed = false
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			pid, _ := strconv.Atoi(filepath.Base(d))
			st, err := procfs.ReadStat(pid)
			if err != nil || below[pid] || !below[st.PPID] {
				continue
			}
			below[pid] = true
			changed = true
		}
	}
	var pythons, withCore int
	for pid := range below {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if !strings.HasPrefix(string(comm), "python") {
			continue
		}
		pythons++
		maps, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
		if err == nil && strings.Contains(string(maps), "orqest-forkcore") {
			withCore++
		}
	}
	if pythons == 0 {
		t.Fatalf("no Python process below the runtime (pid %d)", root)
	}
	if withCore == 0 {
		t.Fatalf("none of the container's %d Python processes has the C loop mapped: the zygote loops in Python", pythons)
	}
	t.Logf("%d of the container's %d Python processes (zygote and pre-forked children) have the C loop mapped", withCore, pythons)
}
