from enum import Enum


class State(Enum):
    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


class TransitionError(Exception):
    def __init__(self, state, event):
        super().__init__(f"cannot {event} while {state.value}")
        self.state = state
        self.event = event


TRANSITIONS = {
    (State.IDLE, "start"): State.RUNNING,
    (State.RUNNING, "pause"): State.PAUSED,
    (State.PAUSED, "resume"): State.RUNNING,
    (State.RUNNING, "stop"): State.STOPPED,
    (State.PAUSED, "stop"): State.STOPPED,
}


class Machine:
    def __init__(self):
        self.state = State.IDLE
        self.trace = [self.state.value]

    def fire(self, event):
        key = (self.state, event)
        if key not in TRANSITIONS:
            raise TransitionError(self.state, event)
        self.state = TRANSITIONS[key]
        self.trace.append(self.state.value)


m = Machine()
errors = []
for ev in args.get("events", ["start", "pause", "pause", "resume", "stop", "start"]):
    try:
        m.fire(ev)
    except TransitionError as e:
        errors.append({"event": ev, "error": str(e), "kind": type(e).__name__})
return {"final": m.state.name, "trace": m.trace, "errors": errors}
