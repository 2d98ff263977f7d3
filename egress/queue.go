package egress

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
)

// EventDropped is the event a Queue adds when it dropped events: more
// than MaxQueued waited between two Takes. Its payload is {dropped, time}.
const EventDropped = "egress.dropped"

// MaxQueued bounds the events a Queue keeps; past it the oldest go.
const MaxQueued = 4096

// Queue keeps a backend's proxy events until its next response carries
// them to the host (shared.ExecuteResponse.Events). It is safe for
// concurrent use; the zero value is ready.
type Queue struct {
	mu      sync.Mutex
	pending []shared.Event
	dropped int
}

// Add keeps ev.
func (q *Queue) Add(ev Event) {
	payload, err := json.Marshal(ev)
	if err != nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) >= MaxQueued {
		q.pending = q.pending[1:]
		q.dropped++
	}
	q.pending = append(q.pending, shared.Event{Type: ev.Type, Payload: payload})
}

// Keep logs ev on logger and keeps it (Add): a backend's proxies'
// OnEvent.
func (q *Queue) Keep(logger hclog.Logger, ev Event) {
	logger.Info("egress", "type", ev.Type, "session", ev.Session, "host", ev.Host, "port", ev.Port, "bytes_sent", ev.BytesSent, "bytes_received", ev.BytesReceived, "reason", ev.Reason)
	q.Add(ev)
}

// Take hands over the events kept so far, and an EventDropped when some
// were dropped.
func (q *Queue) Take() []shared.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.pending
	q.pending = nil
	if q.dropped > 0 {
		payload, _ := json.Marshal(map[string]any{"dropped": q.dropped, "time": time.Now().UTC()})
		evs = append(evs, shared.Event{Type: EventDropped, Payload: payload})
		q.dropped = 0
	}
	return evs
}

// Respond adds to a session call's response (resp, err) the events kept
// so far: the proxies' connections reach the host's audit log and metrics
// with the next response. A failed call leaves them for the next.
func (q *Queue) Respond(resp shared.ExecuteResponse, err error) (shared.ExecuteResponse, error) {
	if err == nil {
		resp.Events = append(resp.Events, q.Take()...)
	}
	return resp, err
}
