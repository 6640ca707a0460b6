"""`certctl audit`: every webhook in the cluster as the API server meets it, on both backends,
with exactly the read-only permissions docs/audit.md lists."""

import base64
import json

import pytest

from harness.certctl import (api_service, b64, crd, read_only, run_certctl,
                             service_with_endpoints, webhook_configuration)

NS = "infra"
VWC = "ValidatingWebhookConfiguration"
MWC = "MutatingWebhookConfiguration"

AUDITOR_RULES = [
    {"verbs": ["get", "list"], "apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]},
    {"verbs": ["get", "list"], "apiGroups": ["apiextensions.k8s.io"],
     "resources": ["customresourcedefinitions"]},
    {"verbs": ["get", "list"], "apiGroups": ["apiregistration.k8s.io"],
     "resources": ["apiservices"]},
    {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["services"]},
    {"verbs": ["get", "list"], "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"]},
]


def apply(cluster, *objects):
    for obj in objects:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))


def ca_pem(certctl_binary, validity="10y"):
    made = run_certctl(certctl_binary, "generate", "--service", "hook", "-n", NS,
                       "--ca-validity", validity, "-o", "secret-json", "--log-level", "off")
    assert made.returncode == 0, made.stderr
    return base64.b64decode(json.loads(made.stdout)["data"]["ca.crt"]).decode()


def audit(cluster, certctl_binary, *args, user="auditor"):
    return run_certctl(certctl_binary, "audit", "--kubeconfig", cluster.kubeconfig(user),
                       "--log-level", "off", *args)


def with_policy(configuration, policy, rules=None, timeout=None):
    for entry in configuration["webhooks"]:
        entry["failurePolicy"] = policy
        if rules is not None:
            entry["rules"] = rules
        if timeout is not None:
            entry["timeoutSeconds"] = timeout
    return configuration


POD_CREATION = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                 "resources": ["pods"], "scope": "*"}]


@pytest.fixture
def webhooks(cluster, certctl_binary):
    """Webhooks set up every way a cluster holds them: healthy ones (as certctl or
    cert-manager's cainjector leave them: a valid CA in every caBundle), one a hook Job left
    without its bundle, a hand-written one with garbage, one whose CA ends soon, ones calling a
    Service that is gone or has no ready endpoint, one that fails closed on its own pods, and
    mutating ones whose timeouts add up."""
    cluster.kubectl("create", "namespace", NS)
    apply(cluster, *service_with_endpoints("hook", NS),
          *service_with_endpoints("down", NS, ready=(False,)))
    ca = ca_pem(certctl_binary)
    soon = ca_pem(certctl_binary, validity="10d")
    garbage = webhook_configuration(VWC, "garbage", ["g.hook.io"])
    garbage["webhooks"][0]["clientConfig"]["caBundle"] = b64("not a certificate")
    apply(cluster,
          webhook_configuration(VWC, "healthy", ["a.hook.io", "b.hook.io"], ca_bundle=ca,
                                labels={"audit": "healthy"}),
          crd("widgets.hook.io", ca_bundle=ca),
          api_service("metrics.hook.io", ca_bundle=ca),
          with_policy(webhook_configuration(VWC, "no-bundle", ["n.hook.io"]), "Ignore"),
          with_policy(garbage, "Ignore"),
          with_policy(webhook_configuration(MWC, "soon", ["s.hook.io"], ca_bundle=soon,
                                            labels={"audit": "warnings"}), "Ignore"),
          with_policy(webhook_configuration(VWC, "gone", ["x.hook.io"], ca_bundle=ca,
                                            service="gone"), "Fail"),
          with_policy(webhook_configuration(VWC, "down", ["d.hook.io"], ca_bundle=ca,
                                            service="down", labels={"audit": "warnings"}),
                      "Ignore"),
          with_policy(webhook_configuration(VWC, "own-pods", ["p.hook.io"], ca_bundle=ca),
                      "Fail", rules=POD_CREATION),
          with_policy(webhook_configuration(MWC, "slow", [f"m{i}.hook.io" for i in range(4)],
                                            ca_bundle=ca), "Ignore", timeout=10))
    cluster.add_user("auditor", AUDITOR_RULES)
    return ca


def codes(report):
    return sorted((f["code"], f["severity"], f["object"], f["entry"]) for f in report["findings"])


@pytest.mark.backends("emulator", "real")
def test_every_finding_is_reported_with_reads_only_and_fail_on_decides_the_exit(
        cluster, certctl_binary, webhooks):
    cluster.reset_request_log()

    result = audit(cluster, certctl_binary, "-o", "json")

    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False
    vwc, mwc = "validatingwebhookconfiguration", "mutatingwebhookconfiguration"
    assert codes(report) == sorted([
        ("ca-bundle-missing", "critical", f"{vwc}/no-bundle", "webhooks[0] (n.hook.io)"),
        ("ca-bundle-unparsable", "critical", f"{vwc}/garbage", "webhooks[0] (g.hook.io)"),
        ("ca-bundle-expiring-soon", "warning", f"{mwc}/soon", "webhooks[0] (s.hook.io)"),
        ("service-missing", "critical", f"{vwc}/gone", "webhooks[0] (x.hook.io)"),
        ("no-ready-endpoints", "warning", f"{vwc}/down", "webhooks[0] (d.hook.io)"),
        ("self-deadlock", "warning", f"{vwc}/own-pods", "webhooks[0] (p.hook.io)"),
        ("timeouts-add-up", "warning", "CREATE configmaps", ""),
    ])
    healthy = [o for o in report["objects"] if o["name"] == "healthy"]
    assert [(o["entry"], o["calls"], o["failurePolicy"], o["caBundle"]["certificates"],
             o["findings"]) for o in healthy] == [
        ("webhooks[0] (a.hook.io)", "hook.infra.svc", "Fail", 1, []),
        ("webhooks[1] (b.hook.io)", "hook.infra.svc", "Fail", 1, []),
    ]
    kinds = {(o["kind"], o["name"]) for o in report["objects"]}
    assert ("CustomResourceDefinition", "widgets.hook.io") in kinds
    assert ("APIService", "v1.metrics.hook.io") in kinds
    # The built-in APIServices are served by the API server itself: nothing to call.
    assert not any(o["kind"] == "APIService" and o["name"] == "v1.apps" for o in report["objects"])

    only_reads, verbs = read_only(cluster.request_log(), "auditor")
    assert only_reads, verbs
    assert cluster.writes() == []

    text = audit(cluster, certctl_binary)
    assert text.returncode == 1
    assert "critical validatingwebhookconfiguration/gone webhooks[0] (x.hook.io): calls " \
           "service/infra/gone, which does not exist" in text.stdout, text.stdout
    assert text.stdout.rstrip().splitlines()[-1].endswith("3 critical, 4 warnings")

    # --fail-on and the selector, on the same cluster.
    healthy = audit(cluster, certctl_binary, "--webhook-selector", "audit=healthy",
                    "--fail-on", "warning")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert "audited 2 entries of 1 object: 0 critical, 0 warnings" in healthy.stdout
    warnings = audit(cluster, certctl_binary, "--webhook-selector", "audit=warnings")
    assert warnings.returncode == 0, warnings.stdout + warnings.stderr
    strict = audit(cluster, certctl_binary, "--webhook-selector", "audit=warnings",
                   "--fail-on", "warning", "-o", "json")
    assert strict.returncode == 1
    assert json.loads(strict.stdout)["ok"] is False

    # Credentials that may not list Services: the rest is still audited, and a note says so.
    cluster.add_user("webhooks-only", AUDITOR_RULES[:3])
    partial = audit(cluster, certctl_binary, "-o", "json", user="webhooks-only")
    assert partial.returncode == 1, partial.stdout + partial.stderr
    partial_report = json.loads(partial.stdout)
    found = {f["code"] for f in partial_report["findings"]}
    assert "ca-bundle-missing" in found and "service-missing" not in found
    assert any("could not list Services" in note for note in partial_report["notes"])


@pytest.mark.backends("emulator", "real")
def test_credentials_that_may_not_list_webhooks_exit_two_with_a_json_document(cluster,
                                                                              certctl_binary):
    cluster.add_user("nobody", [{"verbs": ["get"], "apiGroups": [""], "resources": ["services"]}])

    result = audit(cluster, certctl_binary, "-o", "json", user="nobody")

    assert result.returncode == 2, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert "validatingwebhookconfigurations" in document["error"]
