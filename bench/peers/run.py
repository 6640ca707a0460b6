#!/usr/bin/python3
"""certctl beside the tools users would pick instead, on the same real API server, the same
webhook server and the same webhook configurations, in one run (bench/peers/README.md).

    bench/peers/run.py [--certctl build/ci/certctl] [--quick] [--report FILE.md] [--json FILE]

Each tool gets a fresh kube-apiserver and etcd (scripts/kube-up.sh), a namespace with the
webhook's Service and an EndpointSlice naming the example webhook server
(e2e/harness/webhook_server.py) on this machine's address, and one Validating and one
Mutating webhook configuration with an empty caBundle, failurePolicy Fail, that every
ConfigMap create in the namespace meets. An admission call is a dry-run ConfigMap create:
kube-apiserver calls both webhooks, trusting only their caBundle and verifying
`hook.bench.svc`; 201 is a success. Then, per tool:

- install: process start to the first successful admission call;
- steady: over a window (300 s, --quick 10 s), the peak RSS (VmHWM), CPU seconds, and the
  API requests, writes and watches the API server's audit log holds for the tool's user;
- drift: both caBundles wiped: time until both are stored again, and to the next successful
  admission call (medians of 3), with the admission calls failed meanwhile (a caller every
  50 ms);
- restart: SIGKILL, a new process, to its /readyz 200 (median of 5), with the admission
  calls failed meanwhile;
- wrong name: the validating configuration calls a Service the certificate does not name;
  whether the tool's /readyz goes red within 10 s.

A tool that runs from the Secret's volume (cert-controller) gets the Secret's data written
into its folder as the kubelet does it, swapped in through `..data`, one second after each
change (the kubelet's own delay is up to its sync period, a minute by default).

Exit 0 when every tool ran every step, 1 when one failed (the report says which), 2 on bad
arguments.
"""

import argparse
import base64
import collections
import datetime
import hashlib
import json
import os
import platform
import re
import signal
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

NS = "bench"
SERVICE = "hook"
SECRET = "webhook-server-cert"
CONFIG = "hook"
HOST = f"{SERVICE}.{NS}.svc"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
KINDS = {"validating": "validatingwebhookconfigurations",
         "mutating": "mutatingwebhookconfigurations"}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
POLL = 0.05          # seconds between two admission calls while waiting for one to succeed
STEP_BOUND = 120.0   # seconds any step may take before the tool is judged not to manage it
PROPAGATION = 1.0    # seconds from a Secret's change to its volume's (the kubelet's delay)
REPEATS = 5          # restarts measured (the median)
# Wipes measured (the median): certctl repairs three in a row at once, then spaces its
# repairs out, as it does against a writer that keeps undoing it; a single wipe (a sync
# gone wrong) is what this row is about.
DRIFT_REPEATS = 3
CACHE = os.path.join(os.environ.get("CERTCTL_CACHE_DIR",
                                    os.path.expanduser("~/.cache/certctl")), "peers")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
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


class StepFailed(RuntimeError):
    pass


def cpu_seconds(pid):
    """utime + stime of a live process, in seconds (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def go_build(folder, name):
    """The program of a Go module folder, built once per source hash and Go version."""
    digest = hashlib.sha256()
    for file in sorted(os.listdir(folder)):
        if file.endswith((".go", ".mod", ".sum")):
            with open(os.path.join(folder, file), "rb") as f:
                digest.update(file.encode() + b"\0" + f.read())
    digest.update(subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True,
                                 check=True).stdout.encode())
    out = os.path.join(CACHE, f"{name}-{digest.hexdigest()[:12]}", name)
    if not os.access(out, os.X_OK):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        print(f"peers: building {name} (once per machine)", file=sys.stderr)
        subprocess.run(["go", "build", "-mod=readonly", "-trimpath", "-o", out + ".tmp", "."],
                       cwd=folder, check=True)
        os.replace(out + ".tmp", out)
    return out


class SecretVolume:
    """The kubelet's copy of the Secret in a folder: each new resourceVersion written
    PROPAGATION seconds later, as a new folder swapped in through `..data`."""

    def __init__(self, cluster, folder):
        self.cluster, self.folder = cluster, folder
        self.version = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="secret-volume", daemon=True)

    def _run(self):
        while not self._stop.is_set():
            resp = self.cluster.api("GET", f"/api/v1/namespaces/{NS}/secrets/{SECRET}")
            if resp.status == 200:
                secret = resp.json()
                version = secret["metadata"]["resourceVersion"]
                if version != self.version and not self._stop.wait(PROPAGATION):
                    data = secret.get("data") or {}
                    publish_folder(self.folder, {k: base64.b64decode(v).decode()
                                                 for k, v in data.items()})
                    self.version = version
            self._stop.wait(0.1)

    def start(self):
        os.makedirs(self.folder, exist_ok=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(10)


class Tool:
    """One peer: how it is started, where it is asked whether it is ready."""

    name = ""
    version = ""

    def __init__(self, cluster, workdir):
        self.cluster, self.workdir = cluster, workdir
        self.user = f"system:serviceaccount:{NS}:{self.name}"
        self.cert_dir = os.path.join(workdir, "certs")
        self.health_port, = free_ports(1)
        self.process = None
        self.runs = 0

    def argv(self):
        raise NotImplementedError

    def prepare(self, bed):
        """What the tool's own install manifests create before it starts."""

    def env(self):
        return {"KUBECONFIG": self.cluster.kubeconfig(self.user)}

    def start(self):
        self.runs += 1
        self.process = ContainerProcess(self.argv(), self.env(), self.workdir,
                                        name=f"{self.name}-{self.runs}").start()
        return self

    def ready(self):
        status, _ = self.process.get("/readyz", self.health_port)
        return status == 200

    def kill(self):
        self.process.stop(sig=signal.SIGKILL, grace=5.0)

    def stop(self):
        if self.process is not None:
            self.process.stop()

    def log(self):
        return self.process.log() if self.process else ""


class Certctl(Tool):
    name = "certctl"

    def __init__(self, cluster, workdir, binary):
        super().__init__(cluster, workdir)
        self.binary = binary
        self.version = subprocess.run([binary, "version"], capture_output=True, text=True,
                                      check=True).stdout.strip()

    def argv(self):
        return [self.binary, "run", "--kubeconfig", self.cluster.kubeconfig(self.user),
                "-n", NS, "--secret", SECRET, "--service", SERVICE,
                "--validating-webhook", CONFIG, "--mutating-webhook", CONFIG,
                "--cert-dir", self.cert_dir, "--health-addr", f"127.0.0.1:{self.health_port}",
                "--metrics-addr", ""]


class CertController(Tool):
    """open-policy-agent/cert-controller's rotator in a manager of ours
    (bench/peers/cert-controller), reading the Secret's volume."""

    name = "cert-controller"

    def __init__(self, cluster, workdir, binary):
        super().__init__(cluster, workdir)
        self.binary = binary
        self.version = "open-policy-agent/cert-controller " + module_version(
            os.path.join(HERE, "cert-controller"), "github.com/open-policy-agent/cert-controller")
        self.volume = SecretVolume(cluster, self.cert_dir).start()

    def prepare(self, bed):
        # The rotator fills a Secret it is given and exits without one: the manifests of
        # those who embed it (Gatekeeper's among them) ship it empty.
        bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": SECRET, "namespace": NS}})

    def argv(self):
        return [self.binary, "--namespace", NS, "--secret", SECRET, "--service", SERVICE,
                "--cert-dir", self.cert_dir, "--validating", CONFIG, "--mutating", CONFIG,
                "--health-addr", f"127.0.0.1:{self.health_port}"]

    def stop(self):
        super().stop()
        self.volume.stop()


def module_version(folder, module):
    with open(os.path.join(folder, "go.mod"), encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if len(words) >= 2 and module in words[:2]:
                return words[words.index(module) + 1]
    return "?"


class Bed:
    """One tool's test bed: the control plane, the webhook's Service and endpoint, the two
    configurations and the webhook server on the tool's certificate folder."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.cluster = RealCluster()
        self.server = None
        self.port, = free_ports(1)

    def __enter__(self):
        self.cluster.start()
        self.cluster.kubectl("create", "namespace", NS)
        self.cluster.add_user(f"system:serviceaccount:{NS}:certctl", RULES)
        self.cluster.add_user(f"system:serviceaccount:{NS}:cert-controller", RULES)
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
        self.server = ContainerProcess(
            [WEBHOOK_SERVER, "--cert-dir", cert_dir, "--listen",
             f"{self.cluster.node_ip}:{self.port}", "--ready-timeout", "600"], {},
            os.path.join(self.workdir, "webhook"), name="webhook").start()

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
            if tool.process is not None and not tool.process.alive():
                raise StepFailed(f"{what}: {tool.name} exited:\n{tool.log()[-1500:]}")
            ok, answer = self.admit()
            if ok:
                return time.monotonic() - start
            time.sleep(POLL)
        raise StepFailed(f"{what}: no admission call succeeded within {STEP_BOUND:g}s: "
                         f"{answer}\n{tool.log()[-1500:]}")

    def wipe_bundles(self):
        """Both caBundles emptied, one request each (milliseconds apart)."""
        for resource in KINDS.values():
            resp = self.cluster.api(
                "PATCH", f"{ADMISSION}/{resource}/{CONFIG}",
                [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ""}],
                content_type="application/json-patch+json")
            if resp.status != 200:
                raise StepFailed(f"drift: wiping {resource}/{CONFIG}: {resp.status} "
                                 f"{resp.body[:300]!r}")

    def bundles_present(self):
        """Both configurations hold a caBundle (as the API server stores them)."""
        for resource in KINDS.values():
            resp = self.cluster.api("GET", f"{ADMISSION}/{resource}/{CONFIG}")
            if resp.status != 200 or not resp.json()["webhooks"][0]["clientConfig"].get(
                    "caBundle"):
                return False
        return True

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
                "writes": sum(e["verb"] in WRITE_VERBS and e["code"] < 300 for e in entries)}


def configuration(kind):
    title = kind.capitalize()
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": f"{title}WebhookConfiguration", "metadata": {"name": CONFIG},
            "webhooks": [{"name": f"{kind}.hook.bench.io", "admissionReviewVersions": ["v1"],
                          "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 5,
                          "clientConfig": {"service": {"name": SERVICE, "namespace": NS,
                                                       "path": "/validate", "port": 443}},
                          "namespaceSelector": {"matchLabels": {
                              "kubernetes.io/metadata.name": NS}},
                          "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                     "operations": ["CREATE"], "resources": ["configmaps"]}]}]}


def failure_cause(answer):
    """The part of kube-apiserver's answer that says why a webhook call failed."""
    try:
        message = json.loads(answer).get("message", answer)
    except ValueError:
        message = answer
    return re.sub(r"\s+", " ", message.split(": ", 1)[-1])[:160]


class Caller:
    """Admission calls every POLL seconds on a thread, counting the failed ones."""

    def __init__(self, bed):
        self.bed = bed
        self.calls = self.failed = 0
        self.answers = collections.Counter()  # kube-apiserver's words for the failed calls
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="caller", daemon=True)

    def _run(self):
        while not self._stop.is_set():
            ok, answer = self.bed.admit()
            self.calls += 1
            if not ok:
                self.failed += 1
                self.answers[failure_cause(answer)] += 1
            self._stop.wait(POLL)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(35)


def wait_for(predicate, bound, interval=POLL):
    """Seconds until predicate() holds, or None when it did not within `bound`."""
    start = time.monotonic()
    while time.monotonic() - start < bound:
        if predicate():
            return time.monotonic() - start
        time.sleep(interval)
    return None


def measure(make_tool, workdir, steady_seconds, say):
    """Every step for one tool, on a bed of its own; the figures, and the step that failed."""
    figures = {}
    with Bed(workdir) as bed:
        tool = make_tool(bed.cluster, os.path.join(workdir, "tool"))
        figures["version"] = tool.version
        try:
            tool.prepare(bed)
            bed.serve(tool.cert_dir)
            tool.start()
            figures["install_s"] = bed.until_admitted(tool, "install")
            say(f"{tool.name}: first admission call after {figures['install_s']:.2f}s")

            bed.cluster.reset_request_log()
            pid = tool.process.proc.pid
            cpu_before = cpu_seconds(pid)
            time.sleep(steady_seconds)
            figures["steady_cpu_s"] = cpu_seconds(pid) - cpu_before
            figures["steady_rss_kib"] = peak_rss_kib(pid)
            figures.update({f"steady_{k}": v for k, v in bed.requests_of(tool.user).items()})
            figures["steady_watches"] = bed.open_watches() - bed.watches_before
            figures["steady_s"] = steady_seconds
            say(f"{tool.name}: steady {figures['steady_rss_kib']} KiB, "
                f"{figures['steady_requests']} requests")

            # The API server's webhook cache takes a moment to see the wipe, and may not
            # see it at all when the repair is faster: the repair is timed on the objects,
            # and the calls made meanwhile are counted. Medians of REPEATS.
            repaired, next_call = [], []
            with Caller(bed) as caller:
                for _ in range(DRIFT_REPEATS):
                    wiped = time.monotonic()
                    bed.wipe_bundles()
                    if wait_for(bed.bundles_present, STEP_BOUND, interval=0.005) is None:
                        raise StepFailed(f"drift: the caBundles were not repaired within "
                                         f"{STEP_BOUND:g}s\n{tool.log()[-1500:]}")
                    # From the first wipe; both are a request each, milliseconds apart.
                    repaired.append(time.monotonic() - wiped)
                    bed.until_admitted(tool, "drift")
                    next_call.append(time.monotonic() - wiped)
                    time.sleep(1.0)  # the next wipe meets a tool at rest
            figures["drift_s"] = statistics.median(repaired)
            figures["drift_next_call_s"] = statistics.median(next_call)
            figures["drift_calls"], figures["drift_failed"] = caller.calls, caller.failed
            figures["drift_failures"] = dict(caller.answers)
            say(f"{tool.name}: repaired after {figures['drift_s']:.3f}s (median of "
                f"{DRIFT_REPEATS}), {caller.failed} of {caller.calls} calls failed")

            restarts = []
            with Caller(bed) as caller:
                for _ in range(REPEATS):
                    tool.kill()
                    tool.start()
                    ready = wait_for(tool.ready, STEP_BOUND, interval=0.01)
                    if ready is None:
                        raise StepFailed(f"restart: not ready within {STEP_BOUND:g}s\n"
                                         f"{tool.log()[-1500:]}")
                    restarts.append(ready)
            figures["restart_s"] = statistics.median(restarts)
            figures["restart_calls"], figures["restart_failed"] = caller.calls, caller.failed
            say(f"{tool.name}: ready after SIGKILL in {figures['restart_s']:.2f}s (median of "
                f"{REPEATS}), {caller.failed} of {caller.calls} calls failed")

            bed.apply_service("other")
            bed.call_service("other")
            red = wait_for(lambda: not tool.ready(), 10.0)
            figures["wrong_name_red"] = red is not None
            say(f"{tool.name}: wrong name {'red' if red is not None else 'stays green'}")
        except StepFailed as e:
            figures["failed"] = str(e)
        finally:
            tool.stop()
    return figures


ROWS = [("install: start to the first successful admission call", "install_s", "s"),
        ("steady: peak RSS", "steady_rss_kib", "KiB"),
        ("steady: CPU seconds", "steady_cpu_s", "s"),
        ("steady: API requests", "steady_requests", ""),
        ("steady: writes", "steady_writes", ""),
        ("steady: watches open (kube-apiserver's count)", "steady_watches", ""),
        ("drift: caBundles wiped to both repaired", "drift_s", "s"),
        ("drift: to the next successful admission call", "drift_next_call_s", "s"),
        ("drift: admission calls failed meanwhile", "drift_failed", ""),
        ("restart: SIGKILL to ready", "restart_s", "s"),
        ("restart: admission calls failed meanwhile", "restart_failed", ""),
        ("wrong name: goes red (not ready)", "wrong_name_red", "")]


def cell(value, unit):
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f} {unit}".strip()
    return f"{value} {unit}".strip()


def ratio(ours, theirs):
    if isinstance(ours, bool) or not isinstance(ours, (int, float)) or \
            not isinstance(theirs, (int, float)) or ours == 0 or theirs == 0:
        return ""
    return f"{theirs / ours:.1f}×"


def steady_seconds(args):
    return 10 if args.quick else 300


def report(results, args, elapsed):
    tools = list(results)
    lines = ["# certctl beside its peers", "",
             f"{datetime.date.today().isoformat()}, {platform.machine()}, "
             f"{os.cpu_count()} CPUs, {'quick' if args.quick else 'full'} run "
             f"({elapsed:.0f} s); steady window {steady_seconds(args)} s.",
             ""]
    for name, figures in results.items():
        lines.append(f"- {name}: {figures.get('version', '?')}")
    lines.append("")
    header = "| row | " + " | ".join(tools) + " | " + \
        " | ".join(f"{t} / certctl" for t in tools[1:]) + " |"
    lines += [header, "|" + "---|" * (1 + 2 * len(tools) - 1)]
    for title, key, unit in ROWS:
        values = [results[t].get(key) for t in tools]
        lines.append(f"| {title} | " + " | ".join(cell(v, unit) for v in values) + " | " +
                     " | ".join(ratio(values[0], v) for v in values[1:]) + " |")
    for name, figures in results.items():
        if "failed" in figures:
            lines += ["", f"{name} failed: {figures['failed']}"]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--certctl", default=os.path.join(REPO, "build", "ci", "certctl"))
    parser.add_argument("--quick", action="store_true", help="a 10 s steady window")
    parser.add_argument("--report", help="write the Markdown report here too")
    parser.add_argument("--json", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if not os.access(args.certctl, os.X_OK):
        parser.error(f"no certctl at {args.certctl}")
    steady = steady_seconds(args)
    cert_controller = go_build(os.path.join(HERE, "cert-controller"), "cert-controller")
    makers = {"certctl": lambda c, w: Certctl(c, w, os.path.abspath(args.certctl)),
              "cert-controller": lambda c, w: CertController(c, w, cert_controller)}
    started = time.monotonic()
    results = {}
    with tempfile.TemporaryDirectory(prefix="peers-") as workdir:
        for name, make in makers.items():
            try:
                results[name] = measure(make, os.path.join(workdir, name), steady,
                                        lambda text: print(f"peers: {text}", file=sys.stderr))
            except Exception:  # noqa: BLE001 - the report says what broke
                results[name] = {"failed": traceback.format_exc()}
    text = report(results, args, time.monotonic() - started)
    print(text)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    return 1 if any("failed" in figures for figures in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
