import re
from collections import Counter, defaultdict
from datetime import datetime

logs = args.get("logs", """2024-05-01 10:00:01 INFO  [web] request id=17 path=/home status=200 ms=12
2024-05-01 10:00:02 WARN  [web] slow request id=18 path=/search status=200 ms=950
2024-05-01 10:00:05 ERROR [db] connection lost id=19
2024-05-01 10:00:06 INFO  [web] request id=20 path=/home status=500 ms=33
2024-05-01 10:01:00 DEBUG [cache] miss key=user:1
garbage line
2024-05-01 10:02:30 ERROR [web] Traceback (most recent call last): id=21
""")
line_re = re.compile(r"^(?P<ts>\S+ \S+) (?P<level>[A-Z]+)\s+\[(?P<logger>\w+)\] (?P<msg>.*)$")
kv_re = re.compile(r"(\w+)=(\S+)")
levels = Counter()
by_logger = defaultdict(int)
slow, errors, unparsed = [], [], 0
first = last = None
for line in logs.splitlines():
    m = line_re.match(line)
    if not m:
        unparsed += 1
        continue
    ts = datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S")
    first = first or ts
    last = ts
    level = m["level"]
    levels[level] += 1
    by_logger[m["logger"]] += 1
    fields = dict(kv_re.findall(m["msg"]))
    if int(fields.get("ms", 0)) > 500:
        slow.append(fields.get("id"))
    if level == "ERROR" or fields.get("status", "200").startswith("5"):
        errors.append({"id": fields.get("id"), "logger": m["logger"], "traceback": "Traceback" in m["msg"]})
return {
    "levels": dict(levels),
    "loggers": dict(by_logger),
    "slow": slow,
    "errors": errors,
    "unparsed": unparsed,
    "span_s": (last - first).total_seconds() if first else 0,
}
