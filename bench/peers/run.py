#!/usr/bin/python3
"""certctl beside the tools users would pick instead, on the same real API server, the same
webhook server and the same webhook configurations, in one run (bench/peers/README.md says
what each row measures and why).

    bench/peers/run.py [--certctl build/ci/certctl] [--kube-webhook-certgen-source DIR]
                       [--quick] [--backend process|node] [--plot] [--report FILE.md]
                       [--json FILE]

Four columns (bench/peers/columns.py): two controllers, `certctl run` and cert-controller's
rotator, and two Helm hooks, `certctl job` and kube-webhook-certgen. Each gets a control
plane of its own (scripts/kube-up.sh) with the webhook's Service, the example webhook server
(e2e/harness/webhook_server.py) and one Validating and one Mutating configuration that every
ConfigMap create in the namespace meets; an admission call is a dry-run ConfigMap create,
201 a success. The steps below (install, steady, drift, restart, wrong_name, ca_near_end,
scale) each fill some of the tool's figures; a hook has no steady state, drift or restart.
That is the process backend; `--backend node` (node.py) installs each tool as its pods on a
real node instead, with rows of its own (install, steady, restart).

Exit 0 when every tool ran every step, 1 when one failed (the report says which), 2 on bad
arguments (or --backend node without root).
"""

import argparse
import base64
import collections
import concurrent.futures
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "e2e"))

from harness.kubelet import ContainerProcess, free_ports  # noqa: E402
from harness.naive_rotation import publish_folder  # noqa: E402
from harness.real_cluster import RealCluster  # noqa: E402
from harness.sidecar import WEBHOOK_SERVER  # noqa: E402
from soak.workloads import peak_rss_kib  # noqa: E402
from columns import (CONFIG, KWC_MODULE, KWC_VERSION, NS, SCALE_LABEL, SECRET,  # noqa: E402
                   SERVICE, STEP_BOUND, CertController, Certctl, CertctlJob,
                   KubeWebhookCertgen, StepFailed, cert_controller_build, kwc_build,
                   short_lived_pair)
from measure import POLL, Caller, cpu_seconds, wait_for  # noqa: E402

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
KINDS = {"validating": "validatingwebhookconfigurations",
         "mutating": "mutatingwebhookconfigurations"}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
CA_PREPARE = 2.0     # seconds the short-lived CA may take to get served before the tool starts
# Every tool runs as a ServiceAccount with these rights, so the audit log tells its requests
# apart; what each needs at least is not what is measured here.
RULES = [{"apiGroups": [""], "resources": ["secrets", "events", "configmaps", "services"],
          "verbs": ["*"], "namespaces": [NS]},
         {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"],
          "namespaces": [NS]},
         {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
          "verbs": ["get", "list", "watch"], "namespaces": [NS]},
         {"apiGroups": ["admissionregistration.k8s.io"], "resources": list(KINDS.values()),
          "verbs": ["get", "list", "watch", "update", "patch"]},
         {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"],
          "namespaces": ["default"]}]


class Form:
    """How much of each step a run does: the full form for the report, the quick one for CI
    (every step still runs against every tool, on fewer repeats and shorter windows)."""

    def __init__(self, quick):
        self.quick = quick
        self.steady = 3 if quick else 300       # seconds of steady state
        self.installs = 1 if quick else 3       # installs measured (the median)
        # Wipes measured (the median): certctl repairs three in a row at once, then spaces
        # its repairs out, as it does against a writer that keeps undoing it.
        self.drifts = 1 if quick else 3
        self.restarts = 1 if quick else 5       # restarts measured (the median)
        self.red_bound = 2 if quick else 10     # seconds a tool has to go red on a wrong name
        # Seconds of life the CA has left when the tool starts: certctl's rotation waits
        # 3 s for the API servers' caches before it moves the leaf.
        self.ca_left = 4 if quick else 12
        self.new_connections = 1 if quick else 2  # seconds of calls after a CA's end
        self.scale = 50 if quick else 500       # configurations in the scale row


def configuration(kind, name=CONFIG, scale=False):
    """A configuration calling the Service `hook`; the scale row's never meet a request
    (an object selector nothing matches) and carry SCALE_LABEL."""
    title = kind.capitalize()
    hook = {"name": f"{kind}.hook.bench.io", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": {"service": {"name": SERVICE, "namespace": NS,
                                         "path": "/validate", "port": 443}},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}]}
    metadata = {"name": name}
    if scale:
        hook["objectSelector"] = {"matchLabels": {"bench.certctl.io/never": "true"}}
        metadata["labels"] = {SCALE_LABEL: "yes"}
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": f"{title}WebhookConfiguration", "metadata": metadata, "webhooks": [hook]}


def pem_certificates(pem):
    """The DER of each certificate in a PEM bundle, as a set."""
    text = pem.decode("ascii", "replace") if isinstance(pem, bytes) else pem
    return {"".join(block.split("-----")[0].split())
            for block in text.split("-----BEGIN CERTIFICATE-----")[1:]}


class Bed:
    """One tool's test bed: the control plane, the webhook's Service and endpoint, the two
    configurations and the webhook server on the tool's certificate folder."""

    def __init__(self, workdir, account):
        self.workdir, self.account = workdir, account
        self.cluster = RealCluster()
        self.server = None
        self.port, = free_ports(1)

    def __enter__(self):
        self.cluster.start()
        self.cluster.kubectl("create", "namespace", NS)
        self.cluster.add_user(f"system:serviceaccount:{NS}:{self.account}", RULES)
        self.apply_service(SERVICE)
        for kind in KINDS:
            self.apply(configuration(kind))
        # kube-apiserver's own informers watch it too: a tool's watches are what it adds.
        self.watches_before = self.open_watches()
        return self

    def __exit__(self, *exc):
        if self.server is not None:
            self.server.stop()
        self.cluster.stop()

    def apply(self, obj):
        self.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                             input=json.dumps(obj))

    def apply_service(self, name):
        self.apply({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name, "namespace": NS},
                    "spec": {"ports": [{"name": "https", "port": 443,
                                        "targetPort": self.port}]}})
        self.apply({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": name, "namespace": NS,
                                 "labels": {"kubernetes.io/service-name": name}},
                    "addressType": "IPv4",
                    "endpoints": [{"addresses": [self.cluster.node_ip],
                                   "conditions": {"ready": True}}],
                    "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}]})

    def serve(self, cert_dir):
        """The webhook server on `cert_dir`, in place of the one before (a new pod)."""
        if self.server is not None:
            self.server.stop()
        self.server = ContainerProcess(
            [WEBHOOK_SERVER, "--cert-dir", cert_dir, "--listen",
             f"{self.cluster.node_ip}:{self.port}", "--ready-timeout", "600"], {},
            os.path.join(self.workdir, "webhook"), name="webhook").start()

    def listening(self):
        try:
            socket.create_connection((self.cluster.node_ip, self.port), 0.5).close()
            return True
        except OSError:
            return False

    def admit(self):
        """One admission call: (True, "") or (False, what kube-apiserver answered)."""
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"generateName": "call-", "namespace": NS}}
        resp = self.cluster.api("POST", f"/api/v1/namespaces/{NS}/configmaps?dryRun=All",
                                body, timeout=30)
        if resp.status == 201:
            return True, ""
        return False, resp.body.decode(errors="replace")[:300]

    def until_admitted(self, tool, what):
        """Seconds until an admission call succeeds."""
        start = time.monotonic()
        answer = ""
        while time.monotonic() - start < STEP_BOUND:
            if not tool.stopped and not tool.process.alive():
                raise StepFailed(f"{what}: {tool.name} exited:\n{tool.log()[-1500:]}")
            ok, answer = self.admit()
            if ok:
                return time.monotonic() - start
            time.sleep(POLL)
        raise StepFailed(f"{what}: no admission call succeeded within {STEP_BOUND:g}s: "
                         f"{answer}\n{tool.log()[-1500:]}")

    def set_bundles(self, pem):
        """Both caBundles set to `pem` (b"": emptied), one request each."""
        value = base64.b64encode(pem).decode()
        for resource in KINDS.values():
            resp = self.cluster.api(
                "PATCH", f"{ADMISSION}/{resource}/{CONFIG}",
                [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": value}],
                content_type="application/json-patch+json")
            if resp.status != 200:
                raise StepFailed(f"setting the caBundle of {resource}/{CONFIG}: "
                                 f"{resp.status} {resp.body[:300]!r}")

    def bundles(self):
        """The certificates of each caBundle, as the API server stores them."""
        found = []
        for resource in KINDS.values():
            resp = self.cluster.api("GET", f"{ADMISSION}/{resource}/{CONFIG}")
            bundle = resp.json()["webhooks"][0]["clientConfig"].get("caBundle", "") \
                if resp.status == 200 else ""
            found.append(pem_certificates(base64.b64decode(bundle)))
        return found

    def secret(self):
        resp = self.cluster.api("GET", f"/api/v1/namespaces/{NS}/secrets/{SECRET}")
        if resp.status != 200:
            raise StepFailed(f"reading the Secret: {resp.status} {resp.body[:300]!r}")
        return resp.json()

    def reset(self, tool):
        """No Secret and empty caBundles, as before an install (the tool stopped)."""
        tool.stop()
        self.cluster.api("DELETE", f"/api/v1/namespaces/{NS}/secrets/{SECRET}")
        self.set_bundles(b"")

    def open_watches(self):
        """Watches kube-apiserver holds open now (its apiserver_longrunning_requests)."""
        resp = self.cluster.api("GET", "/metrics")
        total = 0.0
        for line in resp.body.decode(errors="replace").splitlines():
            if line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    def call_service(self, name):
        self.cluster.kubectl("patch", KINDS["validating"], CONFIG, "--type", "json", "-p",
                             json.dumps([{"op": "replace",
                                          "path": "/webhooks/0/clientConfig/service/name",
                                          "value": name}]))

    def requests_of(self, user):
        entries = [e for e in self.cluster.request_log()["requests"] if e["user"] == user]
        return {"requests": len(entries),
                "writes": sum(e["verb"] in WRITE_VERBS and e["code"] < 300 for e in entries),
                "by_verb": dict(collections.Counter(f"{e['verb']} {e['resource']}"
                                                    for e in entries))}

    def add_scale_configurations(self, count):
        """`count` validating configurations with SCALE_LABEL and an empty caBundle."""
        names = [f"scale-{i:04d}" for i in range(count)]
        path = f"{ADMISSION}/{KINDS['validating']}"
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for resp in pool.map(lambda n: self.cluster.api(
                    "POST", path, configuration("validating", n, scale=True)), names):
                if resp.status != 201:
                    raise StepFailed(f"scale: creating a configuration: {resp.status} "
                                     f"{resp.body[:300]!r}")
        return names

    def scale_injected(self):
        """How many of the scale row's configurations carry a caBundle."""
        resp = self.cluster.api("GET", f"{ADMISSION}/{KINDS['validating']}"
                                       f"?labelSelector={SCALE_LABEL}%3Dyes")
        return sum(bool(item["webhooks"][0]["clientConfig"].get("caBundle"))
                   for item in resp.json()["items"])


class BundleWatch(threading.Thread):
    """Looks at both caBundles and the Secret every 20 ms while a CA is replaced: when a CA
    other than `old` is first in both bundles, whether a bundle held the old and a new one
    together on the way (a rotation in steps), and when the Secret's leaf `cert` changed."""

    def __init__(self, bed, old, cert_key, cert):
        super().__init__(name="bundle-watch", daemon=True)
        self.bed, self.old, self.cert_key, self.cert = bed, old, cert_key, cert
        self.start_time = time.monotonic()
        self.new_after = self.leaf_after = None
        self.overlap = False
        self._done = threading.Event()

    def run(self):
        while not self._done.wait(0.02):
            now = time.monotonic() - self.start_time
            bundles = self.bed.bundles()
            self.overlap |= any(self.old & b and b - self.old for b in bundles)
            if self.new_after is None and all(b - self.old for b in bundles):
                self.new_after = now
            if self.leaf_after is None and \
                    self.bed.secret()["data"].get(self.cert_key) != self.cert:
                self.leaf_after = now

    def __enter__(self):
        self.start_time = time.monotonic()
        self.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self.join(10)

    def action(self):
        if self.new_after is None:
            return "keeps the old CA"
        return "rotates in steps" if self.overlap else "regenerates at once"


def launch(tool, scale=None):
    """Starts a controller, or runs a hook to its end (StepFailed when it fails)."""
    if not tool.hook:
        tool.start(scale)
        return
    codes = tool.run_hook(scale)
    if any(codes):
        raise StepFailed(f"{tool.name} exited {codes[-1]}\n{tool.log()[-1500:]}")


# --- the steps: each takes (bed, tool, form, figures, say) and fills figures -------------

def install(bed, tool, form, figures, say):
    """From nothing (no Secret, empty caBundles, a new webhook pod) to the first successful
    admission call; a hook's processes timed to their end too. The median of form.installs,
    so one slow start does not stand for the tool."""
    totals, hooks = [], []
    for attempt in range(form.installs):
        if attempt:
            bed.reset(tool)
        tool.new_cert_dir()
        tool.prepare(bed)
        bed.serve(tool.cert_dir)
        bed.cluster.reset_request_log()
        start = time.monotonic()
        launch(tool)
        hooks.append(time.monotonic() - start)
        bed.until_admitted(tool, "install")
        totals.append(time.monotonic() - start)
    figures["install_s"], figures["install_attempts_s"] = statistics.median(totals), totals
    requests = bed.requests_of(tool.user)
    figures["install_requests"], figures["install_by_verb"] = \
        requests["requests"], requests["by_verb"]
    if tool.hook:
        figures["hook_s"] = statistics.median(hooks)
    say(f"{tool.name}: first admission call after {figures['install_s']:.2f}s (median of "
        f"{', '.join(f'{t:.2f}' for t in totals)})")


def steady(bed, tool, form, figures, say):
    bed.cluster.reset_request_log()
    pid = tool.process.proc.pid
    cpu_before = cpu_seconds(pid)
    time.sleep(form.steady)
    figures["steady_cpu_s"] = cpu_seconds(pid) - cpu_before
    figures["steady_rss_kib"] = peak_rss_kib(pid)
    figures.update({f"steady_{k}": v for k, v in bed.requests_of(tool.user).items()})
    figures["steady_watches"] = bed.open_watches() - bed.watches_before
    say(f"{tool.name}: steady {figures['steady_rss_kib']} KiB, "
        f"{figures['steady_requests']} requests")


def drift(bed, tool, form, figures, say):
    """The API server's webhook cache takes a moment to see the wipe, and may not see it at
    all when the repair is faster: the repair is timed on the objects, and the calls made
    meanwhile are counted."""
    repaired, next_call = [], []
    with Caller(bed) as caller:
        for _ in range(form.drifts):
            wiped = time.monotonic()
            bed.set_bundles(b"")
            if wait_for(lambda: all(bed.bundles()), STEP_BOUND, interval=0.005) is None:
                raise StepFailed(f"drift: the caBundles were not repaired within "
                                 f"{STEP_BOUND:g}s\n{tool.log()[-1500:]}")
            repaired.append(time.monotonic() - wiped)  # both wipes are milliseconds apart
            bed.until_admitted(tool, "drift")
            next_call.append(time.monotonic() - wiped)
            time.sleep(1.0)  # the next wipe meets a tool at rest
    figures["drift_s"] = statistics.median(repaired)
    figures["drift_next_call_s"] = statistics.median(next_call)
    caller.record(figures, "drift")
    say(f"{tool.name}: repaired after {figures['drift_s']:.3f}s, "
        f"{caller.failed} of {caller.calls} calls failed")


def restart(bed, tool, form, figures, say):
    restarts = []
    with Caller(bed) as caller:
        for _ in range(form.restarts):
            tool.kill()
            tool.start()
            ready = wait_for(tool.ready, STEP_BOUND, interval=0.01)
            if ready is None:
                raise StepFailed(f"restart: not ready within {STEP_BOUND:g}s\n"
                                 f"{tool.log()[-1500:]}")
            restarts.append(ready)
    figures["restart_s"] = statistics.median(restarts)
    caller.record(figures, "restart")
    say(f"{tool.name}: ready after SIGKILL in {figures['restart_s']:.2f}s, "
        f"{caller.failed} of {caller.calls} calls failed")


def wrong_name(bed, tool, form, figures, say):
    """The validating configuration calls Service `other`: a controller should go red, a
    hook fail (as Helm then fails the install). Put back afterwards."""
    bed.apply_service("other")
    bed.call_service("other")
    if tool.hook:
        codes = tool.run_hook()
        figures["wrong_name"] = f"exit {codes[-1]}"
    else:
        red = wait_for(lambda: not tool.ready(), form.red_bound)
        figures["wrong_name"] = "red" if red is not None else "green"
    bed.call_service(SERVICE)
    say(f"{tool.name}: wrong name: {figures['wrong_name']}")


def ca_near_end(bed, tool, form, figures, say):
    """The Secret's pair replaced, while the tool is stopped, by one whose CA has
    form.ca_left seconds left, that CA alone in the caBundles and served by the webhook;
    then the tool starts (a hook runs) with calls every POLL seconds until a second past
    that CA's end, when the API server stops trusting a chain that ends in it."""
    tool.stop()
    secret = bed.secret()
    files, ca_pem, ca_end = short_lived_pair(secret, tool.keys, form.ca_left + CA_PREPARE)
    secret["data"].update({k: base64.b64encode(v).decode() for k, v in files.items()})
    resp = bed.cluster.api("PUT", f"/api/v1/namespaces/{NS}/secrets/{SECRET}", secret)
    if resp.status != 200:
        raise StepFailed(f"CA near its end: writing the Secret: {resp.status} "
                         f"{resp.body[:300]!r}")
    bed.set_bundles(ca_pem)
    if tool.writes_cert_dir:  # what the stopped tool left in its folder
        publish_folder(tool.cert_dir, {"ca.crt": ca_pem.decode(),
                                       "tls.crt": files[tool.keys["cert"]].decode(),
                                       "tls.key": files[tool.keys["key"]].decode()})
    bed.until_admitted(tool, "CA near its end: serving the short-lived CA")
    time.sleep(max(0.0, ca_end - form.ca_left - time.time()))
    figures["ca_left_s"] = ca_end - time.time()
    cert = secret["data"][tool.keys["cert"]]
    with Caller(bed) as caller, \
            BundleWatch(bed, pem_certificates(ca_pem), tool.keys["cert"], cert) as watch:
        launch(tool)
        time.sleep(max(0.0, ca_end + 1.0 - time.time()))
    figures["ca_action"], figures["ca_new_s"] = watch.action(), watch.new_after
    figures["ca_leaf_s"] = watch.leaf_after
    caller.record(figures, "ca")
    # The API server keeps its connections to the webhook alive, and a connection opened
    # before the CA's end goes on working: a new webhook pod makes it open new ones.
    bed.serve(tool.cert_dir)
    if wait_for(bed.listening, 30, interval=0.01) is None:
        raise StepFailed("CA near its end: the new webhook server does not listen")
    with Caller(bed) as after:
        time.sleep(form.new_connections)
    after.record(figures, "ca_after")
    say(f"{tool.name}: CA with {figures['ca_left_s']:.1f}s left: {watch.action()}, "
        f"{caller.failed} of {caller.calls} calls failed, then {after.failed} of "
        f"{after.calls} on new connections")


def scale(bed, tool, form, figures, say):
    """form.scale configurations to inject: from the start to all of them carrying a CA."""
    tool.stop()
    names = bed.add_scale_configurations(form.scale)
    start = time.monotonic()
    launch(tool, names)
    if wait_for(lambda: bed.scale_injected() == len(names), STEP_BOUND, 0.1) is None:
        raise StepFailed(f"scale: not all {len(names)} injected within {STEP_BOUND:g}s\n"
                         f"{tool.log()[-1500:]}")
    figures["scale_s"], figures["scale_n"] = time.monotonic() - start, len(names)
    say(f"{tool.name}: {len(names)} configurations injected in {figures['scale_s']:.2f}s")


CONTROLLER_STEPS = [install, steady, drift, restart, wrong_name, ca_near_end, scale]
HOOK_STEPS = [install, wrong_name, ca_near_end, scale]


def on_fresh_bed(kind, binary, workdir, form, say):
    """Every step for one tool on a control plane of its own, so that nothing another tool
    left (objects, watches, the API server's caches and audit log) weighs on its figures;
    the figures, and the step that failed."""
    figures = {}
    with Bed(workdir, kind.name) as bed:
        tool = kind(bed.cluster, os.path.join(workdir, "tool"), binary)
        figures["version"] = tool.version
        try:
            for step in HOOK_STEPS if tool.hook else CONTROLLER_STEPS:
                step(bed, tool, form, figures, say)
        except StepFailed as e:
            figures["failed"] = str(e)
        finally:
            tool.close()
    return figures


# --- the report ---------------------------------------------------------------------------

def rows(form):
    """(title, figure, unit, the figure it is a part of) of the report's table."""
    installs = f"median of {form.installs}"
    return [
        (f"install: start to the first successful admission call ({installs})", "install_s",
         "s", None),
        ("install: a hook's processes, start to exit", "hook_s", "s", None),
        ("install: API requests until then", "install_requests", "", None),
        (f"steady: peak RSS ({form.steady} s)", "steady_rss_kib", "KiB", None),
        ("steady: CPU seconds", "steady_cpu_s", "s", None),
        ("steady: API requests", "steady_requests", "", None),
        ("steady: writes", "steady_writes", "", None),
        ("steady: watches open (kube-apiserver's count)", "steady_watches", "", None),
        ("drift: caBundles wiped to both repaired", "drift_s", "s", None),
        ("drift: to the next successful admission call", "drift_next_call_s", "s", None),
        ("drift: admission calls failed meanwhile", "drift_failed", "", "drift_calls"),
        ("restart: SIGKILL to ready", "restart_s", "s", None),
        ("restart: admission calls failed meanwhile", "restart_failed", "", "restart_calls"),
        (f"wrong name: red within {form.red_bound} s, or a hook's exit code", "wrong_name", "",
         None),
        (f"CA near its end ({form.ca_left} s left): what the tool does", "ca_action", "", None),
        ("CA near its end: start to a new CA in both caBundles", "ca_new_s", "s", None),
        ("CA near its end: start to a leaf from the new CA in the Secret", "ca_leaf_s", "s",
         None),
        ("CA near its end: admission calls failed, to 1 s past its end", "ca_failed", "",
         "ca_calls"),
        (f"CA past its end: calls failed on new connections ({form.new_connections} s, a "
         "new webhook pod)", "ca_after_failed", "", "ca_after_calls"),
        (f"scale: {form.scale} configurations, start to all carrying the CA", "scale_s", "s",
         None)]


def cell(figures, key, unit, total):
    if "not_built" in figures:
        return "not built"
    value = figures.get(key)
    if value is None:
        return "—"
    if total and figures.get(total) is not None:
        return f"{value} of {figures[total]}"
    if isinstance(value, float):
        return f"{value:.2f} {unit}".strip()
    return f"{value} {unit}".strip()


def ratio(ours, theirs):
    if isinstance(ours, (bool, str)) or not isinstance(ours, (int, float)) or \
            not isinstance(theirs, (int, float)) or ours == 0 or theirs == 0:
        return ""
    return f"{theirs / ours:.1f}×"


def report(results, kinds, form, elapsed, table=None, backend="process"):
    """The Markdown report; `table`: the rows (run.rows by default, node.rows on a node)."""
    table = rows(form) if table is None else table
    where = "processes on this machine" if backend == "process" else "pods on a real node"
    lines = ["# certctl beside its peers", "",
             f"{datetime.date.today().isoformat()}, {platform.machine()}, "
             f"{os.cpu_count()} CPUs, {'quick' if form.quick else 'full'} run "
             f"({elapsed:.0f} s), {where}; steady window {form.steady} s.", ""]
    for kind in kinds:
        lines.append(f"- {kind.title}: {results[kind.name].get('version', '?')}")
    lines.append("")
    compared = [k for k in kinds if k.versus]
    titles = {k.name: k.title for k in kinds}
    lines += ["| row | " + " | ".join(k.title for k in kinds) + " | " +
              " | ".join(f"{k.title} / {titles[k.versus]}" for k in compared) + " |",
              "|" + "---|" * (1 + len(kinds) + len(compared))]
    for title, key, unit, total in table:
        lines.append(f"| {title} | " + " | ".join(
            cell(results[k.name], key, unit, total) for k in kinds) + " | " + " | ".join(
            ratio(results[k.versus].get(key), results[k.name].get(key)) if not total else ""
            for k in compared) + " |")
    for kind in kinds:
        if "failed" in results[kind.name]:
            lines += ["", f"{kind.title} failed: {results[kind.name]['failed']}"]
    return "\n".join(lines) + "\n"


def plot(results, kinds, path):
    """The figures people compare first, a bar per tool (Debian's matplotlib, no display)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("install: start to first admitted call (s)", "install_s", 1),
              ("steady: peak RSS (MiB)", "steady_rss_kib", 1 / 1024),
              ("drift: caBundles wiped to repaired (s)", "drift_s", 1)]
    panels = [p for p in panels if any(p[1] in results[k.name] for k in kinds)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    axes = axes[0]
    for ax, (title, key, factor) in zip(axes, panels):
        shown = [k for k in kinds if isinstance(results[k.name].get(key), (int, float))]
        values = [results[k.name][key] * factor for k in shown]
        bars = ax.bar([k.title for k in shown], values,
                      color=["#2a7ab0" if k.name.startswith("certctl") else "#b0b0b0"
                             for k in shown])
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        ax.margins(y=0.15)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--certctl", default=os.path.join(REPO, "build", "ci", "certctl"))
    parser.add_argument("--kube-webhook-certgen-source",
                        default=os.environ.get("CERTCTL_KWC_SOURCE"),
                        help=f"a checkout of {KWC_MODULE} at {KWC_VERSION} (default: "
                             "$CERTCTL_KWC_SOURCE); without it that column is not built")
    parser.add_argument("--quick", action="store_true", help="short windows, fewer repeats")
    parser.add_argument("--backend", choices=["process", "node"], default="process",
                        help="process: each tool a process beside its own control plane; "
                             "node: each tool as the pods it ships as, on a real node "
                             "(scripts/kube-up.sh --node, as root)")
    parser.add_argument("--plot", action="store_true",
                        help="draw the comparison into bench/peers/peers.png")
    parser.add_argument("--report", help="write the Markdown report here too")
    parser.add_argument("--json", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if not os.access(args.certctl, os.X_OK):
        parser.error(f"no certctl at {args.certctl}")
    form = Form(args.quick)
    certctl = os.path.abspath(args.certctl)
    binaries = {Certctl: certctl, CertController: cert_controller_build(),
                CertctlJob: certctl, KubeWebhookCertgen: None}
    if args.kube_webhook_certgen_source:
        try:
            binaries[KubeWebhookCertgen] = kwc_build(args.kube_webhook_certgen_source)
        except (OSError, ValueError) as e:
            parser.error(str(e))
    started = time.monotonic()
    if args.backend == "node":
        return on_node(args, binaries, form, started)
    results = {}
    with tempfile.TemporaryDirectory(prefix="peers-") as workdir:
        for kind, binary in binaries.items():
            if binary is None:
                results[kind.name] = {"not_built": True}
                continue
            try:
                results[kind.name] = on_fresh_bed(
                    kind, binary, os.path.join(workdir, kind.name), form,
                    lambda text: print(f"peers: {text}", file=sys.stderr))
            except Exception:  # noqa: BLE001 - the report says what broke
                results[kind.name] = {"failed": traceback.format_exc()}
    text = report(results, list(binaries), form, time.monotonic() - started)
    return publish(args, text, results, list(binaries))


def on_node(args, binaries, form, started):
    """--backend node (node.py): the columns as pods on one node; certctl is the image of
    this tree that scripts/kube-up.sh --node builds, not --certctl."""
    import node
    if os.geteuid() != 0:
        print("peers: --backend node needs root (scripts/kube-up.sh --node)", file=sys.stderr)
        return 2
    versions = {"certctl": subprocess.run(
        [binaries[Certctl], "version"], capture_output=True, text=True).stdout.strip(),
        "cert-controller": CertController.version_of(),
        "kube-webhook-certgen": KubeWebhookCertgen.version}
    versions["certctl-job"] = versions["certctl"]
    say = lambda text: print(f"peers: {text}", file=sys.stderr)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="peers-node-") as workdir:
        results, node_form = node.measure(binaries, versions, form, workdir, say)
    text = report(results, node.COLUMNS, node_form, time.monotonic() - started,
                  node.rows(node_form), backend="node")
    return publish(args, text, results, node.COLUMNS)


def publish(args, text, results, kinds):
    """The report on stdout and where the arguments ask; the exit code."""
    print(text)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    if args.plot:
        plot(results, kinds, os.path.join(HERE, "peers.png" if kinds[0] is Certctl
                                          else "peers-node.png"))
    return 1 if any("failed" in figures for figures in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
