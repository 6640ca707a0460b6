"""bench/run_bench.py --quick as a smoke test: the driver of the `certctl run` benchmarks
starts its emulators and the binary under test, goes through every scenario and reports
every figure. It asserts that the driver works (exit 0, complete and consistent figures,
every selected configuration injected), never how fast anything was: timing in tests is
forbidden, the figures belong in bench/README.md."""

import json
import math
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
DRIVER = os.path.join(REPO, "bench", "run_bench.py")


def finite_positive(values):
    return bool(values) and all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0
                                for v in values)


@pytest.mark.time_limit(120)
def test_quick_run_reports_every_scenario(certctl_binary, tmp_path):
    raw = tmp_path / "figures.json"
    proc = subprocess.run(["/usr/bin/python3", DRIVER, "--certctl", certctl_binary, "--quick",
                           "--json", str(raw)],
                          capture_output=True, text=True, timeout=110, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(raw.read_text())
    sizes = figures["sizes"]

    start = figures["start"]
    for key in ("cold", "cold_file", "restart", "restart_file", "replica", "replica_file",
                "check", "get"):
        assert len(start[key]) == sizes["runs"], key
        assert finite_positive(start[key]), (key, start[key])

    assert set(figures["repair"]) == {"spaced", "burst"}
    for regime, series in figures["repair"].items():
        assert len(series["repair"]) == len(series["rtt"]) == sizes["repairs"], regime
        assert finite_positive(series["repair"]) and finite_positive(series["rtt"]), series
        # certctl wrote each restored bundle back itself: one PATCH per wipe at least.
        assert series["certctl_requests"].get("patch", 0) >= sizes["repairs"], series

    memory = figures["memory"]
    for key in ("ready", "repaired"):
        assert finite_positive([memory[key][k] for k in ("VmRSS", "VmHWM", "RssAnon",
                                                         "RssFile")]), memory
    assert finite_positive([memory["check_peak_kib"], memory["version_peak_kib"]]), memory

    selector = figures["selector"]
    assert selector["configs"] == sizes["configs"]
    assert len(selector["ready"]) == sizes["selector_runs"]
    assert selector["writes"] == [sizes["configs"]] * sizes["selector_runs"], selector
    assert finite_positive(selector["ready"] + selector["list"] + selector["patches"])

    unrelated = figures["unrelated"]
    assert unrelated["secrets"] == sizes["secrets"]
    for state in ("empty", "loaded"):
        assert finite_positive(list(unrelated[state].values())), unrelated

    # The table names every scenario and its baseline.
    for text in ("cold start to /readyz 200", "baseline: certctl check", "repair, ",
                 "baseline: the PATCH sent to its own watch event", "VmRSS / VmHWM",
                 "configurations by selector", "baseline: one LIST",
                 "unrelated Secrets", "baseline: the same on the empty cluster"):
        assert text in proc.stdout, (text, proc.stdout)
