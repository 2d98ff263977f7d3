#!/usr/bin/env bash
# The demo `make demo` runs: the CLI on the embedded default policy (run from
# an empty directory, so no config.hcl applies), then on the example policy.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CLI="$ROOT/bin/orqest-sandbox"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

step() { printf "\n\033[1m$"; printf " %q" "$@"; printf "\033[0m\n"; }
run() { step "$@"; "$@"; echo "(exit $?)"; }

echo "== embedded default policy (no config.hcl here) =="
run "$CLI" version
run "$CLI" plugins list
run "$CLI" run --json -e 'return 1+1'
run "$CLI" run --allow re --args '{"text":"a1 b22 c333"}' -e 'import re
return re.findall(r"\d+", args["text"])'
run "$CLI" call -e 'def add(a, b):
    return a + b' --return 'add(2, 3)'
run "$CLI" validate -e 'import os
os.system("id")'
run "$CLI" run --json --timeout 500ms -e 'while True: pass'
run "$CLI" run --json --memory 64 -e 'x = bytearray(2 * 1024**3)
return len(x)'
run "$CLI" run -e 'return {"sum": sum(args["xs"]), "squares": [x * x for x in args["xs"]]}' --args '{"xs":[1,2,3]}'

echo
echo "== example policy: $ROOT/config.hcl =="
run "$CLI" policy check "$ROOT/config.hcl"
run "$CLI" run --config "$ROOT/config.hcl" --sandbox tier1 -e 'import math, collections
c = collections.Counter("mississippi")
return {"top": c.most_common(2), "pi": round(math.pi, 5)}'
run "$CLI" run --config "$ROOT/config.hcl" --sandbox strict -e 'import math
return math.pi'
exit 0
