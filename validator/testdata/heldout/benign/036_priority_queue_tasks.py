import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any


@dataclass(order=True)
class Task:
    priority: int
    seq: int
    name: str = field(compare=False)
    payload: Any = field(default=None, compare=False)


class Scheduler:
    def __init__(self):
        self._heap = []
        self._counter = itertools.count()
        self._removed = set()

    def push(self, name, priority, payload=None):
        t = Task(priority, next(self._counter), name, payload)
        heapq.heappush(self._heap, t)
        return t

    def cancel(self, name):
        self._removed.add(name)

    def pop(self):
        while self._heap:
            t = heapq.heappop(self._heap)
            if t.name not in self._removed:
                return t
        raise IndexError("empty")

    def __len__(self):
        return sum(1 for t in self._heap if t.name not in self._removed)


s = Scheduler()
for name, prio in args.get("tasks", [["write", 3], ["test", 2], ["deploy", 5], ["lint", 1], ["docs", 3]]):
    s.push(name, prio)
for name in args.get("cancel", ["docs"]):
    s.cancel(name)
order = []
while len(s):
    order.append(s.pop().name)
return {"order": order}
