"""The processes that sit beside a webhook in its pod, run locally for tests:

- `Sidecar`: one `certctl run` with in-cluster configuration, its own certificate folder,
  ready file, health and metrics ports, stderr in a file (tests/certctl/test_run.py);
- `WebhookServer`: the example webhook server (harness/webhook_server.py) on a folder;
- clients that do what the API server does when it calls a webhook: `handshake()` (a TLS
  handshake trusting only a caBundle and verifying the Service's name), `post_review()`,
  `openssl_handshake()`, and `Hammer`, a loop of handshakes in a thread that counts failures.
"""

import http.client
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

from .kubelet import free_ports

STOP_LIMIT = 5.0  # seconds a process gets to exit after SIGTERM before it is killed
SCRUBBED = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE",
            "POD_NAME", "CERTCTL_SERVICEACCOUNT_DIR")
WEBHOOK_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "webhook_server.py")

__all__ = ["SCRUBBED", "STOP_LIMIT", "Sidecar", "stop_all", "WebhookServer", "Hammer", "free_ports",
           "handshake", "post_review", "openssl_handshake", "admission_review", "leaf_der",
           "pem_serial"]


class Sidecar:
    """One `certctl run` process as a pod's sidecar: in-cluster configuration as `user`,
    its own certificate folder, ready file, health and metrics ports, stderr in a file."""

    def __init__(self, binary, cluster, workdir, name, user, args, namespace="infra",
                 service="hook"):
        self._prepare(cluster, workdir, name, user, namespace)
        self.cert_dir = os.path.join(workdir, f"{name}-certs")
        self.ready_file = os.path.join(workdir, f"{name}.ready")
        self.argv = [binary, "run", "--service", service, "-n", namespace,
                     "--cert-dir", self.cert_dir, "--ready-file", self.ready_file,
                     *self.endpoint_flags(), *args]

    def _prepare(self, cluster, workdir, name, user, namespace):
        """What every long-running certctl process of a test has: its files, its ports and
        the environment of a pod running as `user` in `namespace`."""
        self.name = name
        self.user = user
        self.stderr_path = os.path.join(workdir, f"{name}.stderr")
        self.stdout_path = os.path.join(workdir, f"{name}.stdout")
        self.health_port, self.metrics_port = free_ports(2)
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env.update(cluster.in_cluster_env(user, namespace))
        self.env = env
        self.proc = None
        self.started_at = None

    def endpoint_flags(self):
        return ["--health-addr", f"127.0.0.1:{self.health_port}",
                "--metrics-addr", f"127.0.0.1:{self.metrics_port}"]

    def start(self):
        with open(self.stderr_path, "wb") as err, open(self.stdout_path, "wb") as out:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err, env=self.env)
        self.started_at = time.time()
        return self

    def log(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def describe(self):
        code = self.proc.poll() if self.proc else None
        return (f"--- certctl run {self.name} (exit {code}) stderr:\n{self.log()}"
                f"--- /readyz: {self.readyz()}")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def get(self, path, port=None):
        """(status, body, headers) of GET path on the health port (or `port`);
        (None, error, {}) when nothing answers."""
        conn = http.client.HTTPConnection("127.0.0.1", port or self.health_port, timeout=5)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace"), dict(resp.getheaders())
        except OSError as e:
            return None, f"{type(e).__name__}: {e}", {}
        finally:
            conn.close()

    def readyz(self):
        return self.get("/readyz")[:2]

    def serving_verdict(self):
        """/readyz once the serving check has judged the current certificate (it follows
        the certificate by one handshake), else None."""
        status, body = self.readyz()
        return None if "checking the handshake" in (body or "") else (status, body)

    def healthz(self):
        return self.get("/healthz")[:2]

    def metrics(self):
        status, body, headers = self.get("/metrics", port=self.metrics_port)
        assert status == 200, (status, body)
        return body, headers

    def metric(self, name, labels=None):
        """The sum of the samples named `name` on /metrics (only those whose labels are
        exactly `labels`, when given); None when there is none."""
        from prometheus_client.parser import text_string_to_metric_families
        values = [sample.value for family in text_string_to_metric_families(self.metrics()[0])
                  for sample in family.samples
                  if sample.name == name and (labels is None or sample.labels == labels)]
        return sum(values) if values else None

    def send(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM):
        """Signal, wait up to 5 s, kill if still running; returns (exit code, seconds)."""
        started = time.monotonic()
        if self.alive():
            self.proc.send_signal(sig)
        self.reap()
        return self.proc.returncode, time.monotonic() - started

    def reap(self):
        """Waits up to 5 s for the process to end, then kills it: nothing outlives a test."""
        if self.proc is None:
            return
        try:
            self.proc.wait(STOP_LIMIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_LIMIT)


def stop_all(sidecars):
    """SIGTERM to every sidecar still running, then reap them all (a kill after 5 s): the
    end of a test that started several."""
    for sidecar in sidecars:
        if sidecar.alive():
            sidecar.send(signal.SIGTERM)
    for sidecar in sidecars:
        sidecar.reap()


class WebhookServer:
    """harness/webhook_server.py as a process on `cert_dir`; start() returns once it
    printed its LISTENING line (or raises with its log). A context manager that stops it
    (SIGTERM, then SIGKILL after 5 s)."""

    def __init__(self, cert_dir, workdir, name="webhook", listen="127.0.0.1:0",
                 ready_timeout=30, python=None, log_reviews=False):
        self.cert_dir = cert_dir
        self.stderr_path = os.path.join(workdir, f"{name}.stderr")
        self.argv = [python or sys.executable, WEBHOOK_SERVER, "--cert-dir", cert_dir,
                     "--listen", listen, "--ready-timeout", str(ready_timeout)]
        if log_reviews:
            self.argv.append("--log-reviews")
        self.proc = None
        self.port = None
        self.url = None

    def spawn(self):
        """Starts the process without waiting for it."""
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=err,
                                         env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        return self

    def start(self, bound=30.0):
        if self.proc is None:
            self.spawn()
        line = self.wait_listening(bound)
        if not line.startswith("LISTENING https://"):
            self.stop()
            raise AssertionError(f"webhook server did not start: {line!r}\n{self.log()}")
        self.url = line.split()[1]
        self.port = int(self.url.rsplit(":", 1)[1])
        return self

    def wait_listening(self, bound):
        """The first stdout line ('' if the process ended or `bound` ran out first)."""
        deadline = time.monotonic() + bound
        fd, buf = self.proc.stdout.fileno(), b""
        while b"\n" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return ""
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.2))
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    return buf.decode(errors="replace")
                buf += chunk
        return buf.split(b"\n", 1)[0].decode()

    def log(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def get(self, path, cafile, host):
        """(status, body) of a GET over verified TLS."""
        conn = _connection(self.port, cafile, host)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        finally:
            conn.close()

    def stop(self, sig=signal.SIGTERM):
        """Signal, wait up to 5 s, kill if still running; returns the exit code."""
        if self.proc is None:
            return None
        if self.alive():
            self.proc.send_signal(sig)
        try:
            self.proc.wait(STOP_LIMIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_LIMIT)
        self.proc.stdout.close()
        return self.proc.returncode

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# --- what the API server does -------------------------------------------------------------

def _tls_socket(port, cafile, host, timeout):
    """A TLS connection to 127.0.0.1:port trusting only `cafile` and verifying `host`."""
    context = ssl.create_default_context(cafile=cafile)  # with a cafile: nothing else trusted
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        return context.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise


def handshake(port, cafile, host, timeout=5.0):
    """A verified handshake (the API server's check); returns the served leaf as DER."""
    with _tls_socket(port, cafile, host, timeout) as tls:
        return tls.getpeercert(binary_form=True)


def _connection(port, cafile, host, timeout=5.0):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn.sock = _tls_socket(port, cafile, host, timeout)  # connect() is then skipped
    return conn


def post_review(port, cafile, host, review, path="/validate?timeout=10s"):
    """POSTs an AdmissionReview over verified TLS; returns (status, parsed body or text)."""
    conn = _connection(port, cafile, host)
    try:
        conn.request("POST", path, body=json.dumps(review),
                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        resp = conn.getresponse()
        body = resp.read().decode(errors="replace")
        if resp.getheader("Content-Type", "").startswith("application/json"):
            body = json.loads(body)
        return resp.status, body
    finally:
        conn.close()


def openssl_handshake(port, cafile, host):
    """`openssl s_client` trusting only `cafile` and verifying `host`; the CompletedProcess
    (returncode 0 and 'Verify return code: 0 (ok)' when verified)."""
    return subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", host,
         "-verify_return_error", "-verify_hostname", host, "-CAfile", str(cafile)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20)


def admission_review(uid, name="settings", namespace="default", labels=None,
                     operation="CREATE"):
    """An admission.k8s.io/v1 AdmissionReview for a ConfigMap, as the API server sends it."""
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
           "data": {"key": "value"}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid,
                        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                        "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                        "requestResource": {"group": "", "version": "v1",
                                            "resource": "configmaps"},
                        "name": name, "namespace": namespace, "operation": operation,
                        "userInfo": {"username": "admin", "groups": ["system:masters"]},
                        "object": obj, "oldObject": None, "dryRun": False,
                        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}


def leaf_der(pem):
    """The first certificate of a PEM text, as DER (what getpeercert(True) returns)."""
    if isinstance(pem, bytes):
        pem = pem.decode()
    begin = pem.index("-----BEGIN CERTIFICATE-----")
    end = pem.index("-----END CERTIFICATE-----", begin) + len("-----END CERTIFICATE-----")
    return ssl.PEM_cert_to_DER_cert(pem[begin:end])


def pem_serial(pem):
    """`openssl x509 -serial` of the first certificate of a PEM text: the hex digits."""
    out = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=pem,
                         capture_output=True, text=True, check=True).stdout
    return out.strip().split("=", 1)[1]


class Hammer:
    """Verified handshakes in a loop in a thread (every `interval` seconds, 0: back to
    back) until stop(); counts successes, keeps every failure and every leaf served."""

    def __init__(self, port, cafile, host, interval=0.0):
        self.port, self.cafile, self.host, self.interval = port, cafile, host, interval
        self.successes = 0
        self.failures = []        # (monotonic time, error)
        self.leaves = []          # distinct leaves (DER) in the order first served
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hammer", daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                leaf = handshake(self.port, self.cafile, self.host)
            except (OSError, ValueError) as e:
                self.failures.append((time.monotonic(), f"{type(e).__name__}: {e}"))
            else:
                self.successes += 1
                if leaf not in self.leaves:
                    self.leaves.append(leaf)
            if self.interval:
                self._stop.wait(self.interval)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

