"""`certctl audit --handshake`: each entry dialled as the API server dials it, on both backends.
On the real one every verdict is set beside the call kube-apiserver makes itself: an entry the
handshake passes is one whose admission call works, and one it fails is one whose call fails.

Two example webhook servers run on this machine's address: `hook` with a pair for
hook.infra.svc (and the address itself, for a URL entry), `soon` with one for soon.infra.svc
that ends in 10 days. Selector-less Services route to them (or to a port nothing listens on),
and each configuration matches only ConfigMaps labelled with its own name, failing closed."""

import json

import pytest

from harness.certctl import b64, run_certctl, selectorless_service
from harness.kubelet import free_ports
from harness.sidecar import WebhookServer

NS = "infra"


def apply(cluster, *objects):
    for obj in objects:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))


def served_pair(binary, folder, service, *args):
    """certctl generate's pair for service.NS.svc in `folder`; returns the CA's PEM."""
    folder.mkdir()
    made = run_certctl(binary, "generate", "--service", service, "-n", NS, "--out-dir",
                       str(folder), "--log-level", "off", *args)
    assert made.returncode == 0, made.stderr
    return (folder / "ca.crt").read_text()


def configuration(name, bundle, service=None, url=None):
    """A ValidatingWebhookConfiguration whose one entry checks the creation of ConfigMaps
    labelled hook=<name> in NS, failing closed."""
    client_config = {"caBundle": b64(bundle)}
    if url:
        client_config["url"] = url
    else:
        client_config["service"] = {"namespace": NS, "name": service, "path": "/validate",
                                    "port": 443}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"audit": "handshake"}},
        "webhooks": [{
            "name": f"{name}.hook.io", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": client_config,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
            "objectSelector": {"matchLabels": {"hook": name}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"]}]}]}


@pytest.fixture
def served(cluster, certctl_binary, tmp_path):
    cluster.kubectl("create", "namespace", NS)
    address = cluster.node_ip
    hook_ca = served_pair(certctl_binary, tmp_path / "hook", "hook", "--ip", address)
    soon_ca = served_pair(certctl_binary, tmp_path / "soon", "soon", "--cert-validity", "10d")
    hook_port, soon_port, closed_port = free_ports(3)
    servers = [WebhookServer(str(tmp_path / name), str(tmp_path), name=f"{name}-server",
                             listen=f"{address}:{port}")
               for name, port in (("hook", hook_port), ("soon", soon_port))]
    for server in servers:
        server.start()
    apply(cluster,
          *(item for name, port in (("hook", hook_port), ("alias", hook_port),
                                    ("soon", soon_port), ("dead", closed_port))
            for item in selectorless_service(name, NS, address, port)),
          configuration("healthy", hook_ca, service="hook"),
          configuration("by-url", hook_ca, url=f"https://{address}:{hook_port}/validate"),
          configuration("wrong-name", hook_ca, service="alias"),
          configuration("untrusted", soon_ca, service="hook"),
          configuration("dead", hook_ca, service="dead"),
          configuration("soon", soon_ca, service="soon"))
    yield
    for server in servers:
        server.stop()


def findings(report):
    return sorted((f["code"], f["severity"], f["object"].split("/", 1)[1])
                  for f in report["findings"])


@pytest.mark.backends("real")
def test_handshake_findings_are_what_the_api_server_meets(cluster, certctl_binary, served):
    result = run_certctl(certctl_binary, "audit", "--handshake", "--webhook-selector",
                         "audit=handshake", "-o", "json", "--kubeconfig", cluster.kubeconfig(),
                         "--log-level", "off")
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert findings(report) == [
        ("handshake-failed", "critical", "dead"),
        ("handshake-failed", "critical", "untrusted"),
        ("serving-cert-expiring-soon", "warning", "soon"),
        ("target-name-not-covered", "critical", "wrong-name"),
    ], report
    by_name = {f["object"].split("/", 1)[1]: f["message"] for f in report["findings"]}
    assert "connect" in by_name["dead"], by_name
    assert "does not verify against the caBundle" in by_name["untrusted"], by_name
    assert "not valid for alias.infra.svc" in by_name["wrong-name"], by_name
    assert report["notes"] == [], report["notes"]
    assert report["handshake"] is True

    # Without --handshake nothing of that is known: every Service has a ready endpoint.
    quiet = run_certctl(certctl_binary, "audit", "--webhook-selector", "audit=handshake",
                        "-o", "json", "--kubeconfig", cluster.kubeconfig(), "--log-level", "off")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert json.loads(quiet.stdout)["findings"] == []
    assert json.loads(quiet.stdout)["handshake"] is False  # and the document says so

    # The real API server agrees: it calls what the handshake passed and refuses the rest.
    for name, works in (("healthy", True), ("by-url", True), ("soon", True),
                        ("wrong-name", False), ("untrusted", False), ("dead", False)):
        created = cluster.kubectl(
            "apply", "--dry-run=server", "-f", "-", check=False,
            input=json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": f"probe-{name}", "namespace": NS,
                                           "labels": {"hook": name}}}))
        assert (created.returncode == 0) == works, (name, created.stdout, created.stderr)
        if not works:
            assert f"{name}.hook.io" in created.stderr, created.stderr
