#!/usr/bin/python3
"""`certctl audit` against the Kubernetes API emulator: a cluster of many webhook
configurations (3 entries each, all calling one Service with a ready endpoint and trusting a
valid CA), audited whole; then the same with many Services and EndpointSlices no entry calls,
which the audit must read past without holding them.

    bench/audit_bench.py [--certctl build/release/certctl] [--configs 1000] [--unrelated 1000]
                         [--runs 5]

Per cluster: the median wall time of `certctl audit -o json` (exit 0, every entry reported)
and its peak RSS, beside `kubectl get validatingwebhookconfigurations -o json` in the same
run as the baseline (the same objects, one process reading them).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "e2e"))

from harness import Cluster  # noqa: E402
from harness.certctl import (run_certctl, service_with_endpoints,  # noqa: E402
                             webhook_configuration)
from harness.cluster import KUBECTL  # noqa: E402

NS = "infra"


def create(cluster, path, body):
    answer = cluster.api("POST", path, body)
    assert answer.status == 201, (path, answer.status, answer.body[:300])


def measure(cluster, certctl, runs, entries):
    kubeconfig = cluster.kubeconfig("admin")
    audit, audit_rss = [], []
    for _ in range(runs):
        proc = subprocess.Popen([certctl, "audit", "-o", "json", "--log-level", "off",
                                 "--kubeconfig", kubeconfig],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started = time.monotonic()
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        audit.append(time.monotonic() - started)
        audit_rss.append(usage.ru_maxrss)
        report = json.loads(out)
        assert os.waitstatus_to_exitcode(status) == 0, report
        assert len(report["objects"]) == entries, len(report["objects"])
    kubectl = []
    for _ in range(runs):
        proc = subprocess.Popen([KUBECTL, "--kubeconfig", kubeconfig, "get",
                                 "validatingwebhookconfigurations", "-o", "json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started = time.monotonic()
        proc.stdout.read()
        _, status, _ = os.wait4(proc.pid, 0)
        kubectl.append(time.monotonic() - started)
        assert os.waitstatus_to_exitcode(status) == 0
    return {"audit_s": statistics.median(audit), "audit_rss_kib": max(audit_rss),
            "kubectl_s": statistics.median(kubectl)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--certctl", default=os.path.join(REPO, "build", "release", "certctl"))
    parser.add_argument("--configs", type=int, default=1000)
    parser.add_argument("--unrelated", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    certctl = os.path.abspath(args.certctl)
    made = run_certctl(certctl, "generate", "--service", "hook", "-n", NS, "-o", "secret-json",
                       "--log-level", "off")
    ca = json.loads(made.stdout)["data"]["ca.crt"]

    cluster = Cluster()
    cluster.start()
    try:
        create(cluster, "/api/v1/namespaces", {"metadata": {"name": NS}})
        service, endpoints = service_with_endpoints("hook", NS)
        create(cluster, f"/api/v1/namespaces/{NS}/services", service)
        create(cluster, f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices",
                    endpoints)
        for i in range(args.configs):
            configuration = webhook_configuration(
                "ValidatingWebhookConfiguration", f"hook-{i:04d}",
                [f"{letter}.hook-{i}.io" for letter in "abc"])
            for entry in configuration["webhooks"]:
                entry["clientConfig"]["caBundle"] = ca  # already base64
                entry["failurePolicy"] = "Ignore"
                entry["rules"][0]["resources"] = [f"widgets{i}"]
            create(cluster, "/apis/admissionregistration.k8s.io/v1/"
                        "validatingwebhookconfigurations", configuration)
        entries = 3 * args.configs
        plain = measure(cluster, certctl, args.runs, entries)
        print(f"audit_bench: {args.configs} configurations: {plain}", file=sys.stderr, flush=True)

        for i in range(args.unrelated):
            name = f"other-{i:05d}"
            service, endpoints = service_with_endpoints(name, NS)
            create(cluster, f"/api/v1/namespaces/{NS}/services", service)
            create(cluster, f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices",
                        endpoints)
        crowded = measure(cluster, certctl, args.runs, entries)
    finally:
        cluster.stop()

    version = subprocess.run([certctl, "version"], capture_output=True, text=True).stdout
    print(f"certctl audit, {args.configs} ValidatingWebhookConfigurations x 3 entries, "
          f"medians of {args.runs}; {version.splitlines()[0]}\n")
    print("| cluster | certctl audit | peak RSS | kubectl get (baseline) | ratio |")
    print("|---|---|---|---|---|")
    for title, figures in ((f"{args.configs} configurations", plain),
                           (f"and {args.unrelated} Services + EndpointSlices no entry calls",
                            crowded)):
        print(f"| {title} | {figures['audit_s']:.2f} s | {figures['audit_rss_kib'] / 1024:.1f} MiB "
              f"| {figures['kubectl_s']:.2f} s | "
              f"{figures['audit_s'] / figures['kubectl_s']:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
