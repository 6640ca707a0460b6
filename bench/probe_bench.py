#!/usr/bin/python3
"""Probe latency of `certctl run`'s health port while other clients hold connections to it.

One `certctl run` on the e2e API emulator, ready; then, for each load in turn, the load is
opened from 127.0.0.1 (harness/starvation.py: slowloris connections send a header line
every 3 s, slow ones a request one byte every 0.5 s, idle ones nothing; each reopened as
soon as the server closes it), given a moment to settle, and N probes of /healthz and N of
/readyz are sent from 127.0.0.2, one after the other, each on a new connection with the
kubelet's 1 s timeout. A probe that fails or times out is counted, never timed.

Loads: none (the baseline, measured in the same run), 2 slowloris, 50 slow, 1,000 idle, and
all of them at once. Reported: p50 and p99 per endpoint and load, their ratio to the
baseline, and the failures.

Usage: bench/probe_bench.py [--certctl build/ci/certctl] [--probes 200] [--quick] [--json FILE]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "e2e"))

from harness import Cluster  # noqa: E402
from harness.certctl import webhook_configuration  # noqa: E402
from harness.rbac import emulator_rules  # noqa: E402
from harness.sidecar import Sidecar, stop_all  # noqa: E402
from harness.starvation import Attack, probe, raise_fd_limit  # noqa: E402

NS = "bench"
SECRET = "webhook-server-cert"
USER = f"system:serviceaccount:{NS}:certctl"
READY_BOUND = 30.0
PATHS = ("/healthz", "/readyz")
LOADS = [  # name, slowloris, slow, idle
    ("baseline", 0, 0, 0),
    ("2 slowloris", 2, 0, 0),
    ("50 slow", 0, 50, 0),
    ("1000 idle", 0, 0, 1000),
    ("1000 idle + 50 slow + 2 slowloris", 2, 50, 1000),
]


class BenchError(RuntimeError):
    pass


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(port, probes):
    """{path: {"seconds": [...], "failed": n}} over `probes` probes of each path."""
    out = {path: {"seconds": [], "failed": 0} for path in PATHS}
    for _ in range(probes):
        for path in PATHS:
            status, _, seconds = probe(port, path)
            if status == 200:
                out[path]["seconds"].append(seconds)
            else:
                out[path]["failed"] += 1
    return out


def start_sidecar(cluster, certctl, work):
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user(USER, emulator_rules("sidecar", SECRET, NS, {"validatingWebhooks": ["hook"]}))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        webhook_configuration("ValidatingWebhookConfiguration", "hook", ["a.hook.io"],
                              namespace=NS)))
    sidecar = Sidecar(certctl, cluster, work, "bench", USER, ["--validating-webhook", "hook"],
                      namespace=NS).start()
    deadline = time.monotonic() + READY_BOUND
    while sidecar.readyz()[0] != 200:
        if not sidecar.alive() or time.monotonic() > deadline:
            stop_all([sidecar])
            raise BenchError(f"certctl run did not become ready\n{sidecar.describe()}")
        time.sleep(0.05)
    return sidecar


def run(certctl, probes, settle):
    results = {"probes": probes, "settle": settle, "loads": {}}
    work = tempfile.mkdtemp(prefix="certctl-probe-bench-")
    try:
        with Cluster() as cluster:
            sidecar = start_sidecar(cluster, certctl, work)
            try:
                for name, slowloris, slow, idle in LOADS:
                    print(f"-- {name}", file=sys.stderr, flush=True)
                    with Attack(sidecar.health_port, slowloris, slow, idle) as attack:
                        time.sleep(settle)
                        figures = measure(sidecar.health_port, probes)
                        reopened = attack.reopened
                    if not sidecar.alive():
                        raise BenchError(f"certctl run exited under {name}\n{sidecar.describe()}")
                    results["loads"][name] = {"connections": slowloris + slow + idle,
                                              "reopened": reopened, "paths": figures}
            finally:
                stop_all([sidecar])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(results):
    base = results["loads"]["baseline"]["paths"]
    print(f"{results['probes']} probes of each endpoint per load, from another address, "
          "each on a new connection with a 1 s timeout")
    print(f"{'load':<36} {'endpoint':<9} {'p50 ms':>8} {'p99 ms':>8} {'p50 ratio':>10} "
          f"{'p99 ratio':>10} {'failed':>7}")
    for name, load in results["loads"].items():
        for path, figures in load["paths"].items():
            seconds = figures["seconds"] or [float("nan")]
            p50, p99 = percentile(seconds, 0.50), percentile(seconds, 0.99)
            base_p50 = percentile(base[path]["seconds"], 0.50)
            base_p99 = percentile(base[path]["seconds"], 0.99)
            print(f"{name:<36} {path:<9} {p50 * 1000:8.2f} {p99 * 1000:8.2f} "
                  f"{p50 / base_p50:10.2f} {p99 / base_p99:10.2f} {figures['failed']:7d}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--certctl", default=os.path.join(ROOT, "build", "ci", "certctl"))
    parser.add_argument("--probes", type=int, help="probes of each endpoint per load (200)")
    parser.add_argument("--quick", action="store_true",
                        help="10 probes per load, a short settle (a smoke test, not a measurement)")
    parser.add_argument("--json", help="also write the raw figures to this file")
    args = parser.parse_args()
    certctl = os.path.abspath(args.certctl)
    if not os.access(certctl, os.X_OK):
        parser.error(f"not an executable: {certctl}")
    probes = args.probes or (10 if args.quick else 200)
    settle = 0.2 if args.quick else 2.0
    need = max(load[1] + load[2] + load[3] for load in LOADS) + 100
    if raise_fd_limit() < need:
        parser.error(f"needs RLIMIT_NOFILE of at least {need}")
    try:
        results = run(certctl, probes, settle)
    except BenchError as e:
        print(f"probe_bench: {e}", file=sys.stderr)
        sys.exit(1)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    report(results)


if __name__ == "__main__":
    main()
