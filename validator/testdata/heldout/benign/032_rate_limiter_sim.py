from collections import deque


class TokenBucket:
    def __init__(self, rate, capacity):
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.last = 0.0

    def allow(self, now):
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class SlidingWindow:
    def __init__(self, limit, window):
        self.limit = limit
        self.window = window
        self.hits = deque()

    def allow(self, now):
        while self.hits and self.hits[0] <= now - self.window:
            self.hits.popleft()
        if len(self.hits) < self.limit:
            self.hits.append(now)
            return True
        return False


times = args.get("times", [0, 0.1, 0.2, 0.3, 0.4, 1.0, 1.05, 2.5, 2.6, 2.7, 2.8])
tb = TokenBucket(rate=args.get("rate", 2), capacity=args.get("capacity", 3))
sw = SlidingWindow(limit=3, window=1.0)
return [{"t": t, "bucket": tb.allow(t), "window": sw.allow(t)} for t in times]
