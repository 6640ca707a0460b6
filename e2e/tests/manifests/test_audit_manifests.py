"""The in-cluster audit, offline: the chart's `audit.*` values and the plain example
manifests/examples/audit render the read-only ClusterRole, a ServiceAccount bound to it and
a CronJob running `certctl audit`, and nothing of it unless asked. The same objects against
the real API server: e2e/tests/certctl/test_audit_in_cluster.py."""

import os

import pytest
import yaml

from harness.helm import CERTCTL_IMAGE, REPO, Helm, by_kind, find_helm, one
from harness.kustomize import TEST_IMAGE, certctl_images, documents, kustomize

CHART = os.path.join(REPO, "manifests", "helm", "certctl")
EXAMPLE = os.path.join(REPO, "manifests", "examples", "audit")
RELEASE, NS = "hook", "infra"
AUDIT_KINDS = ["ClusterRole", "ClusterRoleBinding", "CronJob", "ServiceAccount"]

# What `certctl audit` reads (docs/audit.md), as (apiGroup, resource, verb): get and list on
# the four kinds that call webhooks, Services and EndpointSlices; nothing else.
READ_ONLY = {(group, resource, verb)
             for group, resource in [
                 ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
                 ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
                 ("apiextensions.k8s.io", "customresourcedefinitions"),
                 ("apiregistration.k8s.io", "apiservices"),
                 ("", "services"),
                 ("discovery.k8s.io", "endpointslices")]
             for verb in ("get", "list")}

MODES = {
    "job": {"mode": "job", "image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
            "targets": {"validatingWebhooks": ["hook"]}},
    "sidecar": {"image": CERTCTL_IMAGE, "webhook": {"service": "hook"},
                "targets": {"validatingWebhooks": ["hook"]},
                "sidecar": {"webhook": {"image": {"repository": "registry.example/hook"}}}},
}


def rule_set(role):
    """(apiGroup, resource, verb) of every rule; a rule naming objects would fail here."""
    out = set()
    for rule in role["rules"]:
        assert not rule.get("resourceNames") and not rule.get("nonResourceURLs"), rule
        out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"]
                for v in rule["verbs"]}
    return out


def audit_objects(objects):
    return sorted((o for o in objects
                   if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/component")
                   == "audit"), key=lambda o: o["kind"])


@pytest.fixture(scope="module")
def helm(tmp_path_factory):
    return Helm(find_helm(), tmp_path_factory.mktemp("helm"))


def render(helm, values):
    proc = helm.run("template", RELEASE, CHART, "--namespace", NS, values=values)
    assert proc.returncode == 0, proc.stderr
    return documents(proc.stdout)


def pod_spec(cronjob):
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def assert_bound_read_only(objects, namespace):
    """The four objects hang together: the CronJob's pods run as the ServiceAccount, bound to
    the ClusterRole, which grants exactly READ_ONLY."""
    account, role = one(objects, "ServiceAccount"), one(objects, "ClusterRole")
    binding, cronjob = one(objects, "ClusterRoleBinding"), one(objects, "CronJob")
    assert rule_set(role) == READ_ONLY
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount",
                                    "name": account["metadata"]["name"],
                                    "namespace": namespace}]
    assert account["metadata"]["namespace"] == cronjob["metadata"]["namespace"] == namespace
    spec = pod_spec(cronjob)
    assert spec["serviceAccountName"] == account["metadata"]["name"]
    assert spec["automountServiceAccountToken"] is True
    assert spec["restartPolicy"] == "Never"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    assert cronjob["spec"]["jobTemplate"]["spec"]["backoffLimit"] == 0
    [container] = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["limits"]["memory"]
    return container


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_chart_renders_no_audit_unless_enabled(helm, mode):
    objects = render(helm, MODES[mode])
    assert audit_objects(objects) == []
    assert by_kind(objects, "CronJob") == []
    assert not [o for o in objects if o["metadata"]["name"].endswith("-audit")]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_chart_renders_the_read_only_audit_when_enabled(helm, mode):
    without = render(helm, MODES[mode])
    objects = render(helm, {**MODES[mode], "audit": {"enabled": True}})

    audit = audit_objects(objects)
    assert [o["kind"] for o in audit] == AUDIT_KINDS
    # Added beside the release's own objects, which stay as they were.
    assert [o for o in objects if o not in audit] == without
    container = assert_bound_read_only(audit, NS)
    assert container["image"] == f"registry.example/certctl:{chart_version()}"
    assert container["args"] == ["audit", "--handshake", "-o", "json", "--fail-on", "critical",
                                 "--renew-before", "30d", "--log-level", "info",
                                 "--log-format", "json"]
    cronjob = one(audit, "CronJob")
    assert cronjob["spec"]["schedule"] == "0 6 * * *"
    assert "timeZone" not in cronjob["spec"]
    # The chart's other pods' security context.
    job_values = yaml.safe_load(open(os.path.join(CHART, "values.yaml"), encoding="utf-8"))["job"]
    assert pod_spec(cronjob)["securityContext"] == job_values["podSecurityContext"]
    assert container["securityContext"] == job_values["securityContext"]
    role = one(audit, "ClusterRole")["metadata"]["name"]
    assert role == f"{RELEASE}-certctl-{NS}-audit"
    assert one(audit, "ClusterRoleBinding")["metadata"]["name"] == role


def test_the_audit_values_reach_the_cronjob(helm):
    objects = render(helm, {**MODES["job"], "image": {"repository": "registry.example/certctl",
                                                      "tag": "9.9.9"},
                            "logLevel": "warn",
                            "audit": {"enabled": True, "schedule": "*/30 * * * *",
                                      "timeZone": "Europe/Berlin", "handshake": False,
                                      "failOn": "warning", "renewBefore": "60d",
                                      "extraArgs": ["--webhook-selector=team=payments"],
                                      "nodeSelector": {"kubernetes.io/os": "linux"},
                                      "podLabels": {"team": "platform"},
                                      "resources": {"limits": {"memory": "256Mi"}}}})
    cronjob = one(objects, "CronJob")
    assert cronjob["spec"]["schedule"] == "*/30 * * * *"
    assert cronjob["spec"]["timeZone"] == "Europe/Berlin"
    spec = pod_spec(cronjob)
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]["team"] \
        == "platform"
    [container] = spec["containers"]
    assert container["image"] == "registry.example/certctl:9.9.9"
    # Helm merges maps: the default requests stay.
    assert container["resources"] == {"limits": {"memory": "256Mi"},
                                      "requests": {"cpu": "10m", "memory": "32Mi"}}
    assert container["args"] == ["audit", "-o", "json", "--fail-on", "warning",
                                 "--renew-before", "60d", "--log-level", "warn",
                                 "--log-format", "json", "--webhook-selector=team=payments"]


def test_the_audit_lints_and_bad_values_fail_the_schema(helm):
    values = {**MODES["sidecar"], "audit": {"enabled": True}}
    lint = helm.run("lint", "--strict", CHART, "--namespace", NS, values=values)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    for audit, field in [({"failOn": "info"}, "audit.failOn"),
                         ({"schedule": "daily"}, "audit.schedule"),
                         ({"renewBefore": "1 month"}, "audit.renewBefore"),
                         ({"enable": True}, "enable")]:
        proc = helm.run("template", RELEASE, CHART, values={**MODES["job"], "audit": audit})
        assert proc.returncode != 0 and "schema" in proc.stderr and field in proc.stderr, \
            (audit, proc.stderr)


def chart_version():
    with open(os.path.join(CHART, "Chart.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)["appVersion"]


def test_the_example_renders_the_same_read_only_audit(helm):
    _, objects = kustomize(EXAMPLE)

    assert sorted(o["kind"] for o in objects) == AUDIT_KINDS
    assert audit_objects(objects) == sorted(objects, key=lambda o: o["kind"])
    container = assert_bound_read_only(objects, "certctl-audit")
    assert {o["metadata"]["name"] for o in objects} == {"certctl-audit"}
    assert certctl_images(objects) == [("CronJob", "certctl-audit", TEST_IMAGE)]
    assert container["args"][:4] == ["audit", "--handshake", "-o", "json"]
    # The chart grants the same, rule for rule.
    chart = render(helm, {**MODES["job"], "audit": {"enabled": True}})
    assert one(audit_objects(chart), "ClusterRole")["rules"] == \
        one(objects, "ClusterRole")["rules"]
