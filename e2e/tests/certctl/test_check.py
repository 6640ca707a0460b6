"""`certctl check` against the emulator: Secret and caBundle findings, configuration from a
kubeconfig and from an in-cluster service account, RBAC and availability failures."""

import base64
import json
import os
import re

import pytest

from harness.certctl import (api_service, b64, crd, read_only, run_certctl,
                             service_with_endpoints, webhook_configuration)

NS = "infra"
SECRET = "webhook-server-cert"
VWC = "ValidatingWebhookConfiguration"
MWC = "MutatingWebhookConfiguration"

# Exactly what `certctl check` needs: reads of the Secret, of the targets and of what the API
# server would dial for them (the Service and its EndpointSlices).
CHECKER_RULES = [
    {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
     "resourceNames": [SECRET], "namespaces": [NS]},
    {"verbs": ["get", "list"], "apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]},
    {"verbs": ["get"], "apiGroups": ["apiextensions.k8s.io"],
     "resources": ["customresourcedefinitions"]},
    {"verbs": ["get"], "apiGroups": ["apiregistration.k8s.io"], "resources": ["apiservices"]},
    {"verbs": ["get"], "apiGroups": [""], "resources": ["services"], "namespaces": [NS]},
    {"verbs": ["list"], "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
     "namespaces": [NS]},
]


def apply(cluster, *objects):
    for obj in objects:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))


def generate_secret(cluster, certctl_binary, service="hook"):
    """Puts a generated pair into the Secret the way docs/usage.md shows; returns the PEMs."""
    manifest = run_certctl(certctl_binary, "generate", "--service", service, "-n", NS,
                           "-o", "secret-json", "--log-level", "off")
    assert manifest.returncode == 0, manifest.stderr
    cluster.kubectl("apply", "-f", "-", input=manifest.stdout)
    data = json.loads(manifest.stdout)["data"]
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


@pytest.fixture
def setup(cluster, certctl_binary):
    """Namespace, Service with a ready endpoint, Secret and a checker user with least
    privilege."""
    cluster.kubectl("create", "namespace", NS)
    apply(cluster, *service_with_endpoints("hook", NS))
    pems = generate_secret(cluster, certctl_binary)
    cluster.add_user("checker", CHECKER_RULES)
    return pems


def check(cluster, certctl_binary, *args, user="checker", env=None):
    base = ["check", "--secret", SECRET, "-n", NS, "--service", "hook",
            "--kubeconfig", cluster.kubeconfig(user)]
    return run_certctl(certctl_binary, *base, *args, env=env)


def findings(result):
    return [(f["code"], f["object"]) for f in json.loads(result.stdout)["findings"]]


@pytest.mark.backends("real")
def test_healthy_secret_and_targets_pass_with_reads_only(cluster, certctl_binary, setup):
    ca = setup["ca.crt"]
    apply(cluster,
          webhook_configuration(VWC, "hook-validating", ["a.hook.io", "b.hook.io", "c.hook.io"],
                                ca_bundle=ca, labels={"app": "hook"}),
          webhook_configuration(MWC, "hook-mutating", ["m.hook.io"], ca_bundle=ca,
                                labels={"app": "hook"}),
          crd("widgets.hook.io", ca_bundle=ca),
          api_service("metrics.hook.io", ca_bundle=ca))
    cluster.reset_request_log()

    result = check(cluster, certctl_binary, "--validating-webhook", "hook-validating",
                   "--mutating-webhook", "hook-mutating", "--crd", "widgets.hook.io",
                   "--apiservice", "v1.metrics.hook.io", "-o", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["source"] == f"secret {NS}/{SECRET}"
    assert report["certificates"]["leaf"]["dnsNames"][0] == "hook.infra.svc"
    assert [(t["kind"], t["name"], t["webhook"], t["ok"]) for t in report["targets"]] == [
        (VWC, "hook-validating", "a.hook.io", True),
        (VWC, "hook-validating", "b.hook.io", True),
        (VWC, "hook-validating", "c.hook.io", True),
        (MWC, "hook-mutating", "m.hook.io", True),
        ("CustomResourceDefinition", "widgets.hook.io", "", True),
        ("APIService", "v1.metrics.hook.io", "", True),
    ]
    log = cluster.request_log()
    only_reads, verbs = read_only(log, "checker")
    assert only_reads, verbs
    assert cluster.writes() == []
    # One GET for the Secret, one per named target and one for the Service they all call, one
    # LIST of its EndpointSlices: nothing read twice.
    gets = [e for e in log["requests"] if e["user"] == "checker" and e["verb"] == "get"]
    assert len(gets) == 6
    lists = [e for e in log["requests"] if e["user"] == "checker" and e["verb"] == "list"]
    assert [e["resource"] for e in lists] == ["endpointslices"]

    text = check(cluster, certctl_binary, "--webhook-selector", "app=hook")
    assert text.returncode == 0, text.stdout + text.stderr
    assert text.stdout.startswith(f"ok: secret {NS}/{SECRET}")
    assert "4 caBundle(s) up to date" in text.stdout


@pytest.mark.backends("real")
def test_empty_and_foreign_ca_bundles_are_reported(cluster, certctl_binary, setup):
    other = run_certctl(certctl_binary, "generate", "--service", "x", "-o", "secret-json",
                        "--log-level", "off")
    other_ca = base64.b64decode(json.loads(other.stdout)["data"]["ca.crt"]).decode()
    vwc = webhook_configuration(VWC, "hook-validating", ["a.hook.io", "b.hook.io"],
                                ca_bundle=setup["ca.crt"])
    vwc["webhooks"][1]["clientConfig"]["caBundle"] = b64(other_ca)
    apply(cluster, vwc, webhook_configuration(MWC, "hook-mutating", ["m.hook.io"]))

    result = check(cluster, certctl_binary, "--validating-webhook", "hook-validating",
                   "--mutating-webhook", "hook-mutating", "-o", "json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert findings(result) == [
        ("ca-bundle-mismatch", "validatingwebhookconfiguration/hook-validating webhook b.hook.io"),
        ("ca-bundle-mismatch", "mutatingwebhookconfiguration/hook-mutating webhook m.hook.io"),
    ]
    messages = [f["message"] for f in report["findings"]]
    assert "does not contain the CA" in messages[0]
    assert messages[1] == "caBundle is empty"
    assert [t["ok"] for t in report["targets"]] == [True, False, False]

    text = check(cluster, certctl_binary, "--mutating-webhook", "hook-mutating")
    assert text.returncode == 1
    assert text.stdout == ("mutatingwebhookconfiguration/hook-mutating webhook m.hook.io: "
                           "caBundle is empty [ca-bundle-mismatch]\n"
                           "what to do: docs/troubleshooting.md#ca-bundle-mismatch\n")


@pytest.mark.backends("real")
def test_missing_targets_and_unmatched_selector(cluster, certctl_binary, setup):
    result = check(cluster, certctl_binary, "--validating-webhook", "nope", "--crd",
                   "gadgets.hook.io", "--webhook-selector", "app=none", "-o", "json")
    assert result.returncode == 1, result.stderr
    assert findings(result) == [
        ("target-missing", "validatingwebhookconfiguration/nope"),
        ("target-missing", "customresourcedefinition/gadgets.hook.io"),
        ("target-missing", "webhook-selector app=none"),
    ]


@pytest.mark.backends("real")
def test_missing_secret_wrong_type_and_missing_key(cluster, certctl_binary):
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user("checker", CHECKER_RULES)
    result = check(cluster, certctl_binary, "-o", "json")
    assert result.returncode == 1, result.stderr
    assert findings(result) == [("missing", f"secret/{NS}/{SECRET}")]

    apply(cluster, {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": SECRET, "namespace": NS},
                    "data": {"tls.crt": b64("not a certificate")}})
    result = check(cluster, certctl_binary, "-o", "json")
    assert result.returncode == 1
    codes = findings(result)
    assert ("wrong-type", f"secret/{NS}/{SECRET}") in codes
    assert ("unparsable", f"secret/{NS}/{SECRET}[tls.crt]") in codes
    assert ("missing", f"secret/{NS}/{SECRET}[tls.key]") in codes
    assert ("missing", f"secret/{NS}/{SECRET}[ca.crt]") in codes
    text = check(cluster, certctl_binary)
    assert f"secret/{NS}/{SECRET}: type is \"Opaque\", expected \"kubernetes.io/tls\" " \
           "[wrong-type]" in text.stdout


@pytest.mark.backends("real")
def test_wrong_service_is_a_san_finding(cluster, certctl_binary, setup):
    result = run_certctl(certctl_binary, "check", "--secret", SECRET, "-n", NS, "--service",
                         "renamed", "--kubeconfig", cluster.kubeconfig("checker"))
    assert result.returncode == 1
    assert "renamed.infra.svc" in result.stdout
    assert "[san-missing]" in result.stdout


@pytest.mark.backends("real")
def test_in_cluster_configuration(cluster, certctl_binary, setup):
    env = cluster.in_cluster_env("checker", NS)
    # No -n: the namespace comes from the service account folder.
    result = run_certctl(certctl_binary, "check", "--service", "hook", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"ok: secret {NS}/{SECRET}")
    # POD_NAMESPACE beats the service account's namespace.
    env["POD_NAMESPACE"] = "elsewhere"
    result = run_certctl(certctl_binary, "check", "--service", "hook", env=env)
    assert result.returncode == 2
    assert "forbidden" in result.stderr


@pytest.mark.backends("real")
def test_forbidden_unauthorized_and_unreachable_exit_two(cluster, certctl_binary, setup):
    cluster.add_user("nobody", [])
    forbidden = check(cluster, certctl_binary, user="nobody")
    assert forbidden.returncode == 2
    assert forbidden.stdout == ""
    assert forbidden.stderr.count("\n") == 1, forbidden.stderr
    assert (f'secrets "{SECRET}" is forbidden: User "{cluster.username("nobody")}" cannot get '
            f'resource "secrets" in API group "" in the namespace "{NS}"') in forbidden.stderr

    # A checker allowed to read the Secret but not the webhook configurations.
    cluster.add_user("half", CHECKER_RULES[:1])
    half = check(cluster, certctl_binary, "--validating-webhook", "x", user="half")
    assert half.returncode == 2
    assert "validatingwebhookconfigurations" in half.stderr and "forbidden" in half.stderr

    with open(cluster.kubeconfig("checker"), encoding="utf-8") as f:
        config = json.load(f)
    config["users"][0]["user"]["token"] = "not-a-valid-token"
    bad_token = os.path.join(cluster.tmp, "bad-token.kubeconfig")
    with open(bad_token, "w", encoding="utf-8") as f:
        json.dump(config, f)
    unauthorized = run_certctl(certctl_binary, "check", "--secret", SECRET, "-n", NS,
                               "--kubeconfig", bad_token)
    assert unauthorized.returncode == 2
    assert "Unauthorized" in unauthorized.stderr
    assert "not-a-valid-token" not in unauthorized.stderr

    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable_path = os.path.join(cluster.tmp, "unreachable.kubeconfig")
    with open(unreachable_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    unreachable = run_certctl(certctl_binary, "check", "--secret", SECRET, "-n", NS,
                              "--kubeconfig", unreachable_path, "--request-timeout", "2s")
    assert unreachable.returncode == 2
    assert unreachable.stderr.count("\n") == 1, unreachable.stderr
    assert "connect to 127.0.0.1 port 1" in unreachable.stderr
    # curl's words once, without its last attempt's "after 0 ms"; the attempts made instead.
    assert unreachable.stderr.count("Couldn't connect to server") == 1, unreachable.stderr
    assert " ms" not in unreachable.stderr, unreachable.stderr
    assert re.search(r"\(\d+ attempts in [\d.]+s\)$", unreachable.stderr.strip()), \
        unreachable.stderr


def test_survives_503_with_retry_after(cluster, certctl_binary, setup):
    apply(cluster, webhook_configuration(VWC, "hook-validating", ["a.hook.io"],
                                         ca_bundle=setup["ca.crt"]))
    cluster.inject_fault(method="GET", path=f"/secrets/{SECRET}$", status=503, count=2,
                         retry_after=1)
    cluster.inject_fault(method="GET", path="/validatingwebhookconfigurations/", status=429,
                         count=1, retry_after=1)
    cluster.reset_request_log()
    result = check(cluster, certctl_binary, "--validating-webhook", "hook-validating")
    assert result.returncode == 0, result.stdout + result.stderr
    statuses = [e["code"] for e in cluster.request_log()["requests"] if e["user"] == "checker"]
    assert statuses.count(503) == 2 and statuses.count(429) == 1, statuses
