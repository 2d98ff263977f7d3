package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Two logs on one file (as two processes would have: separate open files)
// writing at once keep one gapless sequence, and a reopened log continues
// it, past a partial last line and records longer than a read block.
func TestAuditSeqAcrossWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	b1, b2 := NewBus(), NewBus()
	a1, err := OpenAuditLog(b1, path)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := OpenAuditLog(b2, path)
	if err != nil {
		t.Fatal(err)
	}
	const each = 100
	var wg sync.WaitGroup
	for _, a := range []*AuditLog{a1, a2} {
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					if err := a.Record(Event{Type: EventExecution, Payload: map[string]any{"i": i}}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	b1.Close()
	b2.Close()
	evs := readAudit(t, path)
	if len(evs) != 4*each {
		t.Fatalf("%d records", len(evs))
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, ev.Seq)
		}
	}

	// A long record, then a torn line (a writer that died mid-write).
	b3 := NewBus()
	a3, err := OpenAuditLog(b3, path)
	if err != nil {
		t.Fatal(err)
	}
	if a3.Seq() != 4*each {
		t.Fatalf("reopened at seq %d", a3.Seq())
	}
	if err := a3.Record(Event{Type: EventExecution, Payload: map[string]any{"long": strings.Repeat("x", 10000)}}); err != nil {
		t.Fatal(err)
	}
	b3.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, `{"seq":99999,"ti`)
	f.Close()
	b4 := NewBus()
	a4, err := OpenAuditLog(b4, path)
	if err != nil {
		t.Fatal(err)
	}
	if a4.Seq() != 4*each+1 {
		t.Fatalf("reopened past a long record and a torn line at seq %d, want %d", a4.Seq(), 4*each+1)
	}
	b4.Close()
}
