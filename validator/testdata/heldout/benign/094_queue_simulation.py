import random
from collections import deque
import statistics
rng = random.Random(args.get("seed", 42))
arrivals = sorted(rng.uniform(0, 60) for _ in range(int(args.get("customers", 30))))
servers = [0.0] * int(args.get("servers", 2))
waits = []
for t in arrivals:
    i = min(range(len(servers)), key=servers.__getitem__)
    start = max(t, servers[i])
    waits.append(start - t)
    servers[i] = start + rng.expovariate(1 / 3)
return {"mean_wait": round(statistics.mean(waits), 3), "max_wait": round(max(waits), 3), "served": len(waits)}
