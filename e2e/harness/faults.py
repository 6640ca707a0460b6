"""Helpers for the fault suite (tests/faults/): faults aimed at one client, a monitor that
samples a running `certctl run` while a fault lasts, an independent check of a stored pair
(the `openssl` CLI as the oracle), a recorder of every stored version of a Secret, and a
folder made read-only even for root.

    with Monitor(sidecar) as monitor:
        user_fault(cluster, USER, status=503, count=10**6)
        ...
    monitor.check(ready=True)          # alive and /healthz 200 throughout, /readyz 200 throughout
"""

import base64
import contextlib
import datetime
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

from prometheus_client.parser import text_string_to_metric_families

API_PATHS = "^/(api|apis)/"   # every resource request (discovery and the admin API aside)
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


# --- faults and the request log ---------------------------------------------------------------

def user_fault(cluster, user, method="*", path=API_PATHS, status=None, count=1, retry_after=None,
               latency=0.0, watch=None, format="apf"):
    """Like Cluster.inject_fault, but only requests authenticated as `user` are matched (the
    emulator's `user` fault field), so the test's own requests go through meanwhile."""
    spec = {"method": method, "path": path, "status": status, "count": count,
            "latency": latency, "watch": watch, "format": format, "user": user}
    if retry_after is not None:
        spec["retryAfter"] = retry_after
    return cluster._admin("POST", "/_emulator/faults", spec)


def pending_faults(cluster):
    return cluster._admin("GET", "/_emulator/faults")["faults"]


def logged_at(entry):
    """When the emulator answered a request of its log, in unix seconds."""
    return datetime.datetime.strptime(entry["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def requests_of(cluster, user=None, since=None, until=None, verb=None, resource=None):
    """Entries of the request log by `user` (None: everyone), answered within [since, until]
    (unix seconds; None: unbounded), of `verb` and `resource` when given."""
    out = []
    for e in cluster.request_log()["requests"]:
        if user is not None and e["user"] != user:
            continue
        if verb is not None and e["verb"] != verb:
            continue
        if resource is not None and e["resource"] != resource:
            continue
        at = logged_at(e)
        if (since is not None and at < since) or (until is not None and at > until):
            continue
        out.append(e)
    return out


def successful_writes(entries, events=False):
    """(verb, resource, name, code) of the successful writes among `entries`; Events (best
    effort reports of the writes) only with events=True."""
    return [(e["verb"], e["resource"], e["name"], e["code"]) for e in entries
            if e["verb"] in WRITE_VERBS and e["code"] < 300
            and (events or e["resource"] != "events")]


def watch_resource_version(entry):
    query = urllib.parse.parse_qs(entry["query"])
    return int(query.get("resourceVersion", ["0"])[0] or 0)


# --- metrics ----------------------------------------------------------------------------------

def metric_samples(text):
    """{(sample name, frozenset(labels)): value} of a Prometheus text document."""
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return values


def metric(values, name, default=None, **labels):
    return values.get((name, frozenset(labels.items())), default)


def sidecar_metrics(sidecar):
    """The sidecar's metric samples, or None when /metrics does not answer 200."""
    status, body, _ = sidecar.get("/metrics", port=sidecar.metrics_port)
    return metric_samples(body) if status == 200 else None


# --- a sidecar watched while a fault lasts ----------------------------------------------------

class Sample:
    __slots__ = ("at", "alive", "healthz", "readyz", "body", "ready_metric", "ready_file",
                 "leader", "consistent")

    def __repr__(self):
        return (f"Sample(t={self.at:.2f} alive={self.alive} healthz={self.healthz} "
                f"readyz={self.readyz} {self.body!r} certctl_ready={self.ready_metric} "
                f"ready_file={self.ready_file} leader={self.leader})")


class Monitor:
    """Samples one `certctl run` every `interval` seconds in a thread: process alive,
    /healthz, /readyz, the certctl_ready and certctl_leader gauges and the ready file.
    A sample is consistent when /readyz, certctl_ready and the ready file agree; since the
    three are read one after the other, a sample that disagrees is taken again (up to three
    times, 20 ms apart) before it counts as inconsistent, so a change of verdict between two
    reads is not mistaken for a disagreement."""

    def __init__(self, sidecar, interval=0.2):
        self.sidecar = sidecar
        self.interval = interval
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="monitor", daemon=True)
        self._started = None

    def _take(self):
        s = Sample()
        s.at = time.monotonic() - self._started
        s.alive = self.sidecar.alive()
        s.healthz = self.sidecar.get("/healthz")[0]
        for attempt in range(3):
            values = sidecar_metrics(self.sidecar)
            status, body = self.sidecar.readyz()
            after = sidecar_metrics(self.sidecar)
            s.readyz, s.body = status, body
            s.ready_metric = None if values is None else metric(values, "certctl_ready")
            s.leader = None if values is None else metric(values, "certctl_leader")
            s.ready_file = os.path.exists(self.sidecar.ready_file)
            after_ready = None if after is None else metric(after, "certctl_ready")
            s.consistent = (values is not None and s.ready_metric == after_ready and
                            (status == 200) == (s.ready_metric == 1) == s.ready_file)
            if s.consistent or not s.alive:
                break
            time.sleep(0.02)
        return s

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(self._take())
            self._stop.wait(self.interval)

    def start(self):
        self._started = time.monotonic()
        self._thread.start()
        return self

    def stop(self):
        """Stops sampling, then takes one last sample: the last sample is the state now."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(15)
            self.samples.append(self._take())
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def check(self, ready=None):
        """Asserts over every sample: the process alive, /healthz 200, /readyz, certctl_ready
        and the ready file consistent; with ready=True also /readyz 200 in every sample.
        Returns the samples."""
        assert self.samples, "the monitor took no sample"
        dead = [s for s in self.samples if not s.alive]
        assert not dead, f"certctl run exited: {dead[0]}\n{self.sidecar.describe()}"
        unhealthy = [s for s in self.samples if s.healthz != 200]
        assert not unhealthy, f"/healthz not 200: {unhealthy[:5]}"
        inconsistent = [s for s in self.samples if not s.consistent]
        assert not inconsistent, f"readiness and metrics disagree: {inconsistent[:5]}"
        if ready:
            unready = [s for s in self.samples if s.readyz != 200]
            assert not unready, f"/readyz not 200 during the fault: {unready[:5]}"
        return self.samples


# --- stored pairs, checked with openssl -------------------------------------------------------

def _openssl(*args, input=None):
    return subprocess.run(["openssl", *args], input=input, capture_output=True, text=True,
                          timeout=30)


def _public_key_of_cert(pem):
    out = _openssl("x509", "-noout", "-pubkey", input=pem)
    return out.stdout if out.returncode == 0 else None


def _public_key_of_key(pem):
    out = _openssl("pkey", "-pubout", input=pem)
    return out.stdout if out.returncode == 0 else None


def pair_problems(data, host):
    """What is wrong with a Secret's data ({key: text}) as a serving pair for `host`, found
    with the openssl CLI: tls.crt must verify against ca.crt for TLS server use and `host`,
    tls.key must match tls.crt, and ca.key (when present) the CA. [] when it is valid."""
    problems = []
    for key in ("ca.crt", "tls.crt", "tls.key"):
        if not data.get(key):
            problems.append(f"{key} missing or empty")
    if problems:
        return problems
    folder = tempfile.mkdtemp(prefix="pair-")
    try:
        ca_path = os.path.join(folder, "ca.crt")
        leaf_path = os.path.join(folder, "tls.crt")
        with open(ca_path, "w", encoding="utf-8") as f:
            f.write(data["ca.crt"])
        with open(leaf_path, "w", encoding="utf-8") as f:
            f.write(data["tls.crt"])
        verified = _openssl("verify", "-CAfile", ca_path, "-purpose", "sslserver",
                            "-verify_hostname", host, leaf_path)
        if verified.returncode != 0 or f"{leaf_path}: OK" not in verified.stdout:
            problems.append(f"tls.crt does not verify: {verified.stdout}{verified.stderr}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    leaf_key = _public_key_of_cert(data["tls.crt"])
    if leaf_key is None or leaf_key != _public_key_of_key(data["tls.key"]):
        problems.append("tls.key does not match tls.crt")
    if data.get("ca.key"):
        ca_key = _public_key_of_cert(data["ca.crt"])
        if ca_key is None or ca_key != _public_key_of_key(data["ca.key"]):
            problems.append("ca.key does not match ca.crt")
    return problems


def decoded(secret):
    """A Secret object's data, decoded to text."""
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


# --- every stored version of a Secret ---------------------------------------------------------

class SecretRecorder:
    """Watches one Secret (as admin, from a given resourceVersion) in a thread and keeps
    every version the server stored: (resourceVersion, event type, object)."""

    def __init__(self, cluster, namespace, name, since):
        self.cluster = cluster
        self.versions = []
        self.error = None
        self._stream = cluster.watch(f"/api/v1/namespaces/{namespace}/secrets", timeout=600,
                                     fieldSelector=f"metadata.name={name}",
                                     resourceVersion=str(since), timeoutSeconds=600)
        assert self._stream.status == 200, self._stream.status
        self._thread = threading.Thread(target=self._run, name="secret-recorder", daemon=True)
        self._thread.start()

    def _run(self):
        try:
            for event in self._stream:
                obj = event["object"]
                if event["type"] == "ERROR":
                    self.error = obj
                    return
                self.versions.append((int(obj["metadata"]["resourceVersion"]), event["type"],
                                      obj))
        except Exception as e:  # noqa: BLE001 - reported by the test through .error
            self.error = repr(e)

    def wait_for(self, resource_version, bound=20.0):
        """Waits until the version `resource_version` (or a later one) was recorded."""
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            if self.versions and self.versions[-1][0] >= resource_version:
                return
            if self.error is not None or not self._thread.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"the Secret watch did not deliver version {resource_version}: "
                             f"{[v[:2] for v in self.versions]} error={self.error}")

    def stop(self):
        sock = getattr(self._stream._conn, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._stream.close()
        self._thread.join(5)


# --- a folder that even root cannot write -----------------------------------------------------

def _writable(path):
    probe = os.path.join(path, ".write-probe")
    try:
        with open(probe, "w", encoding="utf-8"):
            pass
    except OSError:
        return False
    os.unlink(probe)
    return True


@contextlib.contextmanager
def read_only_folder(path):
    """Makes `path` read-only for the duration, then writable again: by its mode for an
    ordinary user; for root (whom modes do not stop) with the immutable attribute
    (`chattr +i`), which forbids creating, renaming and removing entries to every user.
    Fails the test when neither takes effect here."""
    if os.geteuid() != 0:
        mode = os.stat(path).st_mode & 0o7777
        os.chmod(path, mode & ~0o222)
        undo = ["chmod", oct(mode)[2:], path]
    else:
        made = subprocess.run(["chattr", "+i", path], capture_output=True, text=True)
        if made.returncode != 0:
            raise AssertionError(f"cannot make {path} read-only for root: chattr +i: "
                                 f"{made.stderr.strip()}")
        undo = ["chattr", "-i", path]
    try:
        if _writable(path):
            raise AssertionError(f"{path} is still writable after {undo[0]}")
        yield
    finally:
        subprocess.run(undo, check=True, capture_output=True)
