package host

import (
	"sync"
	"sync/atomic"
	"time"
)

// Event types published on a Bus by the ToolFactory, with their payloads:
//
//	tool.spawned                 {tool_name}                       a spec passed every check
//	tool.spawn_failed            {tool_name, reason}               a spec was rejected (name, schema, imports, validation)
//	sandbox.validation_rejected  {tool_name, reason}               the same, when the static checks rejected the implementation
//	tool.invocation_completed    {tool_name, duration_ms}          a call ran and succeeded
//	tool.invocation_failed       {tool_name, error, duration_ms}   a call failed (bad arguments, user-code failure, infrastructure)
const (
	EventToolSpawned         = "tool.spawned"
	EventToolSpawnFailed     = "tool.spawn_failed"
	EventValidationRejected  = "sandbox.validation_rejected"
	EventInvocationCompleted = "tool.invocation_completed"
	EventInvocationFailed    = "tool.invocation_failed"
	// EventExecution is the audit record of one Sandbox.Execute (every
	// path: direct, tools, run_python, batch, CLI): {code_sha256, caller,
	// user, session, plugin, tier, outcome, error_kind, error_class,
	// duration_ms, findings, tool_name}. It is written to the audit log
	// directly, not published on the bus.
	EventExecution = "sandbox.execution"
	// EventSessionToolCall is the audit record of one
	// Sandbox.CallSessionTool: {tool_name, caller, session, plugin,
	// outcome, error_class, duration_ms}. Like EventExecution it is written
	// to the audit log directly.
	EventSessionToolCall      = "sandbox.session_tool_call"
	DefaultSubscriptionBuffer = 256
)

// Event is one occurrence on a Bus. It is also the record the audit log
// writes, one JSON object per line.
type Event struct {
	// Seq numbers the events of a bus from 1, in publication order; a gap
	// seen by a subscriber means it dropped events.
	Seq uint64 `json:"seq"`
	// Time is when the event was published.
	Time time.Time `json:"time"`
	// Type is one of the Event* constants, e.g. "tool.spawned".
	Type string `json:"event"`
	// Sandbox names the sandbox involved, when there is one.
	Sandbox string `json:"sandbox,omitempty"`
	// Payload carries the event's fields (tool_name, reason, error,
	// duration_ms).
	Payload map[string]any `json:"payload"`
}

// ToolName returns the payload's tool_name ("" when absent).
func (e Event) ToolName() string { s, _ := e.Payload["tool_name"].(string); return s }

// Bus is the host-side event bus: publishers never block, every subscriber
// has its own bounded buffer, and an event that does not fit in a
// subscriber's buffer is dropped for that subscriber and counted (see
// Subscription.Dropped and Bus.Dropped). A nil *Bus is valid and discards
// everything, so a ToolFactory may be built without one. A Bus is safe for
// concurrent use.
type Bus struct {
	mu      sync.RWMutex
	subs    map[*Subscription]struct{}
	closed  bool
	seq     atomic.Uint64
	dropped atomic.Uint64
	closers []func() error
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Subscription is one subscriber of a Bus. Receive from C; C is closed by
// Close (and when the bus closes).
type Subscription struct {
	// C delivers the events the subscription asked for.
	C <-chan Event

	bus     *Bus
	ch      chan Event
	types   map[string]bool
	dropped atomic.Uint64
	once    sync.Once
}

// Subscribe registers a subscriber with a buffer of buffer events
// (DefaultSubscriptionBuffer when buffer <= 0) for the given event types
// (all when none are given). A subscriber that falls behind by more than its
// buffer loses events; it never slows down a publisher.
func (b *Bus) Subscribe(buffer int, types ...string) *Subscription {
	if buffer <= 0 {
		buffer = DefaultSubscriptionBuffer
	}
	ch := make(chan Event, buffer)
	s := &Subscription{C: ch, ch: ch, bus: b}
	if len(types) > 0 {
		s.types = map[string]bool{}
		for _, t := range types {
			s.types[t] = true
		}
	}
	if b == nil {
		close(ch)
		return s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(ch)
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// SubscribeFunc calls fn for every event (of the given types, or all) from
// a goroutine of its own, through a subscription with the given buffer. The
// returned cancel function unsubscribes and waits until fn has returned for
// the events already delivered.
func (b *Bus) SubscribeFunc(buffer int, fn func(Event), types ...string) (cancel func()) {
	s := b.Subscribe(buffer, types...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range s.C {
			fn(ev)
		}
	}()
	return func() {
		s.Close()
		<-done
	}
}

// Dropped returns how many events this subscriber lost because its buffer
// was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close unsubscribes and closes C. Events already buffered stay readable.
func (s *Subscription) Close() {
	s.once.Do(func() {
		if s.bus == nil {
			return
		}
		s.bus.mu.Lock()
		_, ok := s.bus.subs[s]
		delete(s.bus.subs, s)
		s.bus.mu.Unlock()
		if ok {
			close(s.ch)
		}
	})
}

// Publish delivers ev to every interested subscriber without blocking. It
// fills in Seq and, when zero, Time.
func (b *Bus) Publish(ev Event) {
	if b == nil {
		return
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return
	}
	ev.Seq = b.seq.Add(1)
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	for s := range b.subs {
		if s.types != nil && !s.types[ev.Type] {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			s.dropped.Add(1)
			b.dropped.Add(1)
		}
	}
}

// Emit publishes an event of type typ with the given payload.
func (b *Bus) Emit(typ, sandbox string, payload map[string]any) {
	b.Publish(Event{Type: typ, Sandbox: sandbox, Payload: payload})
}

// Published returns how many events the bus has published.
func (b *Bus) Published() uint64 {
	if b == nil {
		return 0
	}
	return b.seq.Load()
}

// Dropped returns how many deliveries failed across all subscribers because
// a buffer was full.
func (b *Bus) Dropped() uint64 {
	if b == nil {
		return 0
	}
	return b.dropped.Load()
}

// onClose registers f to run (in reverse order) when the bus closes, after
// every subscription has been closed.
func (b *Bus) onClose(f func() error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closers = append(b.closers, f)
}

// Close closes every subscription, then the sinks attached to the bus (the
// audit log flushes what it buffered). Publish is a no-op afterwards.
func (b *Bus) Close() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	subs := b.subs
	b.subs = map[*Subscription]struct{}{}
	closers := b.closers
	b.closers = nil
	b.mu.Unlock()
	for s := range subs {
		s.once.Do(func() { close(s.ch) })
	}
	var first error
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](); err != nil && first == nil {
			first = err
		}
	}
	return first
}
