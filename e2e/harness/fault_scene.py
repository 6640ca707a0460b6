"""The stage of the fault suite (tests/faults/): names, certctl's RBAC (exactly the chart's,
leader election included), and `Scene`, which starts `certctl run` processes and `certctl
job` runs against one emulator and holds the checks every scenario ends with.

Waits poll every 50 ms under a bound; the only plain sleeps in the suite are the faults' own
durations.
"""

import base64
import os
import subprocess
import time

import pytest

from .certctl import run_certctl, webhook_configuration
from .faults import (decoded, metric, pair_problems, requests_of, sidecar_metrics,
                     successful_writes, watch_resource_version)
from .rbac import emulator_rules
from .sidecar import SCRUBBED, Sidecar, stop_all
from .waiting import wait_for

NS = "infra"
SECRET = "webhook-server-cert"
LEASE = f"{SECRET}-certctl"
HOST = f"hook.{NS}.svc"
USER = "system:serviceaccount:infra:certctl"
JOB_USER = "system:serviceaccount:infra:certctl-job"
SECRET_PATH = f"/api/v1/namespaces/{NS}/secrets/{SECRET}"
VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/hook"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}"

POLL = 0.05
BOUND = 20.0

RUN_RULES = emulator_rules("sidecar", SECRET, NS, {"validatingWebhooks": ["hook"]},
                           {"leaderElection": True})
JOB_RULES = emulator_rules("job", SECRET, NS, {"validatingWebhooks": ["hook"]})


class Scene:
    """The emulator of one test with certctl's objects, and what the scenarios do with it."""

    def __init__(self, cluster, binary, workdir):
        self.cluster = cluster
        self.binary = binary
        self.workdir = workdir
        self.sidecars = []

    # --- processes ------------------------------------------------------------------------

    def start(self, name="a", *args, user=USER):
        sidecar = Sidecar(self.binary, self.cluster, self.workdir, name, user,
                          ["--validating-webhook", "hook", *args])
        self.sidecars.append(sidecar)
        return sidecar.start()

    def ready_sidecar(self, *args):
        """One `certctl run` (debug log), waited for until ready and quiet; returns it and
        the CA it settled on."""
        sidecar = self.start("a", "--log-level", "debug", *args)
        self.wait_ready(sidecar)
        self.wait_quiet(USER)
        return sidecar, self.secret_data()["ca.crt"]

    def job_argv(self, *args):
        return [self.binary, "job", "--service", "hook", "-n", NS, "--validating-webhook",
                "hook", *args]

    def job(self, *args, timeout=120):
        """`certctl job` as the job's service account, run to its end."""
        env = self.cluster.in_cluster_env(JOB_USER, NS)
        return run_certctl(self.binary, *self.job_argv(*args)[1:], env=env, timeout=timeout)

    def job_process(self, *args):
        """`certctl job` as the job's service account, started in the background."""
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env.update(self.cluster.in_cluster_env(JOB_USER, NS))
        return subprocess.Popen(self.job_argv(*args), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)

    def stop_all(self):
        stop_all(self.sidecars)

    # --- reading --------------------------------------------------------------------------

    def get(self, path):
        resp = self.cluster.api("GET", path)
        if resp.status == 404:
            return None
        assert resp.status == 200, resp
        return resp.json()

    def secret_data(self):
        secret = self.get(SECRET_PATH)
        return None if secret is None else decoded(secret)

    def bundles(self):
        vwc = self.get(VWC_PATH)
        return [base64.b64decode(w["clientConfig"].get("caBundle", "")).decode()
                for w in vwc["webhooks"]]

    def holds(self, ca):
        return self.bundles() == [ca, ca]

    @staticmethod
    def folder(sidecar):
        out = {}
        for name in ("tls.crt", "tls.key", "ca.crt"):
            try:
                with open(os.path.join(sidecar.cert_dir, name), encoding="utf-8") as f:
                    out[name] = f.read()
            except FileNotFoundError:
                out[name] = None
        return out

    # --- writing --------------------------------------------------------------------------

    def blank(self, index=0):
        """Blanks one caBundle (as admin, with a JSON patch): what a helm upgrade does."""
        resp = self.cluster.api("PATCH", VWC_PATH, [
            {"op": "replace", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": ""}],
            content_type="application/json-patch+json")
        assert resp.status == 200, resp
        return resp.json()

    def patch_secret(self, patch):
        resp = self.cluster.api("PATCH", SECRET_PATH, patch,
                                content_type="application/merge-patch+json")
        assert resp.status == 200, resp
        return resp.json()

    # --- waiting --------------------------------------------------------------------------

    def wait_for(self, predicate, what, bound=BOUND, watch=()):
        """Polls until predicate() is true (returns its value); fails after `bound` seconds or
        as soon as a sidecar of `watch` exits."""
        return wait_for(predicate, what, bound=bound, watch=watch)

    def wait_ready(self, sidecar, bound=BOUND):
        self.wait_for(lambda: sidecar.readyz()[0] == 200, f"/readyz 200 from {sidecar.name}",
                      bound=bound, watch=[sidecar])

    def wait_quiet(self, user, quiet=1.0, bound=BOUND):
        """Until `user` sent nothing for `quiet` seconds (start-up passes have settled)."""
        last, since = None, time.monotonic()
        deadline = since + bound
        while time.monotonic() < deadline:
            count = len(requests_of(self.cluster, user))
            if count != last:
                last, since = count, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            time.sleep(POLL)
        pytest.fail(f"{user} never went quiet for {quiet}s")

    def wait_watching(self, sidecar, since, min_version=0, user=USER, bound=60.0):
        """Until `user` has a watch on the Secret and one on the target, started after `since`
        (unix seconds) from a resourceVersion >= min_version: the watches are back."""
        def watching(resource):
            return any(e["code"] == 200 and watch_resource_version(e) >= min_version
                       for e in requests_of(self.cluster, user, since=since, verb="watch",
                                            resource=resource))
        self.wait_for(lambda: watching("secrets") and watching("validatingwebhookconfigurations"),
                      "the watches on the Secret and the target to be back", bound=bound,
                      watch=[sidecar])

    def wait_repaired(self, ca, sidecar=None, bound=BOUND):
        """Waits for both caBundles to hold `ca`; returns how long that took."""
        started = time.monotonic()
        self.wait_for(lambda: self.holds(ca), "the caBundles to hold the CA", bound=bound,
                      watch=[sidecar] if sidecar else [])
        return time.monotonic() - started

    # --- the end of every scenario --------------------------------------------------------

    def assert_converged(self, ca, sidecar=None, require_ready_file=True):
        """The Secret is a valid pair issued by `ca` (openssl's verdict), every caBundle holds
        `ca`, and a sidecar given is alive, ready (/readyz, certctl_ready, the ready file),
        healthy, and serves the Secret's pair from its folder. Returns the Secret's data."""
        data = self.secret_data()
        assert data is not None, "the Secret is gone"
        problems = pair_problems(data, HOST)
        assert problems == [], problems
        assert data["ca.crt"] == ca, "the CA was replaced"
        assert self.holds(ca), self.bundles()
        if sidecar is not None:
            assert sidecar.alive(), sidecar.describe()
            self.wait_ready(sidecar)
            assert sidecar.healthz() == (200, "ok\n")
            values = sidecar_metrics(sidecar)
            assert metric(values, "certctl_ready") == 1
            if require_ready_file:
                assert os.path.exists(sidecar.ready_file)
            wanted = {k: data[k] for k in ("tls.crt", "tls.key", "ca.crt")}
            self.wait_for(lambda: self.folder(sidecar) == wanted,
                          "the folder to hold the Secret's pair", watch=[sidecar])
        return data

    def secret_writes(self, user=USER, since=None):
        return [w for w in successful_writes(requests_of(self.cluster, user, since=since))
                if w[1] == "secrets"]




def hook_manifest():
    return webhook_configuration("ValidatingWebhookConfiguration", "hook",
                                 ["a.hook.io", "b.hook.io"])
