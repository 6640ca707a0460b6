#!/usr/bin/env python3
"""What each end-to-end test file costs: the durations e2e/run.sh recorded in its last run
(setup, call and teardown of every test), summed per file and backend, longest first, as a
Markdown table for docs/ci.md. A backend is the test's `[emulator]`/`[real]` parameter (the
backends marker always adds one; a test with neither uses the emulator; the node tier,
e2e/tests/node, its node); the worker time is what the suite costs the 2 workers
together, so the stage's wall time is about half of it. Only the tests the suite has now
count (pytest collects them first): the file keeps the durations of tests since removed.

With --seed, writes instead e2e/durations-seed.json: the whole seconds of every test of the
suite that took one or more, the order a machine's first run uses (e2e/conftest.py).

Usage: scripts/e2e-cost.py [DURATIONS_JSON] [--top N] [--seed]
       (default: $E2E_DURATIONS, else ~/.cache/certctl/e2e-durations.json)
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = os.path.join(REPO, "e2e", "durations-seed.json")
BACKEND = re.compile(r"\[(?:[^\]]*-)?(emulator|real|node)(?:-[^\]]*)?\]$")


def backend_of(nodeid):
    if nodeid.startswith("e2e/tests/node/"):
        return "node"  # the node tier runs on its node alone, unparameterised
    match = BACKEND.search(nodeid)
    return match.group(1) if match else "emulator"


def collected():
    """The node IDs of the suite as it is now."""
    proc = subprocess.run(["/usr/bin/python3", "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "e2e"], cwd=REPO, capture_output=True,
                          text=True, check=False)
    ids = {line.strip() for line in proc.stdout.splitlines() if "::" in line}
    if not ids:
        sys.exit(f"e2e-cost: pytest collected nothing:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return ids


def main():
    default = os.environ.get("E2E_DURATIONS") or os.path.expanduser(
        "~/.cache/certctl/e2e-durations.json")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("durations", nargs="?", default=default)
    parser.add_argument("--top", type=int, default=0, help="only the N costliest rows")
    parser.add_argument("--seed", action="store_true",
                        help=f"write {os.path.relpath(SEED, REPO)} instead of the table")
    args = parser.parse_args()
    try:
        with open(args.durations, encoding="utf-8") as f:
            durations = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"e2e-cost: cannot read {args.durations}: {e}")

    now = collected()
    if args.seed:
        seed = {nodeid: round(duration) for nodeid, duration in durations.items()
                if nodeid in now and duration >= 1}
        with open(SEED, "w", encoding="utf-8") as f:
            json.dump(seed, f, indent=0, sort_keys=True)
            f.write("\n")
        print(f"e2e-cost: {len(seed)} tests of one second or more in {SEED}")
        return
    untimed = len(now - durations.keys())
    seconds = collections.Counter()
    tests = collections.Counter()
    for nodeid, duration in durations.items():
        if nodeid not in now:
            continue
        key = (nodeid.split("::", 1)[0], backend_of(nodeid))
        seconds[key] += duration
        tests[key] += 1
    total = sum(seconds.values())
    rows = seconds.most_common(args.top or None)
    print("| file | backend | tests | worker seconds | share |")
    print("|---|---|---:|---:|---:|")
    for (path, backend), spent in rows:
        print(f"| `{path}` | {backend} | {tests[(path, backend)]} | {spent:.0f} | "
              f"{100 * spent / total:.1f} % |")
    by_backend = collections.Counter()
    for (_, backend), spent in seconds.items():
        by_backend[backend] += spent
    parts = ", ".join(f"{b} {s:.0f} s" for b, s in by_backend.most_common())
    print(f"\n{sum(tests.values())} tests, {total:.0f} worker seconds ({parts}); on 2 workers "
          f"about {total / 2 / 60:.1f} min of wall time"
          + (f"; {untimed} tests not timed yet" if untimed else ""))


if __name__ == "__main__":
    main()
