package egress

import (
	"encoding/json"
	"testing"
)

// A Queue hands its events over once, in order, and says how many it
// dropped past MaxQueued (the oldest).
func TestQueue(t *testing.T) {
	var q Queue
	for i := 0; i < MaxQueued+3; i++ {
		q.Add(Event{Type: EventRefused, Port: i + 1})
	}
	evs := q.Take()
	if len(evs) != MaxQueued+1 {
		t.Fatalf("%d events, want %d", len(evs), MaxQueued+1)
	}
	var first Event
	if err := json.Unmarshal(evs[0].Payload, &first); err != nil || first.Port != 4 || evs[0].Type != EventRefused {
		t.Errorf("first kept event: %+v %v", first, err)
	}
	var d struct{ Dropped int }
	if last := evs[len(evs)-1]; last.Type != EventDropped || json.Unmarshal(last.Payload, &d) != nil || d.Dropped != 3 {
		t.Errorf("last event: %s %s", last.Type, last.Payload)
	}
	if again := q.Take(); len(again) != 0 {
		t.Errorf("taken twice: %d", len(again))
	}
}
