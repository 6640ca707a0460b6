#!/usr/bin/python3
"""Whole-process benchmarks of `certctl run` (the sidecar controller) on the e2e API emulator.

Every figure is reported with a baseline measured in the same run, as a ratio:

  cold start   exec of `certctl run` to the first /readyz 200 (polled every 1 ms; the
               ready file is watched in the same loop): on an empty cluster (Secret absent,
               configuration without caBundle), after a restart (Secret, bundle and folder in
               place) and for a new replica (Secret and bundle in place, empty folder).
               Baselines: a whole `certctl check` of the same Secret and configuration
               (exec to exit), and one GET of the Secret by this script on a new connection.
  repair       a caBundle blanked by a JSON patch sent by this script, to the event of a
               watch (opened by this script) that shows it restored. Baseline: the same
               PATCH to the watch event of that write (the emulator's own round trip).
  memory       VmRSS/VmHWM of the run process once ready and after the repairs, CPU used
               while idle. Baseline: the peak RSS of the `certctl check` process.
  selector     cold start with --webhook-selector matching N configurations (500): time to
               ready. Baselines: one LIST of them, and the N JSON patches that blank them
               again, sent by this script one after the other on one connection.
  unrelated    RSS and time to ready with M unrelated Secrets (5000) in the namespace and
               as many in other namespaces, and C unrelated CRDs (200); the targets are a
               VWC and a CRD's conversion webhook, so both watches run. Baseline: the same run on the same emulator
               before they were created.

The emulator is Python: every request costs it milliseconds of CPU, which dominates the
cold start, the repair and the selector figures (the baselines show how much).

Usage: bench/run_bench.py [--certctl build/ci/certctl] [--quick] [--json FILE]
"""

import argparse
import base64
import http.client
import json
import os
import queue
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "e2e"))

from harness import Cluster  # noqa: E402
from harness.certctl import webhook_configuration  # noqa: E402
from harness.kubelet import free_ports  # noqa: E402
from harness.rbac import emulator_rules  # noqa: E402

NS = "bench"
SERVICE = "hook"
SECRET = "webhook-server-cert"
VWC = "hook"
USER = f"system:serviceaccount:{NS}:certctl"
LABEL_KEY, LABEL_VALUE = "bench.certctl.example.com/inject", "yes"
SELECTOR = f"{LABEL_KEY}={LABEL_VALUE}"
VWC_COLLECTION = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
CRD_COLLECTION = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TARGET_CRD = "widgets.hook.io"
SECRET_PATH = f"/api/v1/namespaces/{NS}/secrets/{SECRET}"
SCRUBBED = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE",
            "POD_NAME", "CERTCTL_SERVICEACCOUNT_DIR")
POLL = 0.001          # readiness poll period
READY_BOUND = 60.0    # a start that takes longer is an error
EVENT_BOUND = 10.0    # a watch event that takes longer is an error
SELECTOR_BOUND = 900.0  # ... a start with hundreds of targets
SELECTOR_POLL = 0.01  # readiness poll period of a start that takes seconds
BURST_GAP = 0.1       # between two wipes in the back-to-back series
TIME = "/usr/bin/time"  # GNU time, for the peak RSS of a whole process


class BenchError(RuntimeError):
    pass


# --- statistics ---------------------------------------------------------------------------

def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values):
    return percentile(values, 50)


# --- talking to the emulator --------------------------------------------------------------

class Api:
    """Admin requests to the emulator on one kept-alive HTTPS connection."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.token = cluster.admin_token
        self.context = ssl.create_default_context(cafile=cluster.ca_path)
        self.conn = None

    def connect(self):
        conn = http.client.HTTPSConnection("127.0.0.1", self.cluster.port, context=self.context,
                                           timeout=60)
        conn.connect()
        return conn

    def request(self, method, path, body=None, content_type="application/json", conn=None):
        """(status, body bytes); reconnects once when the kept connection was closed."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if body is not None:
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            headers["Content-Type"] = content_type
        for attempt in (0, 1):
            own = conn
            if own is None:
                if self.conn is None:
                    self.conn = self.connect()
                own = self.conn
            try:
                own.request(method, path, body=body, headers=headers)
                resp = own.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, OSError):
                if conn is not None or attempt:
                    raise
                self.conn.close()
                self.conn = None
        raise AssertionError("unreachable")

    def json(self, method, path, body=None, content_type="application/json", ok=(200, 201)):
        status, data = self.request(method, path, body, content_type)
        if status not in ok:
            raise BenchError(f"{method} {path}: {status} {data[:300]!r}")
        return json.loads(data) if data else None

    def fresh_get(self, path):
        """One GET on a new connection (TCP, TLS handshake, request): seconds."""
        started = time.perf_counter()
        conn = self.connect()
        try:
            status, _ = self.request("GET", path, conn=conn)
        finally:
            conn.close()
        elapsed = time.perf_counter() - started
        if status != 200:
            raise BenchError(f"GET {path}: {status}")
        return elapsed

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class Watch:
    """A watch opened by this script; a thread stamps each event (perf_counter) on arrival."""

    def __init__(self, api, collection, resource_version, **params):
        query = urllib.parse.urlencode({"watch": "true", "resourceVersion": resource_version,
                                        "timeoutSeconds": 3600, **params})
        self.conn = http.client.HTTPSConnection("127.0.0.1", api.cluster.port,
                                                context=api.context, timeout=None)
        self.conn.request("GET", f"{collection}?{query}",
                          headers={"Authorization": f"Bearer {api.token}"})
        self.response = self.conn.getresponse()
        if self.response.status != 200:
            raise BenchError(f"watch {collection}: {self.response.status}")
        self.events = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            while True:
                line = self.response.readline()
                if not line:
                    break
                self.events.put((time.perf_counter(), json.loads(line)))
        except Exception:  # noqa: BLE001 - the stream was closed under the reader
            pass
        self.events.put((time.perf_counter(), None))

    def next(self, bound=EVENT_BOUND):
        try:
            stamp, event = self.events.get(timeout=bound)
        except queue.Empty:
            raise BenchError(f"no watch event within {bound:g}s") from None
        if event is None:
            raise BenchError("the watch ended")
        return stamp, event

    def close(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self.thread.join(5)


# --- processes ----------------------------------------------------------------------------

def proc_status_kib(pid):
    """{'VmRSS', 'VmHWM', 'RssAnon', 'RssFile': KiB} of a live process (RssFile: pages of
    the binary and the shared libraries, shared with every process that maps them)."""
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(rest.split()[0])
    return out


def proc_cpu_seconds(pid):
    """utime + stime of a live process."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reap(proc):
    """Waits for proc with wait4: (exit code, peak RSS KiB from rusage)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss


def try_get(port, path):
    """Status of GET path on 127.0.0.1:port, or None when nothing answers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except OSError:
        return None
    finally:
        conn.close()


class RunProcess:
    """One `certctl run` with in-cluster configuration as USER (the chart's RBAC)."""

    def __init__(self, bench, cert_dir, targets):
        self.bench = bench
        self.cert_dir = cert_dir
        base = os.path.join(bench.work, f"run-{bench.next_id()}")
        self.ready_file = base + ".ready"
        self.stderr_path = base + ".stderr"
        self.health_port, = free_ports(1)
        self.argv = [bench.certctl, "run", "--service", SERVICE, "-n", NS,
                     "--secret", SECRET, "--cert-dir", cert_dir, "--ready-file", self.ready_file,
                     "--health-addr", f"127.0.0.1:{self.health_port}", "--metrics-addr", "",
                     "--log-level", "warn", *targets]
        self.proc = None
        self.started = None

    def start(self):
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env.update(self.bench.cluster.in_cluster_env(USER, NS))
        with open(self.stderr_path, "wb") as err:
            self.started = time.perf_counter()
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=env)
        return self

    def log(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_ready(self, bound=READY_BOUND, poll=POLL):
        """Polls /readyz (and the ready file) every `poll` seconds from exec: seconds to the
        first 200 and to the ready file, both measured from just before the fork."""
        readyz = ready_file = None
        tick = self.started
        deadline = self.started + bound
        while readyz is None or ready_file is None:
            if ready_file is None and os.path.exists(self.ready_file):
                ready_file = time.perf_counter() - self.started
            if readyz is None and try_get(self.health_port, "/readyz") == 200:
                readyz = time.perf_counter() - self.started
            if self.proc.poll() is not None:
                raise BenchError(f"certctl run exited ({self.proc.returncode}):\n{self.log()}")
            now = time.perf_counter()
            if now > deadline:
                raise BenchError(f"certctl run not ready after {bound:g}s:\n{self.log()}")
            tick += poll
            if tick > now:
                time.sleep(tick - now)
            else:
                tick = now
        return readyz, ready_file

    def memory(self):
        return proc_status_kib(self.proc.pid)

    def cpu(self):
        return proc_cpu_seconds(self.proc.pid)

    def stop(self):
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pid, status, _ = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                return
            time.sleep(0.01)
        self.proc.kill()
        reap(self.proc)


# --- cluster state ------------------------------------------------------------------------

def vwc_path(name):
    return f"{VWC_COLLECTION}/{name}"


def strip_bundles_patch(vwc):
    """JSON patch removing every caBundle of a configuration (None when there is none)."""
    ops = [{"op": "remove", "path": f"/webhooks/{i}/clientConfig/caBundle"}
           for i, w in enumerate(vwc.get("webhooks", [])) if "caBundle" in w["clientConfig"]]
    return ops or None


class Bench:
    """One emulator with the namespace, certctl's service account and VWC `hook`."""

    def __init__(self, certctl, work, targets_rbac):
        self.certctl = certctl
        self.work = work
        self.cluster = Cluster()
        self.cluster.start()
        self._id = 0
        self.runs = []
        try:
            self.api = Api(self.cluster)
            self.api.json("POST", "/api/v1/namespaces",
                          {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            self.cluster.add_user(USER, emulator_rules("sidecar", SECRET, NS, targets_rbac))
        except BaseException:
            self.cluster.stop()
            raise

    def next_id(self):
        self._id += 1
        return self._id

    def new_cert_dir(self):
        path = os.path.join(self.work, f"certs-{self.next_id()}")
        return path

    def run(self, cert_dir, targets):
        process = RunProcess(self, cert_dir, targets)
        self.runs.append(process)
        return process.start()

    def create_vwc(self, name, webhooks, labels=None):
        manifest = webhook_configuration("ValidatingWebhookConfiguration", name, webhooks,
                                         service=SERVICE, namespace=NS, labels=labels)
        self.api.json("POST", VWC_COLLECTION, manifest)

    def reset(self, names):
        """Back to an empty cluster: Secret absent, no caBundle on the named configurations.
        Returns the seconds the JSON patches took (sent one after the other)."""
        status, _ = self.api.request("DELETE", SECRET_PATH)
        if status not in (200, 404):
            raise BenchError(f"DELETE Secret: {status}")
        patches = []
        for name in names:
            ops = strip_bundles_patch(self.api.json("GET", vwc_path(name)))
            if ops:
                patches.append((name, ops))
        started = time.perf_counter()
        for name, ops in patches:
            self.api.json("PATCH", vwc_path(name), ops, "application/json-patch+json")
        return time.perf_counter() - started, len(patches)

    def check(self, targets):
        """A whole `certctl check` process, exec to exit: seconds."""
        started = time.perf_counter()
        proc = subprocess.run(self.check_argv(targets), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=self.certctl_env(), check=False)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            raise BenchError(f"certctl check exited {proc.returncode}")
        return elapsed

    def peak_rss(self, argv):
        """Peak RSS (KiB) of a whole process, by GNU time (wait4): a child forked from this
        Python process would report Python's own RSS, which the kernel keeps across exec."""
        report = os.path.join(self.work, f"time-{self.next_id()}")
        proc = subprocess.run([TIME, "-f", "%M", "-o", report, *argv], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=self.certctl_env(), check=False)
        if proc.returncode != 0:
            raise BenchError(f"{argv} exited {proc.returncode}")
        with open(report, encoding="ascii") as f:
            return int(f.read().split()[-1])

    def check_argv(self, targets):
        return [self.certctl, "check", "--service", SERVICE, "-n", NS, "--secret", SECRET,
                *targets]

    def certctl_env(self):
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env.update(self.cluster.in_cluster_env(USER, NS))
        return env

    def requests_by(self, user):
        return [e for e in self.cluster.request_log()["requests"] if e["user"] == user]

    def close(self):
        for process in self.runs:
            process.stop()
        self.api.close()
        self.cluster.stop()


# --- scenarios ----------------------------------------------------------------------------

def wipe_and_wait(bench, watch, bundle, count, pause):
    """`count` times: blank the first caBundle of VWC hook with a JSON patch, wait for the
    watch event that shows it restored, then `pause` seconds. Returns the seconds from the
    PATCH sent to the event of the blanking write (the emulator's round trip) and to the
    event of the repair, and certctl's API requests by verb over the whole series."""
    wipe = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ""}]
    rtt, repair = [], []
    bench.cluster.reset_request_log()
    for _ in range(count):
        sent = time.perf_counter()
        bench.api.json("PATCH", vwc_path(VWC), wipe, "application/json-patch+json")
        blank_seen = restored_seen = None
        while restored_seen is None:
            stamp, event = watch.next()
            if event["type"] != "MODIFIED":
                continue
            value = event["object"]["webhooks"][0]["clientConfig"].get("caBundle", "")
            if value == "" and blank_seen is None:
                blank_seen = stamp
            elif value == bundle and blank_seen is not None:
                restored_seen = stamp
        rtt.append(blank_seen - sent)
        repair.append(restored_seen - sent)
        time.sleep(pause)
    verbs = {}
    for entry in bench.requests_by(USER):
        verbs[entry["verb"]] = verbs.get(entry["verb"], 0) + 1
    return {"repair": repair, "rtt": rtt, "certctl_requests": verbs, "count": count,
            "pause": pause}


def scenario_cold_and_repair(certctl, work, runs, repairs, idle, gap):
    """Cold start, restart, new replica (with the check and GET baselines interleaved), then
    repairs and memory on one steady process."""
    out = {}
    bench = Bench(certctl, work, {"validatingWebhooks": [VWC]})
    try:
        bench.create_vwc(VWC, ["a.hook.io", "b.hook.io"])
        targets = ["--validating-webhook", VWC]
        series = {k: [] for k in ("cold", "cold_file", "restart", "restart_file", "replica",
                                  "replica_file", "check", "get")}
        for _ in range(runs):
            bench.reset([VWC])
            folder = bench.new_cert_dir()
            for variant, cert_dir in (("cold", folder), ("restart", folder),
                                      ("replica", bench.new_cert_dir())):
                process = bench.run(cert_dir, targets)
                readyz, ready_file = process.wait_ready()
                process.stop()
                series[variant].append(readyz)
                series[variant + "_file"].append(ready_file)
            series["check"].append(bench.check(targets))
            series["get"].append(bench.api.fresh_get(SECRET_PATH))
        out["start"] = series

        # Repairs and memory on one process, started with everything valid.
        process = bench.run(bench.new_cert_dir(), targets)
        process.wait_ready()
        time.sleep(0.5)  # the passes that follow the start settle
        memory = {"ready": process.memory()}
        cpu_before = process.cpu()
        time.sleep(idle)
        memory["idle_cpu_s"] = process.cpu() - cpu_before
        memory["idle_s"] = idle
        memory["check_peak_kib"] = median([bench.peak_rss(bench.check_argv(targets))
                                           for _ in range(3)])
        memory["version_peak_kib"] = bench.peak_rss([certctl, "version"])

        vwc = bench.api.json("GET", vwc_path(VWC))
        bundle = vwc["webhooks"][0]["clientConfig"]["caBundle"]
        watch = Watch(bench.api, VWC_COLLECTION, vwc["metadata"]["resourceVersion"],
                      fieldSelector=f"metadata.name={VWC}")
        try:
            out["repair"] = {}
            for regime, pause in (("spaced", gap), ("burst", BURST_GAP)):
                out["repair"][regime] = wipe_and_wait(bench, watch, bundle, repairs, pause)
        finally:
            watch.close()
        memory["repaired"] = process.memory()
        memory["repairs"] = 2 * repairs
        out["memory"] = memory
        process.stop()
    finally:
        bench.close()
    return out


def scenario_selector(certctl, work, configs, runs):
    """Cold start with --webhook-selector matching `configs` configurations."""
    bench = Bench(certctl, work, {"webhookSelector": SELECTOR})
    try:
        names = [f"sel-{i:04d}" for i in range(configs)]
        started = time.perf_counter()
        for name in names:
            bench.create_vwc(name, [f"a.{name}.hook.io"], labels={LABEL_KEY: LABEL_VALUE})
        created = time.perf_counter() - started
        targets = ["--webhook-selector", SELECTOR]
        series = {"ready": [], "ready_file": [], "list": [], "patches": [], "writes": [],
                  "requests": []}
        list_path = f"{VWC_COLLECTION}?labelSelector={urllib.parse.quote(SELECTOR)}"
        for _ in range(runs):
            patching, patched = bench.reset(names)
            if patched == configs:  # the first reset finds no bundle to remove
                series["patches"].append(patching)
            series["list"].append(bench.api.fresh_get(list_path))
            bench.cluster.reset_request_log()
            process = bench.run(bench.new_cert_dir(), targets)
            readyz, ready_file = process.wait_ready(SELECTOR_BOUND, SELECTOR_POLL)
            series["ready"].append(readyz)
            series["ready_file"].append(ready_file)
            process.stop()
            listed = bench.api.json("GET", list_path)["items"]
            missing = [o["metadata"]["name"] for o in listed
                       if not o["webhooks"][0]["clientConfig"].get("caBundle")]
            if len(listed) != configs or missing:
                raise BenchError(f"{len(missing)} of {len(listed)} configurations not injected")
            log = bench.requests_by(USER)
            series["writes"].append(sum(1 for e in log if e["verb"] == "patch" and
                                        e["resource"] == "validatingwebhookconfigurations"))
            series["requests"].append(len(log))
        # One more reset gives the patch baseline when runs == 1.
        if not series["patches"]:
            patching, _ = bench.reset(names)
            series["patches"].append(patching)
        series["configs"] = configs
        series["create_s"] = created
        return series
    finally:
        bench.close()


def create_secrets(api, namespace, count, payload):
    path = f"/api/v1/namespaces/{namespace}/secrets"
    for i in range(count):
        api.json("POST", path, {"apiVersion": "v1", "kind": "Secret",
                                "metadata": {"name": f"unrelated-{i:05d}",
                                             "labels": {"bench": "unrelated"}},
                                "type": "Opaque", "data": {"blob": payload}})


def measure_steady(bench, targets, repairs):
    """Cold start (after a reset), a few repairs, memory: a dict of figures."""
    bench.reset([VWC])
    process = bench.run(bench.new_cert_dir(), targets)
    readyz, _ = process.wait_ready()
    time.sleep(0.5)
    ready = process.memory()
    vwc = bench.api.json("GET", vwc_path(VWC))
    bundle = vwc["webhooks"][0]["clientConfig"]["caBundle"]
    wipe = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ""}]
    for _ in range(repairs):
        bench.api.json("PATCH", vwc_path(VWC), wipe, "application/json-patch+json")
        deadline = time.monotonic() + EVENT_BOUND
        while bench.api.json("GET", vwc_path(VWC))["webhooks"][0]["clientConfig"].get(
                "caBundle") != bundle:
            if time.monotonic() > deadline:
                raise BenchError("a caBundle was not repaired")
            time.sleep(0.01)
        time.sleep(0.1)
    repaired = process.memory()
    process.stop()
    return {"ready_s": readyz, "rss_ready": ready["VmRSS"], "rss_repaired": repaired["VmRSS"],
            "hwm": repaired["VmHWM"]}


def crd_manifest(plural, group, conversion_service=None):
    manifest = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.{group}"},
                "spec": {"group": group, "scope": "Namespaced",
                         "names": {"plural": plural, "singular": plural[:-1],
                                   "kind": plural[:-1].capitalize()},
                         "versions": [{"name": "v1", "served": True, "storage": True,
                                       "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    if conversion_service:
        manifest["spec"]["conversion"] = {
            "strategy": "Webhook",
            "webhook": {"conversionReviewVersions": ["v1"],
                        "clientConfig": {"service": {"name": conversion_service,
                                                     "namespace": NS, "path": "/convert"}}}}
    return manifest


def scenario_unrelated(certctl, work, secrets, others, crds, repairs):
    """The same steady run (a VWC and a CRD conversion webhook as targets) on an empty
    cluster and with `secrets` unrelated Secrets in the namespace plus `secrets` spread over
    `others` other namespaces, and `crds` unrelated CRDs."""
    bench = Bench(certctl, work, {"validatingWebhooks": [VWC], "crds": [TARGET_CRD]})
    try:
        bench.create_vwc(VWC, ["a.hook.io", "b.hook.io"])
        plural, _, group = TARGET_CRD.partition(".")
        bench.api.json("POST", CRD_COLLECTION, crd_manifest(plural, group, SERVICE))
        targets = ["--validating-webhook", VWC, "--crd", TARGET_CRD]
        empty = measure_steady(bench, targets, repairs)
        payload = base64.b64encode(os.urandom(768)).decode()  # 1 KiB of data each
        started = time.perf_counter()
        create_secrets(bench.api, NS, secrets, payload)
        per_other = max(1, secrets // others)
        for i in range(others):
            name = f"other-{i}"
            bench.api.json("POST", "/api/v1/namespaces",
                           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            create_secrets(bench.api, name, per_other, payload)
        for i in range(crds):
            bench.api.json("POST", CRD_COLLECTION,
                           crd_manifest(f"things{i}s", "unrelated.example.com", SERVICE))
        created = time.perf_counter() - started
        status, body = bench.api.request("GET", f"/api/v1/namespaces/{NS}/secrets")
        if status != 200:
            raise BenchError(f"LIST secrets: {status}")
        loaded = measure_steady(bench, targets, repairs)
        return {"empty": empty, "loaded": loaded, "secrets": secrets,
                "other_secrets": per_other * others, "crds": crds,
                "namespace_list_bytes": len(body), "create_s": created}
    finally:
        bench.close()


# --- report -------------------------------------------------------------------------------

def ms(seconds):
    return f"{seconds * 1000:.1f} ms"


def mib(kib):
    return f"{kib / 1024:.2f} MiB"


def report(results):
    rows = []
    start = results["start"]
    check = median(start["check"])
    get = median(start["get"])
    runs = len(start["check"])
    for variant, what in (("cold", "cold start to /readyz 200 (empty cluster)"),
                          ("restart", "restart to /readyz 200 (all valid, folder kept)"),
                          ("replica", "new replica to /readyz 200 (all valid, empty folder)")):
        values = start[variant]
        rows.append((f"{what}, {runs} runs",
                     f"p50 {ms(median(values))}, p90 {ms(percentile(values, 90))}",
                     f"{median(values) / check:.2f}x check, {median(values) / get:.1f}x GET"))
        files = start[variant + "_file"]
        rows.append(("  same, to the ready file", f"p50 {ms(median(files))}",
                     f"{median(files) / check:.2f}x check"))
    rows.append(("baseline: certctl check, exec to exit",
                 f"p50 {ms(check)}, p90 {ms(percentile(start['check'], 90))}", "1.00"))
    rows.append(("baseline: one GET of the Secret, new connection", f"p50 {ms(get)}",
                 f"{get / check:.2f}x check"))

    for regime, series in results["repair"].items():
        rtt50, rtt99 = median(series["rtt"]), percentile(series["rtt"], 99)
        rep50, rep99 = median(series["repair"]), percentile(series["repair"], 99)
        rows.append((f"repair, {series['count']} wipes {series['pause']:g} s apart: "
                     "PATCH sent to restored event",
                     f"p50 {ms(rep50)}, p99 {ms(rep99)}",
                     f"p50 {rep50 / rtt50:.1f}x, p99 {rep99 / rtt99:.1f}x round trip"))
        rows.append(("  baseline: the PATCH sent to its own watch event",
                     f"p50 {ms(rtt50)}, p99 {ms(rtt99)}", "1.00"))
        per = {verb: n / series["count"]
               for verb, n in sorted(series["certctl_requests"].items())}
        rows.append(("  certctl's API requests per repair",
                     ", ".join(f"{verb} {n:.1f}" for verb, n in per.items()), ""))

    memory = results["memory"]
    base = memory["check_peak_kib"]
    for key, what in (("ready", "once ready"), ("repaired", f"after {memory['repairs']} repairs")):
        m = memory[key]
        rows.append((f"run VmRSS / VmHWM {what}", f"{mib(m['VmRSS'])} / {mib(m['VmHWM'])}",
                     f"{m['VmRSS'] / base:.2f}x / {m['VmHWM'] / base:.2f}x check peak"))
        rows.append(("  of which RssAnon / RssFile (libraries, binary)",
                     f"{mib(m['RssAnon'])} / {mib(m['RssFile'])}", ""))
    rows.append(("baseline: certctl check, peak RSS (GNU time)", mib(base), "1.00"))
    rows.append(("  certctl version, peak RSS", mib(memory["version_peak_kib"]),
                 f"{memory['version_peak_kib'] / base:.2f}x check"))
    rows.append((f"run CPU while idle for {memory['idle_s']:g} s",
                 f"{memory['idle_cpu_s'] * 1000:.0f} ms", ""))

    sel = results["selector"]
    lst = median(sel["list"])
    patches = median(sel["patches"])
    ready = median(sel["ready"])
    rows.append((f"{sel['configs']} configurations by selector, cold start to /readyz 200",
                 f"p50 {ms(ready)} ({len(sel['ready'])} runs)",
                 f"{ready / lst:.1f}x LIST, {ready / patches:.2f}x patches"))
    rows.append(("  certctl's requests (patches of configurations)",
                 f"{median(sel['requests']):.0f} ({median(sel['writes']):.0f}), "
                 f"{median(sel['requests']) / ready:.1f} per s", ""))
    rows.append((f"baseline: one LIST of the {sel['configs']}, new connection",
                 f"p50 {ms(lst)}", "1.00"))
    rows.append((f"baseline: {sel['configs']} JSON patches by this script, one connection",
                 f"p50 {ms(patches)}", f"{patches / lst:.1f}x LIST"))

    unrel = results["unrelated"]
    empty, loaded = unrel["empty"], unrel["loaded"]
    label = (f"{unrel['secrets']} + {unrel['other_secrets']} unrelated Secrets, "
             f"{unrel['crds']} CRDs")
    rows.append((f"{label}: VmRSS ready / repaired / VmHWM",
                 f"{mib(loaded['rss_ready'])} / {mib(loaded['rss_repaired'])} / "
                 f"{mib(loaded['hwm'])}",
                 f"{loaded['rss_ready'] / empty['rss_ready']:.3f} / "
                 f"{loaded['rss_repaired'] / empty['rss_repaired']:.3f} / "
                 f"{loaded['hwm'] / empty['hwm']:.3f} x empty"))
    rows.append(("baseline: the same on the empty cluster",
                 f"{mib(empty['rss_ready'])} / {mib(empty['rss_repaired'])} / "
                 f"{mib(empty['hwm'])}", "1.000"))
    rows.append((f"{label}: cold start to /readyz 200", ms(loaded["ready_s"]),
                 f"{loaded['ready_s'] / empty['ready_s']:.2f}x empty "
                 f"({ms(empty['ready_s'])}; one run each)"))
    rows.append(("  (one LIST of the namespace's Secrets is",
                 f"{unrel['namespace_list_bytes'] / 1048576:.1f} MiB)", ""))

    width = [max(len(r[i]) for r in rows) for i in range(2)]
    print(f"certctl: {results['certctl']} ({results['version']})")
    print(f"load average before / after: {results['load_before']} / {results['load_after']}")
    print(f"{'measurement':{width[0]}}  {'measured':{width[1]}}  ratio")
    for row in rows:
        print(f"{row[0]:{width[0]}}  {row[1]:{width[1]}}  {row[2]}".rstrip())


def load_average():
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--certctl", default=os.path.join(ROOT, "build", "ci", "certctl"))
    parser.add_argument("--quick", action="store_true",
                        help="a few runs of each scenario (a smoke test, not a measurement)")
    parser.add_argument("--json", help="also write the raw figures to this file")
    sizes = parser.add_argument_group("sizes (defaults: the full run, or --quick's)")
    sizes.add_argument("--runs", type=int, help="cold starts of each kind (20)")
    sizes.add_argument("--repairs", type=int, help="wipes in each repair series (100)")
    sizes.add_argument("--gap", type=float,
                       help="seconds between two wipes of the spaced series (1.5)")
    sizes.add_argument("--idle", type=float, help="seconds of idle CPU measured (60)")
    sizes.add_argument("--configs", type=int, help="configurations selected (500)")
    sizes.add_argument("--selector-runs", type=int, help="cold starts with them (3)")
    sizes.add_argument("--secrets", type=int,
                       help="unrelated Secrets in the namespace, as many in others (5000)")
    sizes.add_argument("--others", type=int, help="other namespaces for them (5)")
    sizes.add_argument("--crds", type=int, help="unrelated CRDs (200)")
    sizes.add_argument("--unrelated-repairs", type=int, help="repairs in that scenario (10)")
    args = parser.parse_args()
    certctl = os.path.abspath(args.certctl)
    if not os.access(certctl, os.X_OK):
        parser.error(f"not an executable: {certctl}")
    if args.quick:
        sizes = dict(runs=2, repairs=3, gap=0.3, idle=0.2, configs=5, selector_runs=1,
                     secrets=20, others=2, crds=5, unrelated_repairs=1)
    else:
        sizes = dict(runs=20, repairs=100, gap=1.5, idle=60.0, configs=500, selector_runs=3,
                     secrets=5000, others=5, crds=200, unrelated_repairs=10)
    for key in sizes:
        value = getattr(args, key)
        if value is not None:
            sizes[key] = value

    work = tempfile.mkdtemp(prefix="certctl-run-bench-")
    version = subprocess.run([certctl, "version"], capture_output=True, text=True).stdout
    results = {"certctl": certctl, "version": version.strip(), "sizes": sizes,
               "load_before": load_average()}
    try:
        def step(name):
            print(f"-- {name}", file=sys.stderr, flush=True)

        step(f"cold start x{sizes['runs']}, 2 x {sizes['repairs']} repairs")
        results.update(scenario_cold_and_repair(certctl, work, sizes["runs"], sizes["repairs"],
                                                sizes["idle"], sizes["gap"]))
        step(f"{sizes['configs']} configurations by selector x{sizes['selector_runs']}")
        results["selector"] = scenario_selector(certctl, work, sizes["configs"],
                                                sizes["selector_runs"])
        step(f"{sizes['secrets']} unrelated Secrets, {sizes['crds']} CRDs")
        results["unrelated"] = scenario_unrelated(certctl, work, sizes["secrets"],
                                                  sizes["others"], sizes["crds"],
                                                  sizes["unrelated_repairs"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["load_after"] = load_average()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    report(results)


if __name__ == "__main__":
    main()
