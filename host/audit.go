package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/sys/unix"
)

// DefaultAuditBuffer is how many events the audit log buffers before it
// starts dropping (and counting) them.
const DefaultAuditBuffer = 4096

// EventAuditDropped is the record the audit log writes when it had to drop
// events because writing fell behind: {count}, the number lost since the
// previous record.
const EventAuditDropped = "audit.events_dropped"

// AuditLog is a JSON-lines audit file: one Event object per line, appended
// to a file (created with mode 0600). It records
//
//   - every execution of the host's sandboxes (EventExecution) and every
//     session tool call (EventSessionToolCall), written synchronously by
//     Record before the call returns, so none is lost;
//   - the events of a Bus (tool spawns and invocations, a backend's library
//     events), written from a goroutine of its own through a bounded
//     subscription, so a slow disk never slows down tool calls; bus events
//     it cannot keep up with are dropped, counted, and reported by an
//     "audit.events_dropped" record.
//
// Every record's seq is the file's own sequence: one more than the last
// record in the file, whichever process wrote it. Writes take an exclusive
// flock(2) on the file and, when the file grew since this log's last write
// (another process appended), read the last record's seq again first; so
// processes sharing one file, on a filesystem with working flock, keep one
// gapless, strictly increasing sequence. A process that ignores the lock (or
// a filesystem without flock) can still produce duplicates.
//
// A Host opens one when its policy has a top-level `audit_log = "path"`
// (relative to the policy file) and closes it in Host.Close.
type AuditLog struct {
	path string
	sub  *Subscription
	done chan struct{}

	mu  sync.Mutex // guards what follows, and orders this process's writes
	f   *os.File
	err error
	n   uint64
	seq uint64 // the seq of the last record in the file
	end int64  // the file's size after this log's last write; -1: unknown
}

// OpenAuditLog appends the events of bus to the file at path, creating it
// (and its directory) if needed, and continues the sequence of the records
// already in it. Close flushes and closes it; closing the bus does too.
func OpenAuditLog(bus *Bus, path string) (*AuditLog, error) {
	if bus == nil {
		return nil, fmt.Errorf("audit log %s: nil bus", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	a := &AuditLog{path: path, f: f, end: -1}
	// Read the last seq now, so a file that cannot be read fails at open.
	if err := a.locked(func() error { return nil }); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	a.sub, a.done = bus.Subscribe(DefaultAuditBuffer), make(chan struct{})
	go a.run()
	bus.onClose(a.Close)
	return a, nil
}

// Path returns the file the log appends to.
func (a *AuditLog) Path() string { return a.path }

// Written returns how many records the log has written.
func (a *AuditLog) Written() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// Seq returns the seq of the last record in the file as this log last saw
// it (0 for an empty file).
func (a *AuditLog) Seq() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seq
}

// Dropped returns how many bus events the log lost because it fell behind.
func (a *AuditLog) Dropped() uint64 { return a.sub.Dropped() }

// Record writes ev now, numbered with the file's next seq (ev.Seq is
// replaced; a zero ev.Time is set to now). It is what the host calls for
// every execution.
func (a *AuditLog) Record(ev Event) error {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	return a.write(ev)
}

func (a *AuditLog) run() {
	defer close(a.done)
	var reported uint64
	for ev := range a.sub.C {
		if d := a.sub.Dropped(); d > reported {
			a.write(Event{Time: time.Now().UTC(), Type: EventAuditDropped, Payload: map[string]any{"count": d - reported}})
			reported = d
		}
		a.write(ev)
	}
	if d := a.sub.Dropped(); d > reported {
		a.write(Event{Time: time.Now().UTC(), Type: EventAuditDropped, Payload: map[string]any{"count": d - reported}})
	}
}

// locked runs fn holding a.mu and the file's flock, after bringing a.seq up
// to date with the file.
func (a *AuditLog) locked(fn func() error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return fmt.Errorf("audit log %s is closed", a.path)
	}
	fd := int(a.f.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	st, err := a.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() != a.end {
		seq, err := lastSeq(a.f, st.Size())
		if err != nil {
			return err
		}
		a.seq, a.end = seq, st.Size()
	}
	return fn()
}

func (a *AuditLog) write(ev Event) error {
	err := a.locked(func() error {
		ev.Seq = a.seq + 1
		b, err := json.Marshal(ev)
		if err != nil {
			b, _ = json.Marshal(Event{Seq: ev.Seq, Time: ev.Time, Type: ev.Type, Sandbox: ev.Sandbox,
				Payload: map[string]any{"marshal_error": err.Error()}})
		}
		b = append(b, '\n')
		n, err := a.f.Write(b) // one write per record: O_APPEND keeps lines whole
		a.end += int64(n)
		if err != nil {
			a.end = -1 // a partial line: read the file again next time
			return err
		}
		a.seq, a.n = ev.Seq, a.n+1
		return nil
	})
	if err != nil {
		a.mu.Lock()
		if a.err == nil {
			a.err = err
		}
		a.mu.Unlock()
	}
	return err
}

// lastSeq returns the seq of the last complete record of f (size bytes):
// 0 when there is none. It reads backwards from the end, a block at a time.
func lastSeq(f *os.File, size int64) (uint64, error) {
	const block = 4096
	var tail []byte
	end := size
	for end > 0 {
		start := max(end-block, 0)
		buf := make([]byte, end-start)
		if _, err := f.ReadAt(buf, start); err != nil {
			return 0, fmt.Errorf("read: %w", err)
		}
		tail = append(buf, tail...)
		end = start
		// The last complete line lies between the last two newlines (a
		// partial line after the final newline is skipped).
		body := tail
		if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
			body = body[:i]
		} else {
			continue
		}
		for len(body) > 0 {
			i := bytes.LastIndexByte(body, '\n')
			if i < 0 && end > 0 {
				break // the line starts before what was read
			}
			line := body[i+1:]
			var rec struct {
				Seq uint64 `json:"seq"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Seq > 0 {
				return rec.Seq, nil
			}
			if i < 0 {
				return 0, nil
			}
			body = body[:i] // not a record: try the line before
		}
	}
	return 0, nil
}

// Close stops the subscription, writes what is still buffered, syncs and
// closes the file. It returns the first write error, if any.
func (a *AuditLog) Close() error {
	a.sub.Close()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return a.err
	}
	if err := a.f.Sync(); err != nil && a.err == nil {
		a.err = err
	}
	if err := a.f.Close(); err != nil && a.err == nil {
		a.err = err
	}
	a.f = nil
	if a.err != nil {
		return fmt.Errorf("audit log %s: %w", a.path, a.err)
	}
	return nil
}

// AuditLogPath returns the policy's audit_log resolved against the policy
// file's directory, or "" when the policy sets none.
func (c *Config) AuditLogPath() string { return c.resolvePath(c.AuditLog) }

// Bus returns the host's event bus. Tool factories built with it publish
// their events there, and the audit log (audit_log in the policy) records
// them. It is closed by Host.Close.
func (h *Host) Bus() *Bus { return h.bus }

// AuditLog returns the host's audit log, nil when the policy sets no
// audit_log.
func (h *Host) AuditLog() *AuditLog { return h.audit }

// newHostBus creates the bus of a host and, when the policy asks for one,
// its audit log. A log that cannot be opened is a diagnostic on audit_log.
func newHostBus(cfg *Config) (*Bus, *AuditLog, error) {
	bus := NewBus()
	var audit *AuditLog
	if p := cfg.AuditLogPath(); p != "" {
		var err error
		if audit, err = OpenAuditLog(bus, p); err != nil {
			return nil, nil, &DiagnosticsError{Files: cfg.Files, Diagnostics: hcl.Diagnostics{
				errDiag(cfg.AuditLogRange, "Cannot open audit log", err.Error()+"."),
			}}
		}
	}
	return bus, audit, nil
}
