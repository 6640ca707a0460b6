"""The API server's side of a webhook call, in a loop: `ApiServerProbe` reads the caBundle of
every target from the emulator, then for each webhook endpoint makes a TLS handshake trusting
only that bundle and verifying the Service's DNS name, and posts an AdmissionReview over it,
every ~20 ms until stopped. Every failure is kept with what was trusted and what was served.

On the real backend the API server makes the calls itself: `RealAdmissionProbe` sends it a
dry-run ConfigMap create in the webhooks' namespace every ~20 ms, which kube-apiserver admits
only after calling every matching webhook (sideEffects None: dry-run requests are called
too), and counts what it answers. `probe_for()` picks the probe of the cluster's backend.
"""

import base64
import hashlib
import http.client
import json
import socket
import ssl
import threading
import time
import uuid

from .sidecar import admission_review

__all__ = ["ApiServerProbe", "RealAdmissionProbe", "admission_call", "bundle_fingerprints",
           "probe_for", "served_serials"]


def bundle_fingerprints(pem):
    """SHA-256 of each certificate of a PEM bundle (DER), in order."""
    prints = []
    marker = "-----BEGIN CERTIFICATE-----"
    for block in pem.split(marker)[1:]:
        body = marker + block.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----"
        prints.append(hashlib.sha256(ssl.PEM_cert_to_DER_cert(body)).hexdigest()[:16])
    return prints


def admission_call(port, host, context, namespace="default", timeout=5.0, on_leaf=None):
    """One call as the API server makes it: a TLS handshake with 127.0.0.1:`port` through
    `context` (which trusts only a caBundle) verifying `host`, then an AdmissionReview that
    must come back allowed with its uid. `on_leaf(fingerprint)` hears the served leaf once
    the handshake verified. Raises on any failure."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        tls = context.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn.sock = tls
    try:
        if on_leaf is not None:
            on_leaf(hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()[:16])
        uid = str(uuid.uuid4())
        conn.request("POST", "/validate?timeout=10s",
                     body=json.dumps(admission_review(uid, namespace=namespace)),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise ValueError(f"AdmissionReview answered {resp.status}: {body[:200]!r}")
        answer = json.loads(body)["response"]
        if answer != {"uid": uid, "allowed": True}:
            raise ValueError(f"AdmissionReview answer {answer}")
    finally:
        conn.close()


def _bundles(obj):
    """The distinct caBundles (decoded PEM) of a webhook configuration, CRD or APIService."""
    configs = []
    if "webhooks" in obj:
        configs = [w.get("clientConfig", {}) for w in obj.get("webhooks") or []]
    elif obj.get("kind") == "CustomResourceDefinition":
        configs = [obj["spec"]["conversion"]["webhook"]["clientConfig"]]
    else:
        configs = [obj.get("spec", {})]
    return sorted({base64.b64decode(c.get("caBundle", "")).decode() for c in configs})


class ApiServerProbe:
    """A thread that calls every endpoint in `ports()` (a callable: the set may change) the way
    the API server would, through the bundle of each target in `paths`, every `interval`."""

    def __init__(self, cluster, paths, ports, host, namespace, interval=0.02, timeout=5.0):
        self.cluster, self.paths, self.ports, self.host = cluster, paths, ports, host
        self.namespace, self.interval, self.timeout = namespace, interval, timeout
        self.calls = 0            # handshake + AdmissionReview, both fine
        self.rounds = 0
        self.failures = []        # (monotonic, target, port, trusted CAs, error)
        self.read_errors = []     # the emulator did not answer a GET (not a webhook failure)
        self.bundles_seen = []    # distinct bundles (fingerprint lists), in order
        self.leaves_seen = []     # distinct served leaves (fingerprints), in order
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="api-server-probe", daemon=True)

    # -- one call ---------------------------------------------------------------------------

    def _call(self, port, bundle):
        def seen(leaf):
            if leaf not in self.leaves_seen:
                self.leaves_seen.append(leaf)

        context = ssl.create_default_context(cadata=bundle)  # only this bundle is trusted
        admission_call(port, self.host, context, self.namespace, self.timeout, on_leaf=seen)

    def _targets(self):
        """(path, object) of each target as the API server has it now; a read that fails is
        kept in read_errors (not a webhook failure), and every bundle met in bundles_seen."""
        out = []
        for path in self.paths:
            try:
                resp = self.cluster.api("GET", path, timeout=self.timeout)
            except OSError as e:
                self.read_errors.append((time.monotonic(), path, f"{type(e).__name__}: {e}"))
                continue
            if resp.status != 200:
                self.read_errors.append((time.monotonic(), path, resp.status))
                continue
            obj = resp.json()
            for bundle in _bundles(obj):
                trusted = bundle_fingerprints(bundle)
                if trusted not in self.bundles_seen:
                    self.bundles_seen.append(trusted)
            out.append((path, obj))
        return out

    def _round(self):
        for path, obj in self._targets():
            for bundle in _bundles(obj):
                trusted = bundle_fingerprints(bundle)
                for port in self.ports():
                    try:
                        if not trusted:
                            raise ValueError("the caBundle is empty")
                        self._call(port, bundle)
                    except (OSError, ValueError, KeyError, http.client.HTTPException) as e:
                        self.failures.append((time.monotonic(), path, port, trusted,
                                              f"{type(e).__name__}: {e}"))
                    else:
                        self.calls += 1
        self.rounds += 1

    def _run(self):
        while not self._stop.is_set():
            started = time.monotonic()
            self._round()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    # -- control ----------------------------------------------------------------------------

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(30)
        return self

    def wait_rounds(self, count, bound=30.0):
        """Blocks until `count` more rounds ran (so a state is known to have been probed)."""
        target = self.rounds + count
        deadline = time.monotonic() + bound
        while self.rounds < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"the probe ran {self.rounds} rounds, not {target}")
            time.sleep(0.01)

    def report(self):
        lines = [f"{self.rounds} rounds, {self.calls} calls, {len(self.failures)} failures, "
                 f"{len(self.read_errors)} read errors",
                 f"bundles seen: {self.bundles_seen}", f"leaves seen: {self.leaves_seen}"]
        lines += [f"  {t:.3f} {path} port {port} trusting {trusted}: {error}"
                  for t, path, port, trusted, error in self.failures[:20]]
        return "\n".join(lines)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def served_serials(*logs):
    """The distinct serials the example webhook servers logged as loaded, in order."""
    serials = []
    for text in logs:
        for line in text.splitlines():
            if "the certificate: serial=" in line:
                serial = line.split("serial=", 1)[1].split()[0]
                if serial not in serials:
                    serials.append(serial)
    return serials


def dry_run_admission(cluster, namespace, prefix, timeout):
    """One dry-run ConfigMap create in `namespace`: kube-apiserver sends it through every
    webhook entry that matches ConfigMap creates (sideEffects None), writing nothing. Returns
    (status, message): 201 and "" when admitted, else the Status message of the refusal.
    Raises OSError or HTTPException when no answer came."""
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{prefix}-{uuid.uuid4().hex[:12]}"}}
    resp = cluster.api("POST", f"/api/v1/namespaces/{namespace}/configmaps?dryRun=All", body,
                       timeout=timeout)
    if resp.status == 201:
        return 201, ""
    message = resp.body.decode(errors="replace")
    try:
        message = resp.json().get("message", message)
    except ValueError:
        pass
    return resp.status, message


class RealAdmissionProbe(ApiServerProbe):
    """The probe of the real backend: each round reads the targets' bundles (what the API
    server trusts now) and sends one dry-run ConfigMap create; a create the API server did
    not admit is a failed call, with its answer. `served()` returns the serials the webhook
    servers serve (their logs): leaves_seen, as the API server met them. An admitted create
    counts one call for each webhook entry of the targets (each matches it: the API server
    called them all), as the emulator's probe counts one per entry and endpoint."""

    def __init__(self, cluster, paths, served, namespace, interval=0.02, timeout=15.0):
        super().__init__(cluster, paths, lambda: [], None, namespace, interval, timeout)
        self.served = served

    def _round(self):
        entries = sum(len(obj.get("webhooks") or [None]) for _, obj in self._targets())
        try:
            status, message = dry_run_admission(self.cluster, self.namespace, "probe",
                                                self.timeout)
        except (OSError, http.client.HTTPException) as e:
            self.read_errors.append((time.monotonic(), "configmaps", f"{type(e).__name__}: {e}"))
        else:
            if status == 201:
                self.calls += entries
            else:
                self.failures.append((time.monotonic(), "configmaps", status,
                                      self.bundles_seen[-1:], message))
        for serial in self.served():
            if serial not in self.leaves_seen:
                self.leaves_seen.append(serial)
        self.rounds += 1


def probe_for(cluster, paths, host, namespace, ports, served):
    """The API server's calls on the cluster's backend: the harness's own (`ports()`, the
    webhook servers' loopback ports) on the emulator, kube-apiserver's on the real one
    (`served()`, the serials the webhook servers logged)."""
    if cluster.backend == "real":
        return RealAdmissionProbe(cluster, paths, served, namespace)
    return ApiServerProbe(cluster, paths, ports, host, namespace)
