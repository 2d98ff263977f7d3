from enum import Enum, IntEnum, auto


class Status(Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"

    @classmethod
    def parse(cls, value):
        try:
            return cls(value.lower())
        except ValueError:
            return cls.PENDING

    @property
    def terminal(self):
        return self in (Status.DONE, Status.FAILED)


class Priority(IntEnum):
    LOW = auto()
    MEDIUM = auto()
    HIGH = auto()


jobs = args.get("jobs", [
    {"id": "a", "status": "DONE", "priority": "HIGH"},
    {"id": "b", "status": "running", "priority": "LOW"},
    {"id": "c", "status": "bogus", "priority": "MEDIUM"},
    {"id": "d", "status": "failed", "priority": "HIGH"},
])
out = []
for job in jobs:
    st = Status.parse(job.get("status", ""))
    pr = Priority[job.get("priority", "LOW")]
    out.append({"id": job["id"], "status": st.value, "terminal": st.terminal, "priority": int(pr)})
out.sort(key=lambda j: (-j["priority"], j["id"]))
return {"jobs": out, "statuses": [s.name for s in Status]}
