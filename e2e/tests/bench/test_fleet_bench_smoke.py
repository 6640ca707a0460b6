"""bench/fleet/run.py --quick --columns certctl as a smoke test: the fleet benchmark starts a
real kube-apiserver, creates its small fleet, runs `certctl controller` through start, steady
window, drift and restart, and reports every figure. It asserts what the figures must say
whatever the machine (every Secret issued, every caBundle holding its Secret's CA when read
back, no write in the steady window, every wiped caBundle repaired by certctl's own patches,
nothing written on a restart), never how fast: the figures belong in bench/fleet/README.md.
The cainjector column is left out: it builds a Go program on first use."""

import json
import math
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
DRIVER = os.path.join(REPO, "bench", "fleet", "run.py")


def positive(value):
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_quick_run_serves_the_fleet_and_then_writes_nothing(certctl_binary, tmp_path):
    raw = tmp_path / "figures.json"
    proc = subprocess.run(["/usr/bin/python3", DRIVER, "--certctl", certctl_binary, "--quick",
                           "--columns", "certctl", "--json", str(raw)],
                          capture_output=True, text=True, timeout=55, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(raw.read_text())
    sizes = figures["sizes"]
    certctl = figures["columns"]["certctl"]
    assert "failed" not in certctl, certctl["failed"]

    # Start: every Secret issued as certctl issues them, every caBundle its Secret's ca.crt.
    assert positive(certctl["issued_s"]) and positive(certctl["injected_s"]), certctl
    start = certctl["start_verified"]
    assert start["secrets"] == start["secrets_valid"] == sizes["services"], start
    assert start["configurations"] == sizes["configurations"], start
    assert start["bytes_equal"] == sizes["configurations"], start
    writes = certctl["start_requests"]["by_resource"]
    assert writes.get("create secrets") == sizes["services"], writes
    # One patch per configuration (each has one entry); nothing else among the targets.
    assert sum(n for what, n in writes.items() if what.startswith("patch ") and
               what.endswith("webhookconfigurations")) == sizes["configurations"], writes

    # Steady: nothing written, nothing changed, the six watches open.
    steady = certctl["steady_requests"]
    assert steady["writes"] == 0, steady
    assert certctl["steady_objects_changed"] == 0, certctl
    assert certctl["steady_open_watches"] == 6, certctl
    assert positive(certctl["steady_rss_kib"]), certctl

    # Drift: every wiped caBundle repaired, by certctl's own patches.
    assert certctl["drift_n"] == sizes["drift"], certctl
    assert positive(certctl["drift_s"]), certctl
    repairs = certctl["drift_requests"]["by_resource"]
    assert sum(n for what, n in repairs.items() if what.startswith("patch ") and
               what.endswith("webhookconfigurations")) == sizes["drift"], repairs

    # Restart: verified from its own metrics, all still in place, nothing written.
    assert positive(certctl["restart_s"]), certctl
    assert certctl["restart_verified"]["bytes_equal"] == sizes["configurations"], certctl
    assert certctl["restart_requests"]["writes"] == 0, certctl["restart_requests"]

    for text in ("caBundles injected", "steady: writes", "drift:", "restart: SIGKILL to all "
                 "verified", "Targets, certctl:"):
        assert text in proc.stdout, (text, proc.stdout)
