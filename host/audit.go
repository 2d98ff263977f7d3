package host

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// DefaultAuditBuffer is how many events the audit log buffers before it
// starts dropping (and counting) them.
const DefaultAuditBuffer = 4096

// EventAuditDropped is the record the audit log writes when it had to drop
// events because writing fell behind: {count}, the number lost since the
// previous record.
const EventAuditDropped = "audit.events_dropped"

// AuditLog is a JSON-lines sink for the events of a Bus: one Event object
// per line, appended to a file (created with mode 0600). It writes from a
// goroutine of its own through a bounded subscription, so a slow disk never
// slows down tool calls; events it cannot keep up with are dropped, counted,
// and reported by an "audit.events_dropped" record.
//
// A Host opens one when its policy has a top-level `audit_log = "path"`
// (relative to the policy file) and closes it in Host.Close.
type AuditLog struct {
	path string
	f    *os.File
	sub  *Subscription
	done chan struct{}
	mu   sync.Mutex
	err  error
	n    uint64
}

// OpenAuditLog appends the events of bus to the file at path, creating it
// (and its directory) if needed. Close flushes and closes it; closing the
// bus does too.
func OpenAuditLog(bus *Bus, path string) (*AuditLog, error) {
	if bus == nil {
		return nil, fmt.Errorf("audit log %s: nil bus", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	a := &AuditLog{path: path, f: f, sub: bus.Subscribe(DefaultAuditBuffer), done: make(chan struct{})}
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

// Dropped returns how many events the log lost because it fell behind.
func (a *AuditLog) Dropped() uint64 { return a.sub.Dropped() }

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

func (a *AuditLog) write(ev Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(Event{Seq: ev.Seq, Time: ev.Time, Type: ev.Type, Sandbox: ev.Sandbox,
			Payload: map[string]any{"marshal_error": err.Error()}})
	}
	b = append(b, '\n')
	_, err = a.f.Write(b) // one write per record: O_APPEND keeps lines whole
	a.mu.Lock()
	if err != nil && a.err == nil {
		a.err = err
	}
	if err == nil {
		a.n++
	}
	a.mu.Unlock()
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

// newHostBus creates the bus of a host and, when the policy asks for one,
// its audit log. A log that cannot be opened is a diagnostic on audit_log.
func newHostBus(cfg *Config) (*Bus, error) {
	bus := NewBus()
	if p := cfg.AuditLogPath(); p != "" {
		if _, err := OpenAuditLog(bus, p); err != nil {
			return nil, &DiagnosticsError{Files: cfg.Files, Diagnostics: hcl.Diagnostics{
				errDiag(cfg.AuditLogRange, "Cannot open audit log", err.Error()+"."),
			}}
		}
	}
	return bus, nil
}
