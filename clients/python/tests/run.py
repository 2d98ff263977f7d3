"""Runs the client's tests and ends with one count line, as `make test`'s
Go steps do: ``N passed, N failed, N skipped``. With ``--record FILE
--label NAME`` it appends the counts (and skip reasons) to FILE in
internal/testsum's JSON-lines format, so `make test`'s total includes them.

    /usr/bin/python3 clients/python/tests/run.py [-v] [--record F --label L] [pattern]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unittest
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))


class _Result(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--record", default="")
    ap.add_argument("--label", default="test-python")
    ap.add_argument("pattern", nargs="?", default="test_*.py")
    opts = ap.parse_args()
    sys.path.insert(0, HERE)
    suite = unittest.defaultTestLoader.discover(HERE, pattern=opts.pattern, top_level_dir=HERE)
    runner = unittest.TextTestRunner(verbosity=2 if opts.verbose else 1, resultclass=_Result, stream=sys.stdout)
    t0 = time.monotonic()
    res = runner.run(suite)
    failed = len(res.failures) + len(res.errors) + len(res.unexpectedSuccesses)
    # A class whose setUpClass skipped counts as one skip (unittest reports it so).
    skipped = len(res.skipped)
    reasons = Counter(reason for _, reason in res.skipped)
    if reasons:
        print("skipped %d, by reason:" % skipped)
        for reason, n in sorted(reasons.items()):
            print("%6d  clients/python: %s" % (n, reason))
    print("python client (%s, %.1fs): %d passed, %d failed, %d skipped"
          % (sys.executable, time.monotonic() - t0, res.passed, failed, skipped))
    if opts.record:
        rec = {"label": opts.label, "passed": res.passed, "failed": failed, "skipped": skipped,
               "skips": [{"package": "clients/python", "reason": r, "count": n} for r, n in sorted(reasons.items())]}
        with open(opts.record, "a") as f:
            f.write(json.dumps(rec) + "\n")
    if res.testsRun == 0 and skipped == 0:
        print("python client: no tests found")
        return 1
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
