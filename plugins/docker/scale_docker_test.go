package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/shared"
)

// Fifty tier-2 sessions open at once on one plugin: every one executes,
// their containers' memory is reported per idle session, and closing them
// leaves no container of the user behind (testUser's cleanup checks).
func TestFiftyConcurrentSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: -short (50 containers)")
	}
	dc := requireDocker(t)
	user := testUser(t)
	b := newBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n = 50
	sids := make([]string, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	gate := make(chan struct{}, 8) // opens in flight at once
	for i := range sids {
		sids[i] = fmt.Sprintf("scale-%s-%d", randomHex(3), i)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			gate <- struct{}{}
			defer func() { <-gate }()
			if _, err := b.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sids[i]}); err != nil {
				errs <- fmt.Errorf("open %d: %w", i, err)
				return
			}
			// A generous wall clock: the first call of a session that opened
			// among 50 on two cores may wait for its zygote; this test is
			// about holding 50 sessions, not latency.
			r, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return args['i'] * 2", Args: []byte(fmt.Sprintf(`{"i": %d}`, i)), SessionID: sids[i], Timeout: time.Minute})
			if err != nil || !r.Result.Success || string(r.Result.Output) != fmt.Sprint(2*i) {
				errs <- fmt.Errorf("execute %d: %v %+v", i, err, r.Result)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	opened := time.Since(start)

	// Memory of the idle sessions: the containers' cgroup usage.
	ids := containersOf(t, dc, LabelUser+"="+user)
	var total uint64
	var mu sync.Mutex
	for _, id := range ids {
		wg.Add(1)
		go func(id string) { // the engine takes about a second per sample
			defer wg.Done()
			st, err := dc.ContainerStats(ctx, id, client.ContainerStatsOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Body.Close()
			var s struct {
				MemoryStats struct {
					Usage uint64            `json:"usage"`
					Stats map[string]uint64 `json:"stats"`
				} `json:"memory_stats"`
			}
			if err := json.NewDecoder(st.Body).Decode(&s); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			total += s.MemoryStats.Usage - s.MemoryStats.Stats["inactive_file"]
			mu.Unlock()
		}(id)
	}
	wg.Wait()
	if len(ids) != n {
		t.Errorf("%d containers for %d sessions", len(ids), n)
	}
	t.Logf("%d sessions opened and executed in %v; idle memory %.1f MB per session (cgroup usage less inactive file cache)",
		n, opened.Round(time.Millisecond), float64(total)/float64(max(len(ids), 1))/(1<<20))

	start = time.Now()
	for _, sid := range sids {
		wg.Add(1)
		go func(sid string) {
			defer wg.Done()
			gate <- struct{}{}
			defer func() { <-gate }()
			if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
				t.Errorf("close %s: %v", sid, err)
			}
		}(sid)
	}
	wg.Wait()
	t.Logf("closed in %v", time.Since(start).Round(time.Millisecond))
}
