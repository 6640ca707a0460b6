"""Bad objects in the cluster around a pair: a Secret of the wrong type (with certctl's
label, too), rotation annotations certctl does not know, data that is not base64 (which the
API server refuses to store, so only a corrupting proxy can send it), a Secret near the
size limit; webhook configurations that use clientConfig.url, that are close to the
1.5 MiB an object may have in etcd, or that hold 300 webhooks.

docs/secret.md: a Secret not of type kubernetes.io/tls is an error naming the Secret and the
field, and nothing is written. check reports a wrong type as a finding (exit 1) and exits 2
when it cannot judge the Secret; job exits 1; run stays up, not ready, with the same reason on
/readyz. A rotation annotation value certctl does not know is ignored, never acted on: check
reports it (rotation-state-invalid, exit 1), job warns naming the annotation and writes the
Secret back without it, run stays ready and does the same.
"""

import base64
import copy
import json
import os
import time

import pytest

from harness.certctl import run_certctl, webhook_configuration
from harness.corpus import (NS, SECRET, SECRET_OBJ, SECRET_PATH, findings, hook_target,
                            key_of, one_line)
from harness.hostile import HostileServer, echo_created, json_reply

VWC = "ValidatingWebhookConfiguration"
VWCS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
TARGET = ["--validating-webhook", "hook"]
WRITES = ("POST", "PUT", "PATCH", "DELETE")
MIB = 1024 * 1024


def ca_of(secret):
    return base64.b64decode(secret["data"]["ca.crt"]).decode()


def variant(generated, type_=None, labels=None, annotations=None, data=None):
    """The generated Secret with its type, labels, annotations or data replaced."""
    secret = copy.deepcopy(generated)
    if type_ is not None:
        secret["type"] = type_
    if labels is not None:
        secret["metadata"]["labels"] = labels
    if annotations is not None:
        secret["metadata"]["annotations"] = annotations
    if data is not None:
        secret["data"] = data(secret["data"])
    return secret


# --- the Secret's type and certctl's annotations ---------------------------------------------

def without(key):
    return lambda data: {k: v for k, v in data.items() if k != key}


def with_username(data):
    return dict(data, username="YWRtaW4=")


# id -> (Secret from the generated one, check's expectation, texts every message names).
# check's expectation: {(object, code)} of findings (exit 1), or None for exit 2.
SHAPES = {
    "basic-auth-type-external": (
        lambda g: variant(g, type_="kubernetes.io/basic-auth", labels={}, data=with_username),
        {(SECRET_OBJ, "wrong-type")}, ["type", '"kubernetes.io/basic-auth"']),
    "opaque-with-certctl-label": (
        lambda g: variant(g, type_="Opaque"), {(SECRET_OBJ, "wrong-type")},
        ["type", '"Opaque"']),
    "opaque-with-certctl-label-without-tls-key": (
        lambda g: variant(g, type_="Opaque", data=without("tls.key")),
        {(SECRET_OBJ, "wrong-type"), (key_of("tls.key"), "missing")}, ["type", '"Opaque"']),
}


def put_shape(stage, generated, case):
    make, _, _ = SHAPES[case]
    secret = make(generated)
    stage.reset(secret=secret, targets=[hook_target(ca_of(generated))])
    stage.cluster.reset_request_log()
    return stage.snapshot()


@pytest.mark.parametrize("case", list(SHAPES))
def test_check_on_a_bad_secret(stage, generated, case):
    _, expected, named = SHAPES[case]
    before = put_shape(stage, generated, case)
    result = stage.certctl("check", *TARGET)
    if expected is None:
        assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
        assert result.stdout == ""
        line = one_line(result, "check")
        for text in [SECRET_OBJ, *named]:
            assert text in line, f"{text!r} not named: {line}"
    else:
        assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
        assert result.stderr == ""
        found = findings(result.stdout)
        assert {(obj, code) for obj, code, _ in found} == expected, result.stdout
        assert len(found) == len(expected), result.stdout
    assert stage.writes() == []
    assert stage.snapshot() == before


@pytest.mark.parametrize("case", list(SHAPES))
def test_job_on_a_bad_secret(stage, generated, case):
    _, _, named = SHAPES[case]
    before = put_shape(stage, generated, case)
    result = stage.certctl("job", *TARGET, "--wait-for-targets", "5s")
    assert result.returncode == 1, (result.returncode, result.stderr)
    line = one_line(result, "job")
    for text in [SECRET_OBJ, *named]:
        assert text in line, f"{text!r} not named: {line}"
    assert stage.writes() == []
    assert stage.snapshot() == before


@pytest.mark.parametrize("case", ["opaque-with-certctl-label"])
def test_run_on_a_bad_secret(stage, generated, case):
    _, _, named = SHAPES[case]
    before = put_shape(stage, generated, case)
    with stage.run_process(*TARGET) as run:
        status, body = run.verdict()
        assert status == 503, (status, body)
        assert body.startswith("not ready: ") and body.count("\n") == 1, body
        for text in [SECRET_OBJ, *named]:
            assert text in body, f"{text!r} not named: {body}"
        assert run.get("/healthz") == (200, "ok\n")
        code, took = run.stop()
    assert code == 0 and took < 5, (code, took)
    assert stage.writes(events=True) == []
    assert stage.snapshot() == before


# --- rotation annotations certctl does not act on as they stand ------------------------------

# id -> (Secret from the generated one, texts the warning and check's finding name). The pair
# is valid: certctl ignores the value (docs/rotation.md, "Bad rotation state"), check reports it, and job
# and run write the Secret back without it, keeping its certificates.
ROTATION_SHAPES = {
    "rotation-phase-unknown": (
        lambda g: variant(g, annotations={"certctl.io/rotation-phase": "finishing"}),
        ["metadata.annotations[certctl.io/rotation-phase]", '"finishing"']),
    "rotation-phase-wrong-case": (
        lambda g: variant(g, annotations={"certctl.io/rotation-phase": "Trusting"}),
        ["metadata.annotations[certctl.io/rotation-phase]", '"Trusting"']),
    "rotation-started-not-a-time": (
        lambda g: variant(g, annotations={"certctl.io/rotation-phase": "trusting",
                                          "certctl.io/rotation-started": "yesterday"}),
        ["metadata.annotations[certctl.io/rotation-started]", '"yesterday"']),
    "previous-ca-until-not-a-time": (
        lambda g: variant(g, annotations={"certctl.io/rotation-phase": "overlapping",
                                          "certctl.io/rotation-started": "2026-01-01T00:00:00Z",
                                          "certctl.io/previous-ca-until": "tomorrow"}),
        ["metadata.annotations[certctl.io/previous-ca-until]", '"tomorrow"']),
    "rotate-request-unknown": (
        lambda g: variant(g, annotations={"certctl.io/rotate": "everything"}),
        ["metadata.annotations[certctl.io/rotate]", '"everything"']),
}


def put_rotation_shape(stage, generated, case):
    make, _ = ROTATION_SHAPES[case]
    stage.reset(secret=make(generated), targets=[hook_target(ca_of(generated))])
    stage.cluster.reset_request_log()
    return stage.snapshot()


def assert_repaired(stage, generated):
    secret = stage.secret()
    for key in ("ca.crt", "tls.crt", "tls.key"):
        assert secret["data"][key] == generated["data"][key], key
    left = [k for k in secret["metadata"].get("annotations") or {} if k.startswith("certctl.io/")]
    assert left == [], secret["metadata"]


@pytest.mark.parametrize("case", list(ROTATION_SHAPES))
def test_check_reports_bad_rotation_state(stage, generated, case):
    _, named = ROTATION_SHAPES[case]
    before = put_rotation_shape(stage, generated, case)
    result = stage.certctl("check", *TARGET)
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    found = findings(result.stdout)
    assert found and {(obj, code) for obj, code, _ in found} == {
        (SECRET_OBJ, "rotation-state-invalid")}, result.stdout
    for text in named:
        assert text in result.stdout, f"{text!r} not named: {result.stdout}"
    assert stage.writes() == []
    assert stage.snapshot() == before


@pytest.mark.parametrize("case", list(ROTATION_SHAPES))
def test_job_repairs_bad_rotation_state(stage, generated, case):
    _, named = ROTATION_SHAPES[case]
    put_rotation_shape(stage, generated, case)
    result = stage.certctl("job", *TARGET, "--wait-for-targets", "5s")
    assert result.returncode == 0, (result.returncode, result.stderr)
    for text in named:
        assert text in result.stderr, f"{text!r} not named: {result.stderr}"
    assert_repaired(stage, generated)


@pytest.mark.parametrize("case", ["rotation-phase-unknown", "rotate-request-unknown"])
def test_run_stays_ready_on_bad_rotation_state(stage, generated, case):
    put_rotation_shape(stage, generated, case)
    with stage.run_process(*TARGET) as run:
        status, body = run.verdict()
        assert status == 200, (status, body)
        code, _ = run.stop()
    assert code == 0
    assert_repaired(stage, generated)


# --- data that is not base64 ------------------------------------------------------------------

def test_the_api_server_refuses_data_that_is_not_base64(stage, generated):
    """Why the next cases need harness/hostile.py: like kube-apiserver, the emulator does not
    store a Secret whose data is not base64, whether created or patched."""
    stage.reset(secret=generated)
    broken = variant(generated, data=lambda d: dict(d, **{"tls.crt": "not base64!!"}))
    broken["metadata"]["name"] = "broken"
    resp = stage.cluster.api("POST", f"/api/v1/namespaces/{NS}/secrets", broken)
    assert resp.status == 400, resp
    assert "illegal base64 data at input byte" in resp.json()["message"]
    resp = stage.cluster.api("PATCH", SECRET_PATH, {"data": {"ca.crt": "%%%%"}},
                             content_type="application/merge-patch+json")
    assert resp.status == 422, resp
    assert "illegal base64 data at input byte" in resp.json()["message"]
    assert stage.secret()["data"] == generated["data"]
    assert stage.get(f"/api/v1/namespaces/{NS}/secrets/broken") is None


NOT_BASE64 = {"ca-crt": ("ca.crt", "%%%%"), "tls-crt": ("tls.crt", "not base64!!")}


@pytest.mark.parametrize("command", ["check", "job"])
@pytest.mark.parametrize("case", list(NOT_BASE64))
def test_data_that_is_not_base64_is_refused_not_repaired(generated, certctl_binary, case,
                                                         command):
    """A managed Secret as no API server sends it: certctl must not read a value it cannot
    decode as garbage to be replaced (a new CA), but refuse the answer naming the key."""
    key, value = NOT_BASE64[case]
    secret = variant(generated, data=lambda d: dict(d, **{key: value}))
    secret["metadata"].update(uid="6f1d3a52-8c0e-4c1b-9a51-2b6a1d7e0c11",
                              resourceVersion="1001", creationTimestamp="2025-01-01T00:00:00Z")
    target = hook_target(ca_of(generated))
    target["metadata"].update(uid="0b7e8d0c-4f5e-4c55-8f4e-2d1c6b9a7e21", resourceVersion="77")
    path = f"/api/v1/namespaces/{NS}/secrets/{SECRET}"
    with HostileServer() as api:
        api.route("GET", path, json_reply(secret))
        api.route("PUT", path, echo_created(200, "1002"))
        api.route("GET", f"{VWCS}/hook", json_reply(target))
        api.route("PATCH", f"{VWCS}/hook", json_reply(target))
        args = [command, "--service", "hook", "-n", NS, *TARGET, "--request-timeout", "5s"]
        if command == "job":
            args += ["--wait-for-targets", "3s"]
        result = run_certctl(certctl_binary, *args,
                             env={"KUBECONFIG": api.kubeconfig()})
        assert result.returncode == {"check": 2, "job": 1}[command], \
            (result.returncode, result.stdout, result.stderr)
        line = one_line(result, command)
        assert SECRET_OBJ in line and key in line, line
        assert [(r.method, r.path) for r in api.requests() if r.method in WRITES] == []


# --- a Secret near the size limit ---------------------------------------------------------------

def padded(data, limit=MIB, headroom=4096):
    """data plus a key `padding.bin` that brings the decoded total to `limit - headroom`
    bytes (the API server takes at most 1 MiB of data in a Secret)."""
    used = sum(len(v) * 3 // 4 for v in data.values())
    filler = os.urandom(limit - headroom - used)
    return dict(data, **{"padding.bin": base64.b64encode(filler).decode()})


def test_secret_near_the_limit_is_read_and_left_alone(stage, generated):
    secret = variant(generated, labels={}, data=padded)
    stage.reset(secret=secret, targets=[hook_target(ca_of(generated))])
    stage.cluster.reset_request_log()
    before = stage.snapshot()
    assert len(json.dumps(before[f"Secret/{SECRET}"])) > 1.3 * MIB
    check = stage.certctl("check", *TARGET)
    assert check.returncode == 0, check.stdout + check.stderr
    job = stage.certctl("job", *TARGET, "--wait-for-targets", "5s")
    assert job.returncode == 0, job.stderr
    assert stage.writes() == []
    assert stage.snapshot() == before


def test_managed_secret_near_the_limit_gets_its_leaf_reissued_and_keeps_the_rest(stage):
    # An expired leaf: a generated pair whose certificates ran out a second after issue.
    proc = run_certctl(stage.binary, "generate", "--service", "hook",
                       "-n", NS, "--cert-validity", "1s", "-o", "secret-json",
                       "--log-level", "off")
    assert proc.returncode == 0, proc.stderr
    secret = variant(json.loads(proc.stdout), data=padded)
    stage.reset(secret=secret, targets=[hook_target(ca_of(secret))])
    time.sleep(1.5)
    stage.cluster.reset_request_log()
    before = stage.snapshot()
    result = stage.certctl("job", *TARGET, "--wait-for-targets", "5s")
    assert result.returncode == 0, result.stderr
    assert "re-issued the server certificate" in result.stderr, result.stderr
    assert stage.writes() == [("update", "secrets", SECRET)]
    old, new = before[f"Secret/{SECRET}"]["data"], stage.secret()["data"]
    assert sorted(new) == sorted(old)
    for key in ("ca.crt", "ca.key", "padding.bin"):
        assert new[key] == old[key], f"{key} changed"
    assert new["tls.crt"] != old["tls.crt"]
    after = stage.snapshot()
    assert after[f"{VWC}/hook"] == before[f"{VWC}/hook"]


# --- webhook configurations ----------------------------------------------------------------

def url_configuration():
    """Configuration `urls`: a webhook called by URL (an address outside the cluster) and
    one through the Service, both without caBundle."""
    doc = webhook_configuration(VWC, "urls", ["u.hook.io", "s.hook.io"], namespace=NS)
    doc["webhooks"][0]["clientConfig"] = {"url": "https://hook.example.com:8443/validate"}
    return doc


def bundles(stage, name):
    return [w["clientConfig"].get("caBundle") for w in stage.target(VWC, name)["webhooks"]]


def without_bundles(obj):
    """A configuration minus caBundle and the metadata every write changes (and the type
    fields, which list items lack)."""
    out = copy.deepcopy(obj)
    out.pop("apiVersion", None)
    out.pop("kind", None)
    for webhook in out["webhooks"]:
        webhook["clientConfig"].pop("caBundle", None)
    for key in ("resourceVersion", "generation", "managedFields"):
        out["metadata"].pop(key, None)
    return out


def test_url_webhooks_are_reported_then_injected(stage):
    """docs/troubleshooting.md: a configuration may call its webhook by URL; the caBundle is
    the same, and the URL's host is a SAN given with --dns-name."""
    proc = run_certctl(stage.binary, "generate", "--service", "hook",
                       "-n", NS, "--dns-name", "hook.example.com", "-o", "secret-json",
                       "--log-level", "off")
    assert proc.returncode == 0, proc.stderr
    secret = json.loads(proc.stdout)
    stage.reset(secret=secret, targets=[url_configuration()])
    stage.cluster.reset_request_log()
    before = stage.snapshot()
    args = ["--validating-webhook", "urls", "--dns-name", "hook.example.com"]
    check = stage.certctl("check", *args)
    assert check.returncode == 1, check.stdout + check.stderr
    assert {(obj, code) for obj, code, _ in findings(check.stdout)} == {
        ("validatingwebhookconfiguration/urls webhook u.hook.io", "ca-bundle-mismatch"),
        ("validatingwebhookconfiguration/urls webhook s.hook.io", "ca-bundle-mismatch")}
    assert stage.writes() == [] and stage.snapshot() == before

    job = stage.certctl("job", *args, "--wait-for-targets", "5s")
    assert job.returncode == 0, job.stderr
    assert stage.writes() == [("patch", "validatingwebhookconfigurations", "urls")]
    after = stage.target(VWC, "urls")
    assert bundles(stage, "urls") == [secret["data"]["ca.crt"]] * 2
    assert without_bundles(after) == without_bundles(before[f"{VWC}/urls"])
    assert after["webhooks"][0]["clientConfig"]["url"] == "https://hook.example.com:8443/validate"
    assert stage.certctl("check", *args).returncode == 0


def test_url_webhook_holding_another_ca_is_named(stage, generated):
    other = run_certctl(stage.binary, "generate", "--service", "other",
                        "-o", "secret-json", "--log-level", "off")
    foreign = json.loads(other.stdout)["data"]["ca.crt"]
    doc = url_configuration()
    doc["webhooks"][0]["clientConfig"]["caBundle"] = foreign
    doc["webhooks"][1]["clientConfig"]["caBundle"] = generated["data"]["ca.crt"]
    stage.reset(secret=generated, targets=[doc])
    stage.cluster.reset_request_log()
    before = stage.snapshot()
    check = stage.certctl("check", "--validating-webhook", "urls")
    assert check.returncode == 1, check.stdout + check.stderr
    found = findings(check.stdout)
    # The Secret was made for Service hook alone, so the URL's host is not named either.
    assert [(obj, code) for obj, code, _ in found] == [
        ("validatingwebhookconfiguration/urls webhook u.hook.io", "ca-bundle-mismatch"),
        ("validatingwebhookconfiguration/urls", "target-name-not-covered")]
    assert "does not contain the CA" in found[0][2], found
    assert found[1][2].startswith("webhooks[0] (u.hook.io) calls "
                                  "https://hook.example.com:8443/validate, whose host "
                                  "hook.example.com the certificate does not name"), found
    assert stage.writes() == [] and stage.snapshot() == before


def huge_configuration(size):
    """Configuration `huge`: 4 webhooks, 240 KiB of annotations (the API allows 256 KiB) and
    namespace selectors long enough to bring the object to about `size` bytes of JSON."""
    doc = webhook_configuration(VWC, "huge", [f"w{i}.hook.io" for i in range(4)], namespace=NS)
    doc["metadata"]["annotations"] = {f"example.com/note-{i}": "n" * (60 * 1024)
                                      for i in range(4)}
    values_per_webhook = (size - len(json.dumps(doc))) // (4 * 64)
    for i, webhook in enumerate(doc["webhooks"]):
        webhook["namespaceSelector"] = {"matchExpressions": [{
            "key": "team", "operator": "In",
            "values": [f"t{i}-{j:058d}" for j in range(values_per_webhook)]}]}
    return doc


def test_configuration_near_the_object_size_limit(stage, generated):
    stage.reset(secret=generated, targets=[huge_configuration(int(1.42 * MIB))])
    stage.cluster.reset_request_log()
    before = stage.snapshot()
    size = len(json.dumps(before[f"{VWC}/huge"]))
    assert 1.35 * MIB < size < 1.5 * MIB, size
    args = ["--validating-webhook", "huge"]
    job = stage.certctl("job", *args, "--wait-for-targets", "5s")
    assert job.returncode == 0, job.stderr
    assert stage.writes() == [("patch", "validatingwebhookconfigurations", "huge")]
    after = stage.target(VWC, "huge")
    assert len(json.dumps(after)) < 1.5 * MIB
    assert bundles(stage, "huge") == [generated["data"]["ca.crt"]] * 4
    assert without_bundles(after) == without_bundles(before[f"{VWC}/huge"])
    assert stage.snapshot()[f"Secret/{SECRET}"] == before[f"Secret/{SECRET}"]
    check = stage.certctl("check", *args)
    assert check.returncode == 0, check.stdout + check.stderr


MANY = 300
MANY_BOUND = 10.0  # seconds for the job, or for run to be ready, on a loaded 2-core machine


def many_webhooks():
    return webhook_configuration(VWC, "many", [f"w{i:03d}.hook.io" for i in range(MANY)],
                                 namespace=NS)


@pytest.mark.parametrize("command", ["job", "run"])
def test_300_webhooks_are_injected_in_one_patch(stage, generated, command):
    stage.reset(secret=generated, targets=[many_webhooks()])
    stage.cluster.reset_request_log()
    before = stage.snapshot()
    args = ["--validating-webhook", "many"]
    started = time.monotonic()
    if command == "job":
        result = stage.certctl("job", *args, "--wait-for-targets", "5s")
        took = time.monotonic() - started
        assert result.returncode == 0, result.stderr
        assert f"{MANY} of {MANY} caBundle(s)" in result.stderr, result.stderr
    else:
        with stage.run_process(*args) as run:
            assert run.verdict(MANY_BOUND) == (200, "ok\n")
            took = time.monotonic() - started
            code, _ = run.stop()
        assert code == 0
    print(f"{command}: {MANY} caBundles injected in {took:.2f}s")
    assert took < MANY_BOUND, took
    assert stage.writes() == [("patch", "validatingwebhookconfigurations", "many")]
    assert bundles(stage, "many") == [generated["data"]["ca.crt"]] * MANY
    assert without_bundles(stage.target(VWC, "many")) == without_bundles(before[f"{VWC}/many"])
    check = stage.certctl("check", *args)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{MANY} caBundle(s) up to date" in check.stdout
