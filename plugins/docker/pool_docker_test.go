package docker

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/shared"
)

// warmOf returns the ids of user's warm containers (LabelSession warm-*).
func warmOf(t *testing.T, dc *client.Client, user string) []string {
	t.Helper()
	list, err := dc.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelUser+"="+user)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list.Items {
		if strings.HasPrefix(c.Labels[LabelSession], "warm-") {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// With pool { size = 1 }, a user's session leaves a warm container behind;
// the user's next Open is bound to exactly that container (started before
// the Open), works, and is replaced by a new warm one; an idle warm
// container goes after max_idle, and Shutdown removes the rest (testUser's
// cleanup fails the test on any container left).
func TestWarmPool(t *testing.T) {
	dc := requireDocker(t)
	user := testUser(t)
	b, err := configureWith(t, map[string]any{"pool": map[string]any{"size": 1, "max_idle": "4s"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Now()
	s1 := openSession(t, b, user)
	cold := time.Since(t0)
	ready := func() bool { // the backend holds a started warm container of user
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.Warm(user)
	}
	waitFor(t, "a warm container after the first Open", 30*time.Second, ready)
	warm := warmOf(t, dc, user)
	if len(warm) != 1 {
		t.Fatalf("warm containers of the user: %v", warm)
	}

	t1 := time.Now()
	s2 := openSession(t, b, user)
	bound := time.Since(t1)
	got := openedSession(t, b, s2).containerID
	if got != warm[0] {
		t.Fatalf("the second Open got container %s, want the warm %s", shortID(got), shortID(warm[0]))
	}
	if r := execOK(t, b, shared.ExecuteRequest{Code: "return 40 + 2", SessionID: s2}); string(r.Output) != "42" {
		t.Fatalf("execute in the bound warm container: %s", r.Output)
	}
	t.Logf("open: %v new, %v from the pool", cold.Round(time.Millisecond), bound.Round(time.Millisecond))
	for _, sid := range []string{s1, s2} {
		if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
	}
	// The replacement warm container (started after s2 took the first one)
	// is removed once idle for max_idle.
	waitFor(t, "a replacement warm container", 30*time.Second, func() bool {
		w := warmOf(t, dc, user)
		return len(w) == 1 && w[0] != warm[0]
	})
	waitFor(t, "the idle warm container's removal", 30*time.Second, func() bool { return len(warmOf(t, dc, user)) == 0 })

	// A warm container still waiting at Shutdown is removed by it.
	s3 := openSession(t, b, user)
	waitFor(t, "a warm container after a third Open", 30*time.Second, ready)
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: s3}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	b.Shutdown(sctx)
	if w := warmOf(t, dc, user); len(w) != 0 {
		t.Errorf("warm containers left after Shutdown: %v", w)
	}
}

// A re-Configure discards the warm containers started under the previous
// configuration: the warm container is gone when Configure returns, and
// the user's next Open gets a new container with the new limits.
func TestPoolDiscardedOnReconfigure(t *testing.T) {
	dc := requireDocker(t)
	user := testUser(t)
	b, err := configureWith(t, map[string]any{"pool": map[string]any{"size": 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s1 := openSession(t, b, user)
	waitFor(t, "a warm container after the first Open", 30*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.Warm(user)
	})
	old := warmOf(t, dc, user)
	if len(old) != 1 {
		t.Fatalf("warm containers of the user: %v", old)
	}
	raw := []byte(`{"image": "` + testImage() + `", "memory_mb": 384, "pool": {"size": 1}}`)
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: raw}); err != nil {
		t.Fatal(err)
	}
	if w := warmOf(t, dc, user); len(w) != 0 {
		t.Fatalf("warm containers of the old configuration left after Configure: %v", w)
	}
	s2 := openSession(t, b, user)
	got := openedSession(t, b, s2).containerID
	if got == old[0] {
		t.Fatal("the Open after a re-Configure was bound to a container of the old configuration")
	}
	in, err := dc.ContainerInspect(ctx, got, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := in.Container.HostConfig.Memory; m != 384<<20 {
		t.Errorf("the new session's memory limit is %d bytes, want 384 MiB", m)
	}
	for _, sid := range []string{s1, s2} {
		if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
	}
}

// Warm containers carry the owner labels: when the host that started them
// dies, another plugin's reaper removes them, as it removes sessions.
func TestReaperRemovesWarmContainersOfADeadHost(t *testing.T) {
	dc := requireDocker(t)
	user := testUser(t)
	b, err := configureWith(t, map[string]any{"pool": map[string]any{"size": 1}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	b.owner = ownerInfo{pid: cmd.Process.Pid, start: "1", host: b.owner.host} // its containers name a dead owner
	ctx := context.Background()
	s1 := openSession(t, b, user)
	waitFor(t, "a warm container", 30*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.Warm(user)
	})
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: s1}); err != nil {
		t.Fatal(err)
	}
	if w := warmOf(t, dc, user); len(w) != 1 {
		t.Fatalf("warm containers before the reaper: %v", w)
	}
	// A live plugin's Configure runs the reaper once; Reap again finds
	// nothing more of that dead host.
	live := newBackend(t)
	if _, err := live.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	if w := warmOf(t, dc, user); len(w) != 0 {
		t.Errorf("warm containers of a dead host left after Reap: %v", w)
	}
}

// BenchmarkOpenFromPool measures an Open bound to a warm container (pool
// { size = 1 }), beside BenchmarkOpenClose's cold Open: the time to wait
// for the replacement container and the Close are outside the timer.
func BenchmarkOpenFromPool(b *testing.B) {
	user := testUser(b)
	be := NewBackend(nil)
	raw := []byte(`{"image": "` + testImage() + `", "pool": {"size": 1}}`)
	ctx := context.Background()
	if _, err := be.Configure(ctx, shared.ConfigureRequest{Config: raw}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		be.Shutdown(sctx)
	})
	ready := func() bool {
		be.mu.Lock()
		defer be.mu.Unlock()
		return be.Warm(user)
	}
	first := openSession(b, be, user)
	if _, err := be.Close(ctx, shared.CloseRequest{SessionID: first}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		deadline := time.Now().Add(60 * time.Second)
		for !ready() {
			if time.Now().After(deadline) {
				b.Fatal("no warm container within 60s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		sid := "bench-" + randomHex(4)
		b.StartTimer()
		if _, err := be.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := be.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
