"""The stage of the bad-input corpus (tests/badinput/): one emulator per test module, the
objects a case needs put there through the raw API, certctl run the three ways the corpus
runs it, and the checks every case makes.

    stage = Stage(cluster, binary, workdir)
    stage.reset(secret=stage.secret_doc(pem_data, managed=True), targets=[vwc])
    before = stage.snapshot()
    stage.cluster.reset_request_log()
    result = stage.certctl("job", "--validating-webhook", "hook")
    line = one_line(result, "job")             # exactly one line on stderr, "certctl job: ..."
    assert stage.writes() == [] and stage.snapshot() == before

    with stage.run_process("--validating-webhook", "hook") as run:
        report = run.wait_report(lambda status, body: status == 503)

A case's exit code and message are asserted by the test; the stage only makes them easy to
read: `findings(stdout)` parses `certctl check`'s text report, one line per finding,
`<object>: <message> [<code>]`.
"""

import base64
import http.client
import os
import re
import signal
import subprocess
import time

from .certctl import run_certctl, webhook_configuration, what_to_do
from .kubelet import free_ports
from .rbac import emulator_rules
from .sidecar import SCRUBBED

NS = "infra"
SECRET = "webhook-server-cert"
USER = f"system:serviceaccount:{NS}:certctl"
MANAGED = {"app.kubernetes.io/managed-by": "certctl"}
SECRET_OBJ = f"secret/{NS}/{SECRET}"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"
SECRET_PATH = f"{SECRETS}/{SECRET}"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
COLLECTIONS = {"ValidatingWebhookConfiguration": f"{ADMISSION}/validatingwebhookconfigurations",
               "MutatingWebhookConfiguration": f"{ADMISSION}/mutatingwebhookconfigurations"}
STOP_LIMIT = 5.0
REPORT_BOUND = 10.0   # a loaded 2-core machine: what a first pass may take at worst
STARTING = "not ready: starting\n"  # /readyz before the first pass has judged
FINDING = re.compile(r"^(?P<object>\S+(?: webhook \S+)?): (?P<message>.*) \[(?P<code>[a-z-]+)\]$")

__all__ = ["NS", "SECRET", "USER", "MANAGED", "SECRET_OBJ", "SECRET_PATH", "COLLECTIONS",
           "Stage", "RunProcess", "one_line", "findings", "key_of", "decode", "pem_data",
           "hook_target"]


def key_of(key):
    """How certctl names one key of the Secret: secret/infra/webhook-server-cert[tls.key]."""
    return f"{SECRET_OBJ}[{key}]"


def decode(value):
    return base64.b64decode(value).decode()


def pem_data(secret):
    """The data of a Secret object (as the API returns it), decoded to text."""
    return {k: decode(v) for k, v in (secret.get("data") or {}).items()}


def one_line(result, command):
    """The single line certctl printed on stderr; fails unless there is exactly one and it
    is certctl's own ("certctl <command>: ...")."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{result.stderr}"
    assert lines[0].startswith(f"certctl {command}: "), lines[0]
    return lines[0]


def findings(stdout):
    """[(object, code, message)] of a text report; every line must be a finding, the `what to
    do:` line after them naming each code's troubleshooting section once, or a note (`note:
    ...`, what check could not judge: the corpus's credentials, which are the chart's, may not
    read the Services the targets call)."""
    out = []
    help_lines = []
    for line in stdout.splitlines():
        if line.startswith("note: "):
            continue
        if line.startswith("what to do: "):
            help_lines.append(line)
            continue
        assert not help_lines, f"a finding after the 'what to do:' line:\n{stdout}"
        match = FINDING.match(line)
        assert match, f"not a finding line: {line!r}\n{stdout}"
        out.append((match["object"], match["code"], match["message"]))
    codes = list(dict.fromkeys(code for _, code, _ in out))
    assert help_lines == ([what_to_do(*codes)] if out else []), stdout
    return out


def hook_target(ca_pem="", webhooks=("a.hook.io", "b.hook.io"), name="hook"):
    """A ValidatingWebhookConfiguration (Service hook in infra) whose webhooks hold `ca_pem`
    as caBundle (none when empty)."""
    return webhook_configuration("ValidatingWebhookConfiguration", name, list(webhooks),
                                 ca_bundle=ca_pem, namespace=NS)


class Stage:
    """One emulator, namespace infra and certctl's service account with the chart's rules
    of both modes for the configurations named in `targets` and for a webhook selector."""

    def __init__(self, cluster, binary, workdir, targets=("hook",)):
        self.cluster = cluster
        self.binary = binary
        self.workdir = workdir
        self._runs = 0
        resp = cluster.api("POST", "/api/v1/namespaces",
                           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        assert resp.status == 201, resp
        wanted = {"validatingWebhooks": list(targets), "mutatingWebhooks": list(targets),
                  "webhookSelector": "app=hook"}
        rules = emulator_rules("job", SECRET, NS, wanted) + emulator_rules(
            "sidecar", SECRET, NS, wanted, {"leaderElection": False})
        cluster.add_user(USER, rules)

    # --- objects ----------------------------------------------------------------------

    @staticmethod
    def secret_doc(data, type_="kubernetes.io/tls", managed=False, annotations=None,
                   labels=None):
        """A Secret named webhook-server-cert whose data is `data` (text, base64-encoded
        here; None values are left out)."""
        meta = {"name": SECRET, "namespace": NS,
                "labels": dict(labels or {}, **(MANAGED if managed else {}))}
        if annotations:
            meta["annotations"] = dict(annotations)
        encoded = {k: base64.b64encode(v.encode() if isinstance(v, str) else v).decode()
                   for k, v in data.items() if v is not None}
        return {"apiVersion": "v1", "kind": "Secret", "type": type_, "metadata": meta,
                "data": encoded}

    def _delete_all(self, collection):
        listing = self.cluster.api("GET", collection)
        assert listing.status == 200, listing
        for item in listing.json()["items"]:
            resp = self.cluster.api("DELETE", f"{collection}/{item['metadata']['name']}")
            assert resp.status in (200, 202, 404), resp

    def reset(self, secret=None, targets=()):
        """Every Secret in infra and every webhook configuration removed; then `secret`
        (a Secret object, or None for none) and `targets` (configurations) created."""
        self._delete_all(SECRETS)
        for collection in COLLECTIONS.values():
            self._delete_all(collection)
        if secret is not None:
            self.create(SECRETS, secret)
        for target in targets:
            self.create(COLLECTIONS[target["kind"]], target)

    def create(self, collection, obj):
        resp = self.cluster.api("POST", collection, obj)
        assert resp.status == 201, resp
        return resp.json()

    def get(self, path):
        resp = self.cluster.api("GET", path)
        if resp.status == 404:
            return None
        assert resp.status == 200, resp
        return resp.json()

    def secret(self):
        return self.get(SECRET_PATH)

    def target(self, kind, name):
        return self.get(f"{COLLECTIONS[kind]}/{name}")

    def snapshot(self):
        """Every Secret in infra and every webhook configuration, whole, by kind and name:
        equal snapshots mean nothing was modified (resourceVersion included)."""
        out = {}
        for kind, collection in [("Secret", SECRETS), *COLLECTIONS.items()]:
            listing = self.cluster.api("GET", collection)
            assert listing.status == 200, listing
            for item in listing.json()["items"]:
                out[f"{kind}/{item['metadata']['name']}"] = item
        return out

    def settled_log(self, quiet=0.02, bound=2.0):
        """The request log once it stopped growing for `quiet` seconds: the emulator logs a
        request just after answering it, so the last request of a process that has just
        exited may not be in it yet."""
        log = self.cluster.request_log()
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            time.sleep(quiet)
            again = self.cluster.request_log()
            if len(again["requests"]) == len(log["requests"]):
                return again
            log = again
        return log

    def writes(self, events=False):
        """(verb, resource, name) of every successful write by certctl since the request
        log was reset; Events (best effort, not state) only with events=True. (Only
        certctl's: for the same reason as in settled_log, the test's own set-up writes may
        land just after a reset.)"""
        return [(w["verb"], w["resource"], w["name"]) for w in self.settled_log()["writes"]
                if w["user"] == USER and (events or w["resource"] != "events")]

    def requests_by_certctl(self):
        return [e for e in self.settled_log()["requests"] if e["user"] == USER]

    # --- running certctl --------------------------------------------------------------

    def env(self):
        """In-cluster configuration as certctl's service account."""
        return self.cluster.in_cluster_env(USER, NS)

    def certctl(self, command, *args, env=None, timeout=60):
        """`certctl COMMAND --service hook -n infra ARGS` in a pod (or with `env`)."""
        return run_certctl(self.binary, command, "--service", "hook", "-n", NS, *args,
                           env=self.env() if env is None else env, timeout=timeout)

    def run_process(self, *args, env=None, flags=None):
        """A `certctl run` (not started yet: use it as a context manager). Its defaults
        (--service, -n, --cert-dir, --ready-file, --health-addr, --metrics-addr) can be
        replaced or dropped (value None) through `flags`."""
        self._runs += 1
        name = f"run{self._runs}"
        health, metrics = free_ports(2)
        defaults = {"--service": "hook", "-n": NS,
                    "--cert-dir": os.path.join(self.workdir, f"{name}-certs"),
                    "--ready-file": os.path.join(self.workdir, f"{name}.ready"),
                    "--health-addr": f"127.0.0.1:{health}",
                    "--metrics-addr": f"127.0.0.1:{metrics}"}
        defaults.update(flags or {})
        argv = [self.binary, "run"]
        for flag, value in defaults.items():
            if value is not None:
                argv += [flag, value]
        return RunProcess(argv + list(args), self.env() if env is None else env,
                          os.path.join(self.workdir, f"{name}.stderr"), health,
                          defaults.get("--cert-dir"), defaults.get("--ready-file"))


class RunProcess:
    """One `certctl run`: started on entering the context, SIGTERM (then SIGKILL) on leaving
    it, so nothing outlives a test."""

    def __init__(self, argv, env, stderr_path, health_port, cert_dir, ready_file):
        self.argv = argv
        base = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        base.update(env)
        self.env = base
        self.stderr_path = stderr_path
        self.health_port = health_port
        self.cert_dir = cert_dir
        self.ready_file = ready_file
        self.proc = None
        self.started = None

    def __enter__(self):
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=self.env)
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_LIMIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_LIMIT)

    def log(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def get(self, path):
        """(status, body) of GET path on the health port; (None, error) if nothing answers."""
        conn = http.client.HTTPConnection("127.0.0.1", self.health_port, timeout=5)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        except OSError as e:
            return None, f"{type(e).__name__}: {e}"
        finally:
            conn.close()

    def exit_code(self, bound=REPORT_BOUND):
        """The exit code once the process ended by itself (None if it still runs after
        `bound` seconds)."""
        try:
            return self.proc.wait(bound)
        except subprocess.TimeoutExpired:
            return None

    def wait_report(self, predicate, bound=REPORT_BOUND):
        """Polls /readyz every 50 ms until predicate(status, body) holds; returns
        (status, body). Fails (AssertionError) when the process exits or `bound` passes."""
        deadline = time.monotonic() + bound
        last = None
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"certctl run exited {self.proc.returncode} before "
                                     f"reporting; last /readyz {last}\n{self.log()}")
            last = self.get("/readyz")
            if last[0] is not None and predicate(*last):
                return last
            if time.monotonic() > deadline:
                raise AssertionError(f"no matching /readyz within {bound:g}s; last {last}\n"
                                     f"{self.log()}")
            time.sleep(0.05)

    def verdict(self, bound=REPORT_BOUND):
        """(status, body) of /readyz once the first reconcile pass has judged (anything but
        the "starting" that precedes it)."""
        return self.wait_report(lambda status, body: status == 200 or body != STARTING, bound)

    def stop(self):
        """SIGTERM; returns (exit code, seconds it took)."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(STOP_LIMIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(STOP_LIMIT)
        return code, time.monotonic() - started

