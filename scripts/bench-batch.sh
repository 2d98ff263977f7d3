#!/usr/bin/env bash
# The evaluator's loop, measured both ways in one run: N distinct candidate
# bodies through one `orqest-sandbox run --batch` (one host, one plugin, a
# warm fork-server) against one `orqest-sandbox run` process per candidate.
# Prints the cost per candidate of each and their ratio.
set -euo pipefail
cli=${1:-bin/orqest-sandbox}
n=${BATCH_N:-300}
per_call=${PER_CALL_N:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for i in $(seq "$n"); do
	printf '{"id":"c%d","code":"def score(x):\\n    return x * %d + len(str(x))\\nreturn [score(v) for v in args[\\"xs\\"]]","args":{"xs":[1,2,3,4,5,6,7,8]}}\n' "$i" "$i"
done >"$tmp/batch.jsonl"

now() { date +%s%N; }
t0=$(now)
"$cli" run --batch "$tmp/batch.jsonl" >"$tmp/out.jsonl"
t1=$(now)
got=$(grep -c '"success":true' "$tmp/out.jsonl" || true)
[ "$got" -eq "$n" ] || { echo "bench-batch: $got of $n candidates succeeded" >&2; exit 1; }

t2=$(now)
for i in $(seq "$per_call"); do
	"$cli" run --args '{"xs":[1,2,3,4,5,6,7,8]}' -e "def score(x):
    return x * $i + len(str(x))
return [score(v) for v in args['xs']]" >/dev/null
done
t3=$(now)

awk -v b=$((t1 - t0)) -v n="$n" -v p=$((t3 - t2)) -v m="$per_call" 'BEGIN {
	batch = b / n / 1e6; call = p / m / 1e6
	printf "%-28s %10s %8s\n", "evaluator loop", "ms/cand", "ratio"
	printf "%-28s %10.2f %8s\n", "run per candidate (" m ")", call, "1.0x"
	printf "%-28s %10.2f %7.1fx\n", "run --batch (" n ")", batch, call / batch
}'
