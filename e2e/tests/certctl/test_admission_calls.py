"""Callable means the real API server called it: kube-apiserver v1.37 (scripts/kube-up.sh)
sends AdmissionReviews to the example webhook server, verifying its certificate against
the caBundle certctl injected and the name NAME.NAMESPACE.svc, and routing to the address
of the Service's EndpointSlice (the machine's node-ip), as in a cluster.

certctl runs with a real ServiceAccount token and the chart's RBAC, so the real authorizer
decides every request it makes. Each configuration matches ConfigMaps of its own namespace
only (namespaceSelector), with failurePolicy Fail: an admission call that does not work
fails the create.
"""

import base64
import json

import pytest

from harness.certctl import api_service, crd, run_certctl, selectorless_service
from harness.kubelet import free_ports
from harness.rbac import emulator_rules
from harness.sidecar import WebhookServer

pytestmark = pytest.mark.backends("real")

NS = "infra"
SECRET = "webhook-server-cert"
USER = f"system:serviceaccount:{NS}:certctl"


def apply(cluster, *objects):
    for obj in objects:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))


def configuration(name, service):
    """A ValidatingWebhookConfiguration whose one entry checks ConfigMap creates in NS
    through `service`, failing closed, with no caBundle yet."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "configmaps.hook.io", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": {"service": {"namespace": NS, "name": service,
                                         "path": "/validate", "port": 443}},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"]}]}]}


class Webhook:
    """The namespace, the example webhook server on node-ip (its pair copied from the
    Secret, as the kubelet mounts it), a selector-less Service `called` pointing at it, a
    configuration `hook` calling that Service, and certctl's ServiceAccount with the chart's
    RBAC for these targets. `extra` are more targets in the chart's form (crds,
    apiServices), made to call the same Service."""

    def __init__(self, cluster, tmp_path, called="hook", extra=None):
        self.cluster = cluster
        self.targets = {"validatingWebhooks": ["hook"], **(extra or {})}
        self.cert_dir = tmp_path / "certs"
        self.cert_dir.mkdir()
        cluster.kubectl("create", "namespace", NS)
        (port,) = free_ports(1)
        self.server = WebhookServer(str(self.cert_dir), str(tmp_path),
                                    listen=f"{cluster.node_ip}:{port}", log_reviews=True)
        self.server.spawn()
        apply(cluster, *selectorless_service(called, NS, cluster.node_ip, port),
              configuration("hook", called),
              *(crd(name, service=called, namespace=NS)
                for name in self.targets.get("crds", ())),
              *(api_service(name.split(".", 1)[1], name.split(".", 1)[0], service=called,
                            namespace=NS)
                for name in self.targets.get("apiServices", ())))
        cluster.add_user(USER, emulator_rules("job", SECRET, NS, self.targets))

    def certctl(self, binary, command, *args):
        """certctl as a pod would run it: in-cluster configuration, the account's token,
        every target."""
        flags = {"validatingWebhooks": "--validating-webhook", "crds": "--crd",
                 "apiServices": "--apiservice"}
        targets = [arg for key, names in self.targets.items() for name in names
                   for arg in (flags[key], name)]
        return run_certctl(binary, command, "-n", NS, *targets, *args,
                           env=self.cluster.in_cluster_env(USER, NS))

    def serve_the_secret(self):
        """Writes the Secret's pair into the server's folder and waits until it serves."""
        secret = json.loads(self.cluster.kubectl("get", "secret", SECRET, "-n", NS,
                                                 "-o", "json").stdout)
        for key in ("tls.crt", "tls.key"):
            (self.cert_dir / key).write_bytes(base64.b64decode(secret["data"][key]))
        self.server.start()

    def create_configmap(self, name, *args):
        """kubectl create configmap in NS: the API server calls the webhook first."""
        return self.cluster.kubectl("create", "configmap", name, "-n", NS, *args,
                                    check=False)

    def reviews(self, kind="review"):
        """The lines the webhook server logged for the calls it answered: "review",
        "conversion" or "discovery"."""
        return [line for line in self.server.log().splitlines() if f" {kind} " in line]

    def stop(self):
        self.server.stop()


@pytest.fixture
def webhook(cluster, tmp_path):
    hook = Webhook(cluster, tmp_path)
    yield hook
    hook.stop()


@pytest.fixture
def mismatched(cluster, tmp_path):
    """The configuration calls hook-a; certctl is asked for a certificate for hook-b."""
    hook = Webhook(cluster, tmp_path, called="hook-a")
    yield hook
    hook.stop()


def test_the_real_api_server_calls_the_webhook_certctl_job_set_up(webhook, certctl_binary):
    cluster = webhook.cluster
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert version["gitVersion"].startswith("v1.37."), version

    # Before certctl: no caBundle, no certificate served. Failing closed, the create fails.
    before = webhook.create_configmap("before")
    assert before.returncode != 0
    assert 'failed calling webhook "configmaps.hook.io"' in before.stderr, before.stderr

    result = webhook.certctl(certctl_binary, "job", "--service", "hook")
    assert result.returncode == 0, result.stderr
    webhook.serve_the_secret()

    created = webhook.create_configmap("after")
    assert created.returncode == 0, created.stderr + webhook.server.log()
    assert any("CREATE configmaps infra/after: allowed" in line for line in webhook.reviews())

    # The webhook's answer is the one the API server acts on.
    denied = webhook.create_configmap("denied", "--dry-run=server")
    assert denied.returncode == 0, denied.stderr
    labelled = cluster.kubectl("create", "-f", "-", check=False, input=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "labelled", "namespace": NS,
                     "labels": {"certctl-example/deny": "yes"}}}))
    assert labelled.returncode != 0
    assert 'admission webhook "configmaps.hook.io" denied the request' in labelled.stderr, \
        labelled.stderr

    checked = webhook.certctl(certctl_binary, "check", "--service", "hook")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_certificate_for_another_name_fails_the_api_servers_own_handshake(
        mismatched, certctl_binary):
    result = mismatched.certctl(certctl_binary, "job", "--service", "hook-b")
    # SPEC 4a: job writes the bundle, then fails on the name it cannot cover.
    assert result.returncode == 1, result.stderr
    assert ("webhooks[0] (configmaps.hook.io) calls hook-a.infra.svc, which the certificate "
            "does not name") in result.stderr, result.stderr
    mismatched.serve_the_secret()

    refused = mismatched.create_configmap("probe")
    assert refused.returncode != 0
    # The API server's own verification: the caBundle is right, the name is not.
    assert "x509: certificate is valid for" in refused.stderr, refused.stderr
    assert "not hook-a.infra.svc" in refused.stderr, refused.stderr
    assert mismatched.reviews() == []

    checked = mismatched.certctl(certctl_binary, "check", "--service", "hook-b")
    assert checked.returncode == 1
    assert "target-name-not-covered" in checked.stdout + checked.stderr


@pytest.fixture
def served_apis(cluster, tmp_path):
    """A CRD with two versions converted by the webhook, and an APIService it serves."""
    hook = Webhook(cluster, tmp_path, extra={"crds": ["widgets.hook.io"],
                                            "apiServices": ["v1.metrics.hook.io"]})
    yield hook
    hook.stop()


def test_conversion_and_aggregation_go_through_the_certificate_certctl_keeps(
        served_apis, certctl_binary):
    cluster = served_apis.cluster
    cluster.kubectl("wait", "--for=condition=Established", "crd/widgets.hook.io",
                    "--timeout=30s")
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "hook.io/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": NS}, "spec": {"size": 3}}))

    # Before certctl nothing the API server calls can be verified.
    as_v2 = ("get", "widgets.v2.hook.io", "w", "-n", NS, "-o", "json")
    before = cluster.kubectl(*as_v2, check=False)
    assert before.returncode != 0
    assert "conversion webhook for hook.io/v1, Kind=Widget failed" in before.stderr, \
        before.stderr
    assert cluster.kubectl("get", "--raw", "/apis/metrics.hook.io/v1",
                           check=False).returncode != 0

    result = served_apis.certctl(certctl_binary, "job", "--service", "hook")
    assert result.returncode == 0, result.stderr
    served_apis.serve_the_secret()

    converted = json.loads(cluster.kubectl(*as_v2).stdout)
    assert converted["apiVersion"] == "hook.io/v2" and converted["spec"] == {"size": 3}
    assert any("to hook.io/v2" in line for line in served_apis.reviews("conversion"))

    # The aggregator finds the APIService available only through a verified handshake,
    # then proxies the group's requests to the webhook server.
    cluster.kubectl("wait", "--for=condition=Available", "apiservice/v1.metrics.hook.io",
                    "--timeout=30s")
    discovery = json.loads(cluster.kubectl("get", "--raw", "/apis/metrics.hook.io/v1").stdout)
    assert discovery["groupVersion"] == "metrics.hook.io/v1"
    assert served_apis.reviews("discovery")
