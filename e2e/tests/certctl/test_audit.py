"""`certctl audit`: every webhook in the cluster as the API server meets it, on both backends,
with exactly the read-only ClusterRole the manifests ship (docs/audit.md)."""

import base64
import datetime
import json
import os

import pytest
import yaml

from harness.badpki import Authority, now
from harness.certctl import (api_service, b64, crd, read_only, run_certctl,
                             service_with_endpoints, webhook_configuration)
from harness.helm import REPO

NS = "infra"
VWC = "ValidatingWebhookConfiguration"
MWC = "MutatingWebhookConfiguration"


def _example_role_rules():
    """The rules of the read-only ClusterRole the manifests ship (manifests/examples/audit):
    the tests audit with exactly those, so the role is proven enough."""
    with open(os.path.join(REPO, "manifests", "examples", "audit", "clusterrole.yaml"),
              encoding="utf-8") as f:
        return next(doc for doc in yaml.safe_load_all(f) if doc["kind"] == "ClusterRole")["rules"]


# The four kinds first, then Services and EndpointSlices.
AUDITOR_RULES = _example_role_rules()


def apply(cluster, *objects):
    """One kubectl for all of them, in their order (a List)."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": list(objects)}))


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


INGRESS_CREATION = [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["networking.k8s.io"],
                      "apiVersions": ["v1"], "resources": ["ingresses"]}]


def expired_ca_pem():
    """A CA that ended yesterday, the only certificate of its bundle."""
    ended = now() - datetime.timedelta(days=1)
    return Authority("lapsed-ca", not_before=ended - datetime.timedelta(days=365),
                     not_after=ended).cert_pem


def as_cainjector_leaves_it(ca):
    """What cert-manager's cainjector leaves: the configuration annotated with the Certificate
    whose Secret's ca.crt it copies into every caBundle, failing closed."""
    configuration = with_policy(webhook_configuration(
        VWC, "policy-controller", ["validate.policy.example.io", "defaults.policy.example.io"],
        ca_bundle=ca), "Fail",
        rules=[{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"],
                "apiVersions": ["v1"], "resources": ["deployments"]}])
    configuration["metadata"]["annotations"] = {
        "cert-manager.io/inject-ca-from": f"{NS}/policy-controller-serving"}
    return configuration


def as_a_hook_job_leaves_it(ca):
    """What ingress-nginx's kube-webhook-certgen leaves after its patch Job: the caBundle of
    its own CA and failurePolicy Fail, calling a named Service port in its own namespace."""
    configuration = with_policy(webhook_configuration(
        VWC, "ingress-nginx-admission", ["validate.nginx.ingress.kubernetes.io"],
        ca_bundle=ca, service="ingress-nginx-controller-admission", namespace="ingress-nginx"),
        "Fail", rules=INGRESS_CREATION)
    configuration["webhooks"][0]["clientConfig"]["service"]["path"] = \
        "/networking/v1/ingresses"
    return configuration


def certctl_sets_up(cluster, certctl_binary):
    """certctl's own webhooks as `certctl job` leaves them: shipped with Ignore and no
    caBundle, then the Secret made, its CA injected and failurePolicy raised to Fail."""
    apply(cluster, with_policy(webhook_configuration(VWC, "certctl-managed",
                                                     ["a.certctl.io", "b.certctl.io"]),
                               "Ignore"))
    done = run_certctl(certctl_binary, "job", "--kubeconfig", cluster.kubeconfig(), "-n", NS,
                       "--secret", "webhook-server-cert", "--service", "hook",
                       "--validating-webhook", "certctl-managed",
                       "--failure-policy-once-ready", "Fail", "--log-level", "off")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def webhooks(cluster, certctl_binary):
    """Webhooks set up every way a cluster holds them. Healthy: hand-written ones with a valid
    CA in every caBundle, one as cert-manager's cainjector leaves it, one as a hook Job
    (ingress-nginx's kube-webhook-certgen) leaves it, and certctl's own after `certctl job`.
    Broken: one a hook Job left without its bundle, a hand-written one with garbage, one whose
    only CA has expired, one whose CA ends soon, ones calling a Service that is gone, a port it
    lacks or no ready endpoint, a URL with no host, one that fails closed on its own pods, and
    mutating ones whose timeouts add up."""
    apply(cluster, *({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                     for name in (NS, "ingress-nginx")),
          *service_with_endpoints("hook", NS),
          *service_with_endpoints("down", NS, ready=(False,)),
          *service_with_endpoints("ingress-nginx-controller-admission", "ingress-nginx",
                                  target_port=8443, port_name="https-webhook"))
    ca = ca_pem(certctl_binary)
    soon = ca_pem(certctl_binary, validity="10d")
    garbage = webhook_configuration(VWC, "garbage", ["g.hook.io"])
    garbage["webhooks"][0]["clientConfig"]["caBundle"] = b64("not a certificate")
    wrong_port = webhook_configuration(VWC, "wrong-port", ["w.hook.io"], ca_bundle=ca)
    wrong_port["webhooks"][0]["clientConfig"]["service"]["port"] = 8443
    # The API server refuses a URL that is not https, has user information, a query or a
    # fragment, and a Service reference without name or namespace or with a port out of
    # range: of what certctl calls target-invalid it stores only a URL whose authority is a
    # port alone (Go's url.URL has Host ":8443"), which it can never call.
    no_host = webhook_configuration(VWC, "no-host", ["u.hook.io"], ca_bundle=ca)
    no_host["webhooks"][0]["clientConfig"] = {"url": "https://:8443/validate",
                                              "caBundle": b64(ca)}
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
                                            ca_bundle=ca), "Ignore", timeout=10),
          with_policy(webhook_configuration(VWC, "expired", ["e.hook.io"],
                                            ca_bundle=expired_ca_pem()), "Ignore"),
          with_policy(wrong_port, "Fail"),
          with_policy(no_host, "Ignore"),
          as_cainjector_leaves_it(ca),
          as_a_hook_job_leaves_it(ca_pem(certctl_binary)))
    certctl_sets_up(cluster, certctl_binary)
    cluster.add_user("auditor", AUDITOR_RULES)
    return ca


def codes(report):
    return sorted((f["code"], f["severity"], f["object"], f["entry"]) for f in report["findings"])


@pytest.mark.backends("real")
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
        ("ca-bundle-expired", "critical", f"{vwc}/expired", "webhooks[0] (e.hook.io)"),
        ("service-port-missing", "critical", f"{vwc}/wrong-port", "webhooks[0] (w.hook.io)"),
        ("target-invalid", "critical", f"{vwc}/no-host", "webhooks[0] (u.hook.io)"),
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
    # cert-manager's, the hook Job's and certctl's own: each entry trusted, failing closed,
    # reachable, and nothing found.
    managed = sorted((o["name"], o["entry"], o["calls"], o["failurePolicy"],
                      o["caBundle"]["certificates"], o["findings"]) for o in report["objects"]
                     if o["name"] in ("policy-controller", "ingress-nginx-admission",
                                      "certctl-managed"))
    assert managed == [
        ("certctl-managed", "webhooks[0] (a.certctl.io)", "hook.infra.svc", "Fail", 1, []),
        ("certctl-managed", "webhooks[1] (b.certctl.io)", "hook.infra.svc", "Fail", 1, []),
        ("ingress-nginx-admission", "webhooks[0] (validate.nginx.ingress.kubernetes.io)",
         "ingress-nginx-controller-admission.ingress-nginx.svc", "Fail", 1, []),
        ("policy-controller", "webhooks[0] (validate.policy.example.io)", "hook.infra.svc",
         "Fail", 1, []),
        ("policy-controller", "webhooks[1] (defaults.policy.example.io)", "hook.infra.svc",
         "Fail", 1, []),
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
    assert text.stdout.rstrip().splitlines()[-1].endswith("6 critical, 4 warnings")

    # --fail-on and the selector, on the same cluster.
    healthy = audit(cluster, certctl_binary, "--webhook-selector", "audit=healthy",
                    "--fail-on", "warning")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert "audited 2 entries of 1 object: 0 critical, 0 warnings" in healthy.stdout
    # A clean summary says what it did not look at: what the webhooks serve.
    assert "not checked: the certificates the webhooks serve" in healthy.stdout, healthy.stdout
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


@pytest.mark.backends("real")
def test_credentials_that_may_not_list_webhooks_exit_two_with_a_json_document(cluster,
                                                                              certctl_binary):
    cluster.add_user("nobody", [{"verbs": ["get"], "apiGroups": [""], "resources": ["services"]}])

    result = audit(cluster, certctl_binary, "-o", "json", user="nobody")

    assert result.returncode == 2, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert "validatingwebhookconfigurations" in document["error"]
