package main

import (
	"fmt"
	"strings"
)

// newBodyImports are the modules a generated new body imports: what an
// evaluator's candidate typically uses.
var newBodyImports = []string{"json", "re", "math", "collections", "itertools", "functools", "datetime", "statistics"}

// newBodyArgs are the args every generated new body reads.
var newBodyArgs = map[string]any{
	"text": "the quick brown fox jumps over the lazy dog while the cat sleeps by the door",
	"xs":   []int{3, 1, 4, 1, 5, 9, 2, 6, 5, 3},
}

// newBodyTemplate is a ~1.3 KB candidate of the shape an LLM writes: helper
// functions, a decorator, comprehensions, a Counter and a defaultdict,
// statistics, dates. SCALE and the helper suffix make each body's text (and
// so its hash: nothing of it is warm) distinct.
const newBodyTemplate = `import json, re, math
from collections import Counter, defaultdict
from itertools import accumulate, islice
from functools import lru_cache, reduce
from datetime import date, timedelta
import statistics

SCALE = @N@

def tokenize_@N@(text):
    return [w.lower() for w in re.findall(r"[A-Za-z]+", text)]

@lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def summarize(xs):
    running = list(accumulate(xs))
    return {
        "mean": statistics.mean(xs),
        "stdev": round(statistics.pstdev(xs), 4),
        "running_max": max(running),
        "product": reduce(lambda a, b: a * b % 1000003, xs, 1),
    }

def bucket(words):
    groups = defaultdict(list)
    for w in words:
        groups[len(w)].append(w)
    return {str(k): sorted(v)[:3] for k, v in sorted(groups.items())}

words = tokenize_@N@(args["text"])
counts = Counter(words)
top = [w for w, _ in counts.most_common(3)]
start = date(2024, 1, 1) + timedelta(days=SCALE % 365)
stats = summarize([x * SCALE for x in args["xs"]])
result = {
    "top": top,
    "buckets": bucket(words),
    "stats": stats,
    "fib": fib(SCALE % 25),
    "angle": round(math.atan2(SCALE, len(words) or 1), 6),
    "first": list(islice(words, 2)),
    "day": start.isoformat(),
}
return json.loads(json.dumps(result))
`

// newBody returns the i-th generated body (distinct for every i).
func newBody(i int) string {
	return strings.ReplaceAll(newBodyTemplate, "@N@", fmt.Sprint(i+1))
}
