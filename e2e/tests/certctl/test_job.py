"""`certctl job` against the emulator: the Helm hook's reconcile scenarios, checked through
kubectl and the emulator's request log, ending with a real TLS handshake."""

import base64
import json
from collections import Counter
import subprocess
import threading
import time

import pytest

from harness.certctl import api_service, b64, crd, run_certctl, webhook_configuration
from harness.rbac import emulator_rules

NS = "infra"
SECRET = "webhook-server-cert"
VWC = "ValidatingWebhookConfiguration"
MWC = "MutatingWebhookConfiguration"
WRITE_VERBS = {"create", "update", "patch", "delete"}

# The chart's RBAC for a job with a target of each kind, from its permission table.
JOB_RULES = emulator_rules("job", SECRET, NS, {
    "validatingWebhooks": ["hook"], "mutatingWebhooks": ["hook"],
    "crds": ["widgets.hook.io"], "apiServices": ["v1.metrics.hook.io"]})
TARGETS = ["--validating-webhook", "hook", "--mutating-webhook", "hook",
           "--crd", "widgets.hook.io", "--apiservice", "v1.metrics.hook.io"]


def apply(cluster, *objects):
    for obj in objects:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))


def get(cluster, kind, name, namespaced=False):
    args = ["get", kind, name, "-o", "json"] + (["-n", NS] if namespaced else [])
    return json.loads(cluster.kubectl(*args).stdout)


def secret_data(cluster):
    data = get(cluster, "secret", SECRET, namespaced=True)["data"]
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def bundles(cluster):
    """Every caBundle of the four targets, decoded, keyed by where it lives."""
    out = {}
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        for webhook in get(cluster, kind, "hook")["webhooks"]:
            out[f"{kind}/{webhook['name']}"] = base64.b64decode(
                webhook["clientConfig"].get("caBundle", "")).decode()
    conversion = get(cluster, "crd", "widgets.hook.io")["spec"]["conversion"]["webhook"]
    out["crd"] = base64.b64decode(conversion["clientConfig"].get("caBundle", "")).decode()
    out["apiservice"] = base64.b64decode(
        get(cluster, "apiservice", "v1.metrics.hook.io")["spec"].get("caBundle", "")).decode()
    return out


def certificates(pem):
    return pem.count("-----BEGIN CERTIFICATE-----")


@pytest.fixture
def hook(cluster):
    """Namespace, Service and the four targets with empty caBundles; a job user."""
    cluster.kubectl("create", "namespace", NS)
    apply(cluster,
          {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook", "namespace": NS},
           "spec": {"ports": [{"port": 443, "targetPort": 9443}]}},
          webhook_configuration(VWC, "hook", ["a.hook.io", "b.hook.io", "c.hook.io"]),
          webhook_configuration(MWC, "hook", ["m.hook.io"]),
          crd("widgets.hook.io"),
          api_service("metrics.hook.io"))
    cluster.add_user("system:serviceaccount:infra:certctl", JOB_RULES)
    return cluster


def job(cluster, binary, *args, phase="all", service="hook"):
    """certctl job in a pod as the certctl service account (in-cluster configuration)."""
    env = cluster.in_cluster_env("system:serviceaccount:infra:certctl", NS)
    return run_certctl(binary, "job", "--phase", phase, "--service", service, *TARGETS, *args,
                       env=env)


def point_targets_at(cluster, service):
    """What renaming the webhook's Service does to the targets: every entry calls the new
    name."""
    def patch(kind, name, paths):
        cluster.kubectl("patch", kind, name, "--type", "json", "-p", json.dumps(
            [{"op": "replace", "path": path, "value": service} for path in paths]))
    patch("validatingwebhookconfiguration", "hook",
          [f"/webhooks/{i}/clientConfig/service/name" for i in range(3)])
    patch("mutatingwebhookconfiguration", "hook", ["/webhooks/0/clientConfig/service/name"])
    patch("crd", "widgets.hook.io", ["/spec/conversion/webhook/clientConfig/service/name"])
    patch("apiservice", "v1.metrics.hook.io", ["/spec/service/name"])


def writes_by_job(cluster):
    return [(e["verb"], e["resource"], e["name"]) for e in cluster.request_log()["requests"]
            if e["user"] == "system:serviceaccount:infra:certctl" and e["verb"] in WRITE_VERBS
            and e["code"] < 300]


@pytest.mark.backends("real")
def test_fresh_cluster_then_steady_state(hook, certctl_binary):
    result = job(hook, certctl_binary)
    assert result.returncode == 0, result.stderr
    assert f"created secret/{NS}/{SECRET}" in result.stderr
    assert "injected the CA bundle into 6 of 6 caBundle(s)" in result.stderr
    secret = get(hook, "secret", SECRET, namespaced=True)
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "certctl"
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    ca = secret_data(hook)["ca.crt"]
    assert set(bundles(hook).values()) == {ca}

    checked = run_certctl(certctl_binary, "check", "--service", "hook", *TARGETS,
                          env=hook.in_cluster_env("system:serviceaccount:infra:certctl", NS))
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # Steady state: no write at all, and at most one read per object.
    hook.reset_request_log()
    again = job(hook, certctl_binary)
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stderr
    assert "already hold the CA bundle" in again.stderr
    log = hook.request_log()
    assert log["writes"] == []
    reads = [(e["resource"], e["name"]) for e in log["requests"] if e["verb"] == "get"]
    assert len(reads) == len(set(reads)) == 5, reads

    # The Helm hooks run the phases apart: still no write, still one read per object.
    hook.reset_request_log()
    for phase in ("secret", "inject"):
        assert job(hook, certctl_binary, phase=phase).returncode == 0
    log = hook.request_log()
    assert log["writes"] == []
    reads = Counter((e["resource"], e["name"]) for e in log["requests"] if e["verb"] == "get")
    assert reads.pop(("secrets", SECRET)) == 2, reads  # once per phase
    assert len(reads) == 4 and set(reads.values()) == {1}, reads


@pytest.mark.backends("real")
def test_renamed_service_reissues_only_the_leaf(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    before = secret_data(hook)
    before_bundles = bundles(hook)
    point_targets_at(hook, "renamed")
    hook.reset_request_log()
    result = job(hook, certctl_binary, service="renamed")
    assert result.returncode == 0, result.stderr
    assert "re-issued the server certificate" in result.stderr
    # The names the certificate lost are told, a warning: another webhook may have used them.
    assert "warn" in result.stderr and "no longer names hook.infra.svc" in result.stderr, \
        result.stderr
    after = secret_data(hook)
    assert after["ca.crt"] == before["ca.crt"] and after["ca.key"] == before["ca.key"]
    assert after["tls.crt"] != before["tls.crt"] and after["tls.key"] != before["tls.key"]
    assert bundles(hook) == before_bundles
    assert writes_by_job(hook) == [("update", "secrets", SECRET)]
    sans = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName"],
                          input=after["tls.crt"], capture_output=True, text=True).stdout
    assert "DNS:renamed.infra.svc" in sans


@pytest.mark.backends("real")
def test_a_service_the_targets_do_not_call_fails_after_writing_the_bundle(hook, certctl_binary):
    # The targets call hook.infra.svc; the certificate is made for another Service. The API
    # server would refuse every call with an x509 name error, so the hook fails now.
    result = job(hook, certctl_binary, service="other")
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("certctl job: the CA bundle is injected, but the API server cannot "
                           "call every target: ")
    assert ("validatingwebhookconfiguration/hook: webhooks[0] (a.hook.io) calls hook.infra.svc, "
            "which the certificate does not name (it names other.infra.svc, other, other.infra, "
            "other.infra.svc.cluster.local)") in last
    assert "customresourcedefinition/widgets.hook.io: spec.conversion.webhook calls " in last
    assert "apiservice/v1.metrics.hook.io: spec.service calls hook.infra.svc" in last
    ca = secret_data(hook)["ca.crt"]
    assert set(bundles(hook).values()) == {ca}  # written all the same
    # certctl never adds what the targets call to the certificate.
    sans = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName"],
                          input=secret_data(hook)["tls.crt"], capture_output=True,
                          text=True).stdout
    assert "hook.infra.svc" not in sans

    # Pointing the webhooks at the Service the certificate names makes the job green.
    point_targets_at(hook, "other")
    again = job(hook, certctl_binary, service="other")
    assert again.returncode == 0, again.stderr


@pytest.mark.backends("real")
def test_expiring_leaf_is_reissued(hook, certctl_binary):
    assert job(hook, certctl_binary, "--cert-validity", "40d").returncode == 0
    before = secret_data(hook)
    result = job(hook, certctl_binary, "--renew-before", "45d", "--cert-validity", "1y")
    assert result.returncode == 0, result.stderr
    assert "re-issued the server certificate" in result.stderr
    after = secret_data(hook)
    assert after["ca.crt"] == before["ca.crt"]
    assert after["tls.crt"] != before["tls.crt"]


@pytest.mark.backends("real")
def test_expired_ca_is_replaced_and_bundles_follow(hook, certctl_binary):
    # A managed Secret whose CA runs out within seconds.
    manifest = run_certctl(certctl_binary, "generate", "--service", "hook", "-n", NS,
                           "--ca-validity", "2s", "--cert-validity", "2s", "-o", "secret-json",
                           "--log-level", "off")
    hook.kubectl("apply", "-f", "-", input=manifest.stdout)
    old_ca = secret_data(hook)["ca.crt"]
    time.sleep(3)
    result = job(hook, certctl_binary)
    assert result.returncode == 0, result.stderr
    assert "replaced the CA and server certificate" in result.stderr
    new_ca = secret_data(hook)["ca.crt"]
    assert new_ca != old_ca
    assert certificates(new_ca) == 1  # the expired CA is not kept
    assert set(bundles(hook).values()) == {new_ca}


def expiring_ca_secret(cluster, binary):
    """A managed Secret whose CA has 20 days left (renew-before is 30): due for rotation,
    while its server certificate still serves."""
    manifest = run_certctl(binary, "generate", "--service", "hook", "-n", NS,
                           "--ca-validity", "20d", "--cert-validity", "20d", "-o", "secret-json",
                           "--log-level", "off")
    assert manifest.returncode == 0, manifest.stderr
    cluster.kubectl("apply", "-f", "-", input=manifest.stdout)
    return secret_data(cluster)


def annotations(cluster):
    return get(cluster, "secret", SECRET, namespaced=True)["metadata"].get("annotations") or {}


@pytest.mark.backends("real")
def test_the_secret_phase_rotates_an_expiring_ca_in_order(hook, certctl_binary):
    before = expiring_ca_secret(hook, certctl_binary)
    # The release as it was: its bundles hold the old CA.
    assert job(hook, certctl_binary, "--renew-before", "1d", phase="inject").returncode == 0
    hook.reset_request_log()
    result = job(hook, certctl_binary, phase="secret")
    assert result.returncode == 0, result.stderr
    assert "CA rotation step 1 of 3" in result.stderr and "step 2 of 3" in result.stderr, \
        result.stderr
    after = secret_data(hook)
    assert certificates(after["ca.crt"]) == 2 and after["ca.crt"].endswith(before["ca.crt"])
    assert after["tls.crt"] != before["tls.crt"]
    assert set(bundles(hook).values()) == {after["ca.crt"]}
    assert annotations(hook)["certctl.io/rotation-phase"] == "overlapping"
    # Step 1 stored, then every target written and read back, and only then the leaf moved.
    order = [(verb, resource) for verb, resource, _ in writes_by_job(hook)]
    assert order[0] == ("update", "secrets") and order[-1] == ("update", "secrets"), order
    assert {resource for _, resource in order[1:-1]} == {
        "validatingwebhookconfigurations", "mutatingwebhookconfigurations",
        "customresourcedefinitions", "apiservices"}, order


@pytest.mark.backends("real")
def test_without_targets_the_secret_phase_stops_after_step_one(hook, certctl_binary):
    before = expiring_ca_secret(hook, certctl_binary)
    env = hook.in_cluster_env("system:serviceaccount:infra:certctl", NS)
    result = run_certctl(certctl_binary, "job", "--phase", "secret", "--service", "hook", env=env)
    assert result.returncode == 0, result.stderr
    assert "CA rotation step 1 of 3" in result.stderr and "waits for the targets" in result.stderr
    stored = secret_data(hook)
    assert stored["tls.crt"] == before["tls.crt"]  # still the old CA's: nobody trusts the new yet
    assert certificates(stored["ca.crt"]) == 2
    assert annotations(hook)["certctl.io/rotation-phase"] == "trusting"
    # The inject phase carries it on: the bundle everywhere, then the leaf.
    result = job(hook, certctl_binary, phase="inject")
    assert result.returncode == 0, result.stderr
    assert "step 2 of 3" in result.stderr, result.stderr
    after = secret_data(hook)
    assert after["tls.crt"] != before["tls.crt"] and after["ca.crt"] == stored["ca.crt"]
    assert set(bundles(hook).values()) == {after["ca.crt"]}
    assert annotations(hook)["certctl.io/rotation-phase"] == "overlapping"


@pytest.mark.backends("real")
def test_the_secret_phase_does_not_wait_for_a_target_the_upgrade_creates(hook, certctl_binary):
    before = expiring_ca_secret(hook, certctl_binary)
    assert job(hook, certctl_binary, "--renew-before", "1d", phase="inject").returncode == 0
    # The new chart version renames the MutatingWebhookConfiguration: its pre-upgrade hook
    # names "hook-v2" and has the RBAC for it, but Helm creates it only after the hook.
    hook.add_user("system:serviceaccount:infra:certctl", emulator_rules("job", SECRET, NS, {
        "validatingWebhooks": ["hook"], "mutatingWebhooks": ["hook", "hook-v2"],
        "crds": ["widgets.hook.io"], "apiServices": ["v1.metrics.hook.io"]}))
    renamed = ["--mutating-webhook", "hook-v2", "--wait-for-targets", "60s"]
    started = time.monotonic()
    result = job(hook, certctl_binary, *renamed, phase="secret")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 30, "the hook waited for the missing target"
    assert "not found yet, left to the inject phase: mutatingwebhookconfiguration/hook-v2" \
        in result.stderr, result.stderr
    assert "CA rotation step 1 of 3" in result.stderr and "step 2 of 3" not in result.stderr
    stored = secret_data(hook)
    assert stored["tls.crt"] == before["tls.crt"]  # the leaf waits for every target
    assert set(bundles(hook).values()) == {stored["ca.crt"]}  # those that exist trust both
    assert annotations(hook)["certctl.io/rotation-phase"] == "trusting"
    # Helm applies the new manifests; the post-upgrade inject phase finishes step 2.
    apply(hook, webhook_configuration(MWC, "hook-v2", ["m2.hook.io"]))
    result = job(hook, certctl_binary, *renamed, phase="inject")
    assert result.returncode == 0, result.stderr
    assert "step 2 of 3" in result.stderr, result.stderr
    after = secret_data(hook)
    assert after["tls.crt"] != before["tls.crt"] and after["ca.crt"] == stored["ca.crt"]
    v2 = get(hook, "mutatingwebhookconfiguration", "hook-v2")["webhooks"][0]
    assert base64.b64decode(v2["clientConfig"]["caBundle"]).decode() == after["ca.crt"]
    assert annotations(hook)["certctl.io/rotation-phase"] == "overlapping"


@pytest.mark.backends("real")
def test_a_job_waiting_for_a_target_says_so_before_its_deadline(hook, certctl_binary):
    """A Helm hook that waits for a target is not silent until it gives up: it names what it
    waits for at once (and every 10 s), then fails naming it."""
    hook.add_user("system:serviceaccount:infra:certctl", emulator_rules("job", SECRET, NS, {
        "validatingWebhooks": ["hook"], "mutatingWebhooks": ["hook", "hook-v2"],
        "crds": ["widgets.hook.io"], "apiServices": ["v1.metrics.hook.io"]}))
    result = job(hook, certctl_binary, "--mutating-webhook", "hook-v2", "--wait-for-targets",
                 "3s")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    waiting = [i for i, line in enumerate(lines) if
               "waiting for mutatingwebhookconfiguration/hook-v2 to appear (0s so far, at most "
               "3s)" in line]
    failed = [i for i, line in enumerate(lines) if "still missing after waiting 3s" in line]
    assert waiting and failed and waiting[0] < failed[0], result.stderr


def test_adopting_a_secret_without_ca_key_moves_to_a_new_ca_in_steps(hook, certctl_binary):
    # What another tool leaves behind (kube-webhook-certgen, cert-manager): a valid pair,
    # no ca.key, no certctl label; the targets trust its CA.
    made = run_certctl(certctl_binary, "generate", "--service", "hook", "-n", NS,
                       "-o", "secret-json", "--log-level", "off")
    secret = json.loads(made.stdout)
    del secret["data"]["ca.key"]
    secret["metadata"]["labels"] = {}
    apply(hook, secret)
    assert job(hook, certctl_binary, phase="inject").returncode == 0  # external: injected as is
    before = secret_data(hook)
    result = job(hook, certctl_binary, "--adopt")
    assert result.returncode == 0, result.stderr
    for text in ("adopted secret/infra/webhook-server-cert", "CA rotation step 1 of 3",
                 "no usable ca.key", "step 2 of 3"):
        assert text in result.stderr, result.stderr
    after = secret_data(hook)
    labels = get(hook, "secret", SECRET, namespaced=True)["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "certctl"
    assert "ca.key" in after and after["ca.crt"].endswith(before["ca.crt"])
    assert certificates(after["ca.crt"]) == 2 and after["tls.crt"] != before["tls.crt"]
    assert set(bundles(hook).values()) == {after["ca.crt"]}


def rotate(cluster, binary, *args):
    env = cluster.in_cluster_env("system:serviceaccount:infra:certctl", NS)
    return run_certctl(binary, "rotate", "--controller-timeout", "1s", *args, env=env)


@pytest.mark.backends("real")
def test_rotate_without_a_controller_takes_the_steps_itself(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    before = secret_data(hook)
    result = rotate(hook, certctl_binary, "--ca", "--wait", "--service", "hook", *TARGETS)
    assert result.returncode == 0, result.stdout + result.stderr
    for text in ("asked for a new CA", "no controller took the request within 1s; rotating here",
                 "step 1 of 3", "step 2 of 3", "done"):
        assert text in result.stdout, result.stdout
    after = secret_data(hook)
    assert certificates(after["ca.crt"]) == 2 and after["ca.crt"].endswith(before["ca.crt"])
    assert after["tls.crt"] != before["tls.crt"]
    assert set(bundles(hook).values()) == {after["ca.crt"]}
    assert "certctl.io/rotate" not in annotations(hook)

    # A leaf alone: same CA, same bundles.
    result = rotate(hook, certctl_binary, "--service", "hook", *TARGETS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "re-issued the server certificate" in result.stdout, result.stdout
    again = secret_data(hook)
    assert again["ca.crt"] == after["ca.crt"] and again["tls.crt"] != after["tls.crt"]


@pytest.mark.backends("real")
def test_rotate_leaves_an_undeliverable_request_for_the_next_job(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    before = secret_data(hook)
    result = rotate(hook, certctl_binary, "--ca")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stays on secret/infra/webhook-server-cert" in result.stderr, result.stderr
    assert annotations(hook)["certctl.io/rotate"] == "ca"
    assert secret_data(hook) == before
    result = job(hook, certctl_binary)
    assert result.returncode == 0, result.stderr
    assert "certctl rotate --ca" in result.stderr and "step 2 of 3" in result.stderr
    assert "certctl.io/rotate" not in annotations(hook)


def test_rotate_carries_on_a_ca_rotation_left_in_step_1(hook, certctl_binary):
    """A rotation stuck in step 1 (no target could be written) is carried on by the next
    `rotate --ca`, with the CA stored then: no second CA, and --wait sees it finish."""
    assert job(hook, certctl_binary).returncode == 0
    before = secret_data(hook)
    hook.inject_fault(method="PATCH", path="/apis/", status=503, count=1000000)
    stuck = rotate(hook, certctl_binary, "--ca", "--timeout", "3s", "--service", "hook",
                   *TARGETS)
    hook.clear_faults()
    assert stuck.returncode == 1, stuck.stdout + stuck.stderr
    assert annotations(hook)["certctl.io/rotation-phase"] == "trusting"
    step_1 = secret_data(hook)
    assert certificates(step_1["ca.crt"]) == 2 and step_1["tls.crt"] == before["tls.crt"]

    result = rotate(hook, certctl_binary, "--ca", "--wait", "--service", "hook", *TARGETS)
    assert result.returncode == 0, result.stdout + result.stderr
    for text in ("is already under way (step 1 stored)", "rotating here", "step 2 of 3",
                 "certctl rotate: done"):
        assert text in result.stdout, result.stdout
    after = secret_data(hook)
    assert after["ca.crt"] == step_1["ca.crt"], "a second CA was made"
    assert after["tls.crt"] != before["tls.crt"]
    assert set(bundles(hook).values()) == {after["ca.crt"]}
    assert annotations(hook)["certctl.io/rotation-phase"] == "overlapping"
    assert "certctl.io/rotate" not in annotations(hook)


@pytest.mark.backends("real")
def test_rotate_refuses_what_it_cannot_rotate(hook, certctl_binary, tmp_path):
    result = rotate(hook, certctl_binary, "--ca")
    assert result.returncode == 1
    assert "secret/infra/webhook-server-cert does not exist" in result.stderr, result.stderr
    external = run_certctl(certctl_binary, "generate", "--service", "hook", "-n", NS,
                           "-o", "secret-json", "--log-level", "off")
    secret = json.loads(external.stdout)
    secret["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "cert-manager"}
    apply(hook, secret)
    hook.reset_request_log()
    result = rotate(hook, certctl_binary, "--ca")
    assert result.returncode == 1
    assert "not managed by certctl" in result.stderr, result.stderr
    assert writes_by_job(hook) == []
    bad = rotate(hook, certctl_binary, "--controller-timeout", "soon")
    assert bad.returncode == 2, bad.stderr


@pytest.mark.backends("real")
def test_writes_are_owned_by_the_field_manager_certctl(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    writers = [e for e in hook.request_log()["requests"]
               if e["user"] == "system:serviceaccount:infra:certctl" and e["verb"] in WRITE_VERBS]
    assert writers and all("fieldManager=certctl" in (e.get("query") or "") for e in writers), \
        writers
    # What GitOps tools read: managedFields name certctl as the owner of the caBundle fields.
    vwc = json.loads(hook.kubectl("get", "validatingwebhookconfiguration", "hook", "-o", "json",
                                  "--show-managed-fields").stdout)
    entries = {m["manager"]: m for m in vwc["metadata"]["managedFields"]}
    assert "certctl" in entries, vwc["metadata"]["managedFields"]
    assert "caBundle" in json.dumps(entries["certctl"]["fieldsV1"]), entries["certctl"]
    secret = json.loads(hook.kubectl("get", "secret", SECRET, "-n", NS, "-o", "json",
                                     "--show-managed-fields").stdout)
    assert {m["manager"] for m in secret["metadata"]["managedFields"]} == {"certctl"}, \
        secret["metadata"]["managedFields"]


@pytest.mark.backends("real")
def test_blanked_bundle_is_repaired_alone(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    ca = secret_data(hook)["ca.crt"]
    vwc = get(hook, "validatingwebhookconfiguration", "hook")
    hook.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json", "-p",
                 json.dumps([{"op": "replace", "path": "/webhooks/1/clientConfig/caBundle",
                              "value": ""}]))
    hook.reset_request_log()
    result = job(hook, certctl_binary)
    assert result.returncode == 0, result.stderr
    assert "injected the CA bundle into 1 of 6 caBundle(s)" in result.stderr
    assert writes_by_job(hook) == [("patch", "validatingwebhookconfigurations", "hook")]
    repaired = get(hook, "validatingwebhookconfiguration", "hook")
    assert set(bundles(hook).values()) == {ca}
    # Nothing but caBundle changed.
    for entry in (vwc, repaired):
        for webhook in entry["webhooks"]:
            webhook["clientConfig"].pop("caBundle", None)
        entry["metadata"] = {}
    assert repaired == vwc


def openssl_pair(tmp_path, name, days=365, service="hook"):
    """An external pair made with the openssl CLI: CA and leaf for hook.infra.svc."""
    ca_key, ca_crt = tmp_path / f"{name}-ca.key", tmp_path / f"{name}-ca.crt"
    key, csr, crt = tmp_path / f"{name}.key", tmp_path / f"{name}.csr", tmp_path / f"{name}.crt"
    ext = tmp_path / f"{name}.ext"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
                    "-out", ca_crt, "-days", "3650", "-subj", "/CN=external-ca",
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out",
                    csr, "-subj", f"/CN={service}.infra.svc"], check=True, capture_output=True)
    ext.write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                   f"subjectAltName=DNS:{service}.infra.svc,DNS:{service},DNS:{service}.infra,"
                   f"DNS:{service}.infra.svc.cluster.local\n")
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
                    "-CAcreateserial", "-out", crt, "-days", str(days), "-extfile", ext],
                   check=True, capture_output=True)
    return {"ca.crt": ca_crt.read_text(), "tls.crt": crt.read_text(), "tls.key": key.read_text()}


def put_external(cluster, pair, secret_type="kubernetes.io/tls"):
    apply(cluster, {"apiVersion": "v1", "kind": "Secret", "type": secret_type,
                    "metadata": {"name": SECRET, "namespace": NS},
                    "data": {key: b64(value) for key, value in pair.items()}})


@pytest.mark.backends("real")
def test_external_secret_is_untouched_and_its_ca_injected(hook, certctl_binary, tmp_path):
    pair = openssl_pair(tmp_path, "external")
    put_external(hook, pair)
    before = get(hook, "secret", SECRET, namespaced=True)
    result = job(hook, certctl_binary)
    assert result.returncode == 0, result.stderr
    assert "external, not managed by certctl" in result.stderr
    assert get(hook, "secret", SECRET, namespaced=True) == before
    assert set(bundles(hook).values()) == {pair["ca.crt"]}
    assert ("update", "secrets", SECRET) not in writes_by_job(hook)


@pytest.mark.backends("real")
def test_invalid_external_secret_fails_and_stays(hook, certctl_binary, tmp_path):
    put_external(hook, openssl_pair(tmp_path, "wrongname", service="other"))
    before = get(hook, "secret", SECRET, namespaced=True)
    hook.reset_request_log()
    result = job(hook, certctl_binary)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"certctl job: secret/{NS}/{SECRET} is not managed by certctl and is not valid" \
        in result.stderr
    assert "hook.infra.svc" in result.stderr
    assert get(hook, "secret", SECRET, namespaced=True) == before
    assert writes_by_job(hook) == []


@pytest.mark.backends("real")
def test_garbage_leaf_in_managed_secret_is_repaired(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    ca = secret_data(hook)["ca.crt"]
    hook.kubectl("patch", "secret", SECRET, "-n", NS, "--type", "merge", "-p",
                 json.dumps({"data": {"tls.crt": b64("garbage")}}))
    result = job(hook, certctl_binary)
    assert result.returncode == 0, result.stderr
    assert "re-issued the server certificate" in result.stderr
    assert secret_data(hook)["ca.crt"] == ca
    assert job(hook, certctl_binary).returncode == 0


@pytest.mark.backends("real")
@pytest.mark.parametrize("phase", ["all", "secret"])
def test_garbage_ca_crt_and_leaf_keep_the_ca_the_targets_trust(hook, certctl_binary, phase):
    """ca.key still matches the CA of the targets' caBundles: ca.crt is rebuilt from them
    (the secret phase of a pre-upgrade hook reads the targets for it too), only the leaf is
    re-issued, and no caBundle is written."""
    assert job(hook, certctl_binary).returncode == 0
    before = secret_data(hook)
    hook.kubectl("patch", "secret", SECRET, "-n", NS, "--type", "merge", "-p",
                 json.dumps({"data": {"ca.crt": b64("garbage"), "tls.crt": b64("garbage")}}))
    hook.reset_request_log()
    result = job(hook, certctl_binary, phase=phase)
    assert result.returncode == 0, result.stderr
    assert "rebuilt from validatingwebhookconfiguration/hook's caBundle, the CA kept" in \
        result.stderr, result.stderr
    after = secret_data(hook)
    assert (after["ca.crt"], after["ca.key"]) == (before["ca.crt"], before["ca.key"])
    assert after["tls.crt"] != before["tls.crt"]
    assert set(bundles(hook).values()) == {before["ca.crt"]}
    assert writes_by_job(hook) == [("update", "secrets", SECRET)]


@pytest.mark.backends("real")
def test_opaque_secret_without_key_fails_untouched(hook, certctl_binary):
    apply(hook, {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": SECRET, "namespace": NS},
                 "data": {"tls.crt": b64("x")}})
    before = get(hook, "secret", SECRET, namespaced=True)
    result = job(hook, certctl_binary)
    assert result.returncode == 1
    assert f'secret/{NS}/{SECRET} has type "Opaque"' in result.stderr
    assert get(hook, "secret", SECRET, namespaced=True) == before


@pytest.mark.backends("real")
def test_two_jobs_at_once_agree_on_one_ca(hook, certctl_binary):
    results = [None, None]

    def run(i):
        results[i] = job(hook, certctl_binary)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    # One create succeeded; a loser of the race got 409 and validated the winner's Secret.
    creates = [w for w in writes_by_job(hook) if w[0] == "create"]
    assert creates == [("create", "secrets", "")]
    ca = secret_data(hook)["ca.crt"]
    assert certificates(ca) == 1
    assert set(bundles(hook).values()) == {ca}


def test_converges_through_conflicts_and_unavailability(hook, certctl_binary):
    assert job(hook, certctl_binary).returncode == 0
    point_targets_at(hook, "renamed")
    hook.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json", "-p",
                 json.dumps([{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}]))
    hook.inject_fault(method="GET", path=f"/secrets/{SECRET}$", status=503, count=2,
                      retry_after=1)
    hook.inject_fault(method="PUT", path=f"/secrets/{SECRET}$", status=409, count=1)
    hook.inject_fault(method="PATCH", path="/validatingwebhookconfigurations/hook$", status=409,
                      count=1)
    hook.inject_fault(method="PATCH", path="/validatingwebhookconfigurations/hook$", status=503,
                      count=1, retry_after=1)
    result = job(hook, certctl_binary, service="renamed")
    assert result.returncode == 0, result.stderr
    ca = secret_data(hook)["ca.crt"]
    assert set(bundles(hook).values()) == {ca}
    codes = [e["code"] for e in hook.request_log()["requests"]
             if e["user"] == "system:serviceaccount:infra:certctl"]
    assert codes.count(409) == 2 and codes.count(503) == 3, codes


@pytest.mark.backends("real")
def test_tls_handshake_trusting_only_the_injected_bundle(hook, certctl_binary, tmp_path):
    assert job(hook, certctl_binary).returncode == 0
    data = secret_data(hook)
    (tmp_path / "tls.crt").write_text(data["tls.crt"])
    (tmp_path / "tls.key").write_text(data["tls.key"])
    (tmp_path / "bundle.crt").write_text(bundles(hook)["validatingwebhookconfiguration/b.hook.io"])
    proof = subprocess.run(
        ["bash", "-c", 'source scripts/lib/tls_proof.sh && tls_proof "$@"', "tls_proof",
         str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), str(tmp_path / "bundle.crt"),
         f"hook.{NS}.svc"], capture_output=True, text=True, timeout=30)
    assert proof.returncode == 0, proof.stdout + proof.stderr
    assert "Verification: OK" in proof.stdout
    assert f"Verified peername: hook.{NS}.svc" in proof.stdout


# Who runs certctl by hand (a person's kubeconfig, say) may list webhook configurations,
# which the chart never grants: the job can then see who else its Secret serves.
LISTER = "system:serviceaccount:infra:lister"
LIST_WEBHOOKS = {"apiGroups": ["admissionregistration.k8s.io"],
                 "resources": ["validatingwebhookconfigurations",
                               "mutatingwebhookconfigurations"],
                 "verbs": ["list"]}


def shared_secret(cluster, binary):
    """The Secret made for Service hook, then taken over for hook-b: the targets now call
    hook-b, while demo-webhook (no target) still calls hook trusting the Secret's CA."""
    assert job(cluster, binary).returncode == 0
    apply(cluster, webhook_configuration(VWC, "demo-webhook", ["v.demo.io"],
                                         ca_bundle=secret_data(cluster)["ca.crt"]))
    point_targets_at(cluster, "hook-b")
    cluster.add_user(LISTER, [*JOB_RULES, LIST_WEBHOOKS])


def job_as(cluster, binary, user, *args, service="hook-b"):
    return run_certctl(binary, "job", "--phase", "all", "--service", service, *TARGETS, *args,
                       env=cluster.in_cluster_env(user, NS))


@pytest.mark.backends("real")
def test_a_leaf_that_drops_a_name_another_webhook_calls_is_refused_until_forced(
        hook, certctl_binary):
    shared_secret(hook, certctl_binary)
    before = secret_data(hook)
    hook.reset_request_log()

    refused = job_as(hook, certctl_binary, LISTER)
    assert refused.returncode == 1, refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith(f"certctl job: the new server certificate for secret/{NS}/{SECRET} "
                           "would drop hook.infra.svc, which webhook configurations that are "
                           "not targets call with this Secret's CA in their caBundle: "), last
    assert ("validatingwebhookconfiguration/demo-webhook webhooks[0] (v.demo.io) calls "
            "hook.infra.svc") in last
    assert "--force-reissue" in last
    assert secret_data(hook) == before
    writes = [(e["verb"], e["resource"]) for e in hook.request_log()["requests"]
              if e["user"] == LISTER and e["verb"] in WRITE_VERBS]
    assert writes == [], writes

    forced = job_as(hook, certctl_binary, LISTER, "--force-reissue")
    assert forced.returncode == 0, forced.stderr
    warnings = [line for line in forced.stderr.splitlines()
                if "warn" in line and "validatingwebhookconfiguration/demo-webhook" in line]
    assert len(warnings) == 1 and "no longer names hook.infra.svc" in warnings[0], forced.stderr
    after = secret_data(hook)
    assert after["ca.crt"] == before["ca.crt"] and after["tls.crt"] != before["tls.crt"]
    sans = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName"],
                          input=after["tls.crt"], capture_output=True, text=True).stdout
    assert "DNS:hook-b.infra.svc" in sans and "DNS:hook.infra.svc" not in sans, sans


@pytest.mark.backends("real")
def test_without_leave_to_list_webhook_configurations_the_job_reissues_as_before(
        hook, certctl_binary):
    """The chart's RBAC names its targets and lists no webhook configurations: the one LIST
    is refused, said at debug level, and the job goes on as it would without the look."""
    shared_secret(hook, certctl_binary)
    before = secret_data(hook)
    hook.reset_request_log()
    result = job(hook, certctl_binary, "--log-level", "debug", service="hook-b")
    assert result.returncode == 0, result.stderr
    assert "could not be looked for" in result.stderr, result.stderr
    assert secret_data(hook)["tls.crt"] != before["tls.crt"]
    refused = [(e["verb"], e["resource"]) for e in hook.request_log()["requests"]
               if e["user"] == "system:serviceaccount:infra:certctl" and e["code"] == 403]
    assert refused == [("list", "validatingwebhookconfigurations")], refused
