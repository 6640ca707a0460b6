"""`certctl job` riding out a flaky API server, and refusing input it cannot honour.

A hook Job that fails on one 503 fails the whole `helm upgrade`; one that sleeps on an hour's
Retry-After hangs it. These scenarios pin the job's behaviour between the two: transient
failures of safe writes are retried with backoff until the job's deadline
(--wait-for-targets), permanent ones end it at once.
"""

import base64
import json
import re
import time

import pytest

from harness.certctl import run_certctl, webhook_configuration
from harness.rbac import emulator_rules

NS = "infra"
SECRET = "webhook-server-cert"
USER = "system:serviceaccount:infra:certctl"
SECRET_PATH = f"/namespaces/{NS}/secrets/{SECRET}$"
VWC_PATH = "/validatingwebhookconfigurations/hook$"

# What the chart grants for this Secret and target, from its permission table.
RULES = emulator_rules("job", SECRET, NS, {"validatingWebhooks": ["hook"]})


@pytest.fixture
def hook(cluster):
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(webhook_configuration(
        "ValidatingWebhookConfiguration", "hook", ["a.hook.io", "b.hook.io"])))
    cluster.add_user(USER, RULES)
    return cluster


def job(cluster, binary, *args, service="hook", timeout=90):
    env = cluster.in_cluster_env(USER, NS)
    return run_certctl(binary, "job", "--service", service, "--validating-webhook", "hook",
                       *args, env=env, timeout=timeout)


def user_requests(cluster, method=None, path=None):
    return [e for e in cluster.request_log()["requests"] if e["user"] == USER
            and (method is None or e["method"] == method)
            and (path is None or re.search(path, e["path"]))]


def bundles(cluster):
    vwc = json.loads(cluster.kubectl("get", "validatingwebhookconfiguration", "hook", "-o",
                                     "json").stdout)
    return [base64.b64decode(w["clientConfig"].get("caBundle", "")).decode()
            for w in vwc["webhooks"]]


def stored_ca(cluster):
    secret = json.loads(cluster.kubectl("get", "secret", SECRET, "-n", NS, "-o", "json").stdout)
    return base64.b64decode(secret["data"]["ca.crt"]).decode()


def blank_bundle(cluster, index=0):
    cluster.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json", "-p",
                    json.dumps([{"op": "replace",
                                 "path": f"/webhooks/{index}/clientConfig/caBundle",
                                 "value": ""}]))


def test_three_503s_then_two_409s_on_every_write_converge(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    blank_bundle(hook)
    hook.reset_request_log()
    # No Retry-After: the job must back off on its own. Faults are consumed in order.
    for method, path in (("PUT", SECRET_PATH), ("PATCH", VWC_PATH)):
        hook.inject_fault(method=method, path=path, status=503, count=3)
        hook.inject_fault(method=method, path=path, status=409, count=2)
    # A new DNS name forces a Secret update (the leaf is re-issued).
    result = job(hook, certctl_binary, "--dns-name", "hook.example.com")
    assert result.returncode == 0, result.stderr
    assert "re-issued the server certificate" in result.stderr
    assert "retrying in" in result.stderr  # each wait is logged, with its reason
    for method, path in (("PUT", SECRET_PATH), ("PATCH", VWC_PATH)):
        codes = [e["code"] for e in user_requests(hook, method, path)]
        assert codes == [503, 503, 503, 409, 409, 200], (method, codes)
    ca = stored_ca(hook)
    assert bundles(hook) == [ca, ca]
    # Converged: the next run writes nothing.
    hook.reset_request_log()
    assert job(hook, certctl_binary, "--dns-name", "hook.example.com").returncode == 0
    assert hook.writes() == []


def test_first_install_rides_out_503s_and_429s_on_create(hook, certctl_binary):
    hook.inject_fault(method="POST", path=f"/namespaces/{NS}/secrets$", status=503, count=3)
    hook.inject_fault(method="POST", path=f"/namespaces/{NS}/secrets$", status=429, count=2,
                      retry_after=1)
    result = job(hook, certctl_binary)
    assert result.returncode == 0, result.stderr
    codes = [e["code"] for e in user_requests(hook, "POST")]
    assert codes == [503, 503, 503, 429, 429, 201], codes
    ca = stored_ca(hook)
    assert bundles(hook) == [ca, ca]


def test_a_patch_that_times_out_is_sent_again(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    blank_bundle(hook, 1)
    hook.reset_request_log()
    # The server is slower than --request-timeout once: the client gives up on the answer
    # and sends the guarded patch again (applying it twice is harmless).
    hook.inject_fault(method="PATCH", path=VWC_PATH, latency=3.0, count=1)
    result = job(hook, certctl_binary, "--request-timeout", "1s")
    assert result.returncode == 0, result.stderr
    retries = [line for line in result.stderr.splitlines() if "retrying in" in line]
    assert len(retries) == 1, result.stderr
    assert "patch validatingwebhookconfigurations hook" in retries[0]
    assert "timed out" in retries[0].lower(), retries[0]
    # The abandoned patch still lands once its 3 s are over, as on a real server: both
    # patches are logged, both applied, and applying the same bundle twice changed nothing.
    deadline = time.monotonic() + 15
    while len(user_requests(hook, "PATCH", VWC_PATH)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [e["code"] for e in user_requests(hook, "PATCH", VWC_PATH)] == [200, 200]
    ca = stored_ca(hook)
    assert bundles(hook) == [ca, ca]


def test_forbidden_write_fails_at_once_without_retries(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    blank_bundle(hook)
    hook.reset_request_log()
    hook.inject_fault(method="PATCH", path=VWC_PATH, status=403, count=5)
    started = time.monotonic()
    result = job(hook, certctl_binary)
    assert result.returncode == 1
    assert time.monotonic() - started < 10
    failures = [line for line in result.stderr.splitlines() if line.startswith("certctl job:")]
    assert len(failures) == 1, result.stderr
    assert "validatingwebhookconfiguration" in failures[0]
    assert "retrying" not in result.stderr
    assert len(user_requests(hook, "PATCH", VWC_PATH)) == 1


def test_retries_end_at_the_jobs_deadline(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    blank_bundle(hook)
    hook.inject_fault(method="PATCH", path=VWC_PATH, status=503, count=1000)
    started = time.monotonic()
    result = job(hook, certctl_binary, "--wait-for-targets", "4s")
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert "the server is currently unable to handle the request" in result.stderr
    assert 3.5 < elapsed < 20, elapsed
    assert len(user_requests(hook, "PATCH", VWC_PATH)) >= 3


def test_overlong_validity_is_a_usage_error_before_any_request(hook, certctl_binary):
    hook.reset_request_log()
    for flag, value in (("--cert-validity", "236y"), ("--ca-validity", "236y"),
                        ("--wait-for-targets", "300y"), ("--renew-before", "101y")):
        result = job(hook, certctl_binary, flag, value)
        assert result.returncode == 2, (flag, result.stderr)
        assert result.stderr.count("\n") == 1, result.stderr
        assert "longer than the maximum of 100y" in result.stderr
    assert user_requests(hook) == []
