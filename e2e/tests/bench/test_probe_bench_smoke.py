"""bench/probe_bench.py --quick as a smoke test: the probe-latency benchmark starts its
emulator and `certctl run`, goes through every load and reports every figure. It asserts
that the driver works (exit 0, complete figures, probes answered), never how fast: the
figures belong in bench/README.md."""

import json
import math
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
DRIVER = os.path.join(REPO, "bench", "probe_bench.py")
LOADS = ("baseline", "2 slowloris", "50 slow", "1000 idle", "1000 idle + 50 slow + 2 slowloris")


@pytest.mark.time_limit(60)
def test_quick_run_reports_every_load(certctl_binary, tmp_path):
    raw = tmp_path / "figures.json"
    proc = subprocess.run(["/usr/bin/python3", DRIVER, "--certctl", certctl_binary, "--quick",
                           "--json", str(raw)],
                          capture_output=True, text=True, timeout=55, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(raw.read_text())
    assert tuple(figures["loads"]) == LOADS
    for name, load in figures["loads"].items():
        for path in ("/healthz", "/readyz"):
            seconds = load["paths"][path]["seconds"]
            assert len(seconds) + load["paths"][path]["failed"] == figures["probes"], name
            assert seconds and all(math.isfinite(s) and s > 0 for s in seconds), (name, path)
        assert name in proc.stdout
    assert "p99 ratio" in proc.stdout
