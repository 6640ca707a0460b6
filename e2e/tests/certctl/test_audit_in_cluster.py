"""`certctl audit` in the cluster, on the real API server: the read-only ClusterRole of
manifests/examples/audit (its image named) and of the chart's `audit.enabled` applied, and the
audit run as the example's ServiceAccount with the in-cluster configuration and the
CronJob's own arguments. The real authorizer grants exactly what the audit reads: it runs
with no check left out, every request it makes is a granted read, and neither account may
write anything or read a Secret. The renders themselves:
e2e/tests/manifests/test_audit_manifests.py."""

import json
import os

import pytest

from harness.certctl import run_certctl, service_with_endpoints, webhook_configuration
from harness.helm import CERTCTL_IMAGE, REPO, Helm, find_helm
from harness.kustomize import documents, kustomize

pytestmark = pytest.mark.backends("real")

CHART = os.path.join(REPO, "manifests", "helm", "certctl")
EXAMPLE = os.path.join(REPO, "manifests", "examples", "audit")
NS = "certctl-audit"  # the example's namespace
ACCOUNT = f"system:serviceaccount:{NS}:certctl-audit"
CHART_ACCOUNT = "system:serviceaccount:infra:hook-certctl-audit"

READ = [("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("apiregistration.k8s.io", "apiservices"),
        ("", "services"),
        ("discovery.k8s.io", "endpointslices")]
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def chart_audit_objects(tmp_path):
    """The chart's audit objects for release hook in infra (mode job)."""
    proc = Helm(find_helm(), tmp_path).run(
        "template", "hook", CHART, "--namespace", "infra", "--show-only", "templates/audit.yaml",
        values={"mode": "job", "image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
                "targets": {"validatingWebhooks": ["hook"]},
                "audit": {"enabled": True, "timeZone": "Etc/UTC"}})
    assert proc.returncode == 0, proc.stderr
    return documents(proc.stdout)


def apply(cluster, objects):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": objects}))


def allowed(cluster, user, verb, group, resource):
    """The API server's own answer (a SubjectAccessReview) for the account `user`, with the
    groups every ServiceAccount token carries."""
    namespace = user.split(":")[2]
    resp = cluster.api("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts",
                                          f"system:serviceaccounts:{namespace}",
                                          "system:authenticated"],
                 "resourceAttributes": {"verb": verb, "group": group, "resource": resource}}})
    assert resp.status == 201, resp.body
    return resp.json()["status"]["allowed"]


def test_the_read_only_role_is_all_the_audit_needs_and_allows_no_write(
        cluster, certctl_binary, tmp_path):
    _, example = kustomize(EXAMPLE)
    chart = chart_audit_objects(tmp_path)
    ca = run_certctl(certctl_binary, "generate", "--service", "hook", "-n", "infra", "-o",
                     "secret-json", "--log-level", "off")
    assert ca.returncode == 0, ca.stderr
    healthy = webhook_configuration("ValidatingWebhookConfiguration", "healthy", ["h.hook.io"])
    healthy["webhooks"][0]["clientConfig"]["caBundle"] = json.loads(ca.stdout)["data"]["ca.crt"]
    bare = webhook_configuration("MutatingWebhookConfiguration", "bare", ["b.hook.io"])
    # Both as written, the CronJobs too: the real API server validates them.
    apply(cluster, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                    for name in (NS, "infra")] +
          example + chart + [*service_with_endpoints("hook", "infra"), healthy, bare])
    cluster.service_account_token(ACCOUNT)
    [cronjob] = [o for o in example if o["kind"] == "CronJob"]
    [container] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    # The CronJob's arguments, but for --handshake: the webhooks' pods do not run here.
    args = [arg for arg in container["args"] if arg != "--handshake"]
    assert args[:3] == ["audit", "-o", "json"], args
    cluster.reset_request_log()

    result = run_certctl(certctl_binary, *args, env=cluster.in_cluster_env(ACCOUNT, NS))

    # Exit 1 for the missing bundle: the audit ran (2 would be a refusal), with every check.
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["notes"] == [], report["notes"]
    assert [(f["code"], f["object"]) for f in report["findings"]] == [
        ("ca-bundle-missing", "mutatingwebhookconfiguration/bare")]
    assert [(o["name"], o["findings"]) for o in report["objects"]
            if o["name"] == "healthy"] == [("healthy", [])]
    requests = [r for r in cluster.request_log()["requests"] if r["user"] == ACCOUNT]
    assert {(r["verb"], r["resource"]) for r in requests} >= {
        ("list", resource) for _, resource in READ}
    assert {r["verb"] for r in requests} <= {"get", "list"}, requests
    assert all(r["code"] == 200 for r in requests), requests

    for user in (ACCOUNT, CHART_ACCOUNT):
        for group, resource in READ:
            for verb in ("get", "list"):
                assert allowed(cluster, user, verb, group, resource), (user, verb, resource)
            for verb in ("watch",) + WRITES:
                assert not allowed(cluster, user, verb, group, resource), \
                    (user, verb, resource)
        for verb, resource in (("get", "secrets"), ("list", "secrets"), ("create", "pods"),
                               ("create", "events")):
            assert not allowed(cluster, user, verb, "", resource), (user, verb, resource)
    can_i = cluster.kubectl("auth", "can-i", "create", "validatingwebhookconfigurations",
                            "--as", ACCOUNT, check=False)
    assert (can_i.returncode, can_i.stdout.strip()) == (1, "no"), can_i.stdout + can_i.stderr
