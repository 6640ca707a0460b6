"""The worked example of a webhook chart that carries certctl as a dependency
(manifests/examples/chart-dependency): the webhook's own Deployment, Service and
ValidatingWebhookConfiguration, with the sidecar, its volumes and its mount put in by the
certctl chart's named templates, and certctl's ServiceAccount and RBAC rendered by the
dependency.

Offline: `helm dependency update` then `helm lint --strict` and `helm template`. Against the
emulator: `helm install` and `helm upgrade`, then the stored Deployment's two containers run
as a kubelet would run them (harness.kubelet.pod_container): certctl with exactly the RBAC
the release stored, the server as the example webhook server (harness/webhook_server.py).
The pod's readiness follows the serving check: not ready while the server is down, ready
once it serves the certificate certctl wrote, not ready again once it stops.
"""

import base64
import json
import os
import shutil
import subprocess
import time

import pytest
import yaml

from harness.helm import REPO, find_helm, helm_env, one
from harness.kubelet import free_ports, pod_container, rewrite_flags
from harness.sidecar import WEBHOOK_SERVER

EXAMPLE = os.path.join("manifests", "examples", "chart-dependency")
CERTCTL_CHART = os.path.join("manifests", "helm", "certctl")
NS = "my-system"
RELEASE = "my-webhook"
SA = "my-webhook-certctl"
USER = f"system:serviceaccount:{NS}:{SA}"
POLL = 0.05
BOUND = 20.0


def wait_for(predicate, what, bound=BOUND):
    deadline = time.monotonic() + bound
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {bound:g}s"
        time.sleep(POLL)


@pytest.fixture
def chart(tmp_path):
    """The example next to certctl's chart, as in the repository, its dependency fetched."""
    root = tmp_path / "repo"
    shutil.copytree(os.path.join(REPO, EXAMPLE), root / EXAMPLE)
    shutil.copytree(os.path.join(REPO, CERTCTL_CHART), root / CERTCTL_CHART)
    # certctl's image, as a user names it (no public image exists).
    values = root / EXAMPLE / "values.yaml"
    text = values.read_text(encoding="utf-8")
    unset = '    repository: ""\n'
    assert text.count(unset) == 1
    values.write_text(text.replace(unset, "    repository: registry.example/certctl\n"),
                      encoding="utf-8")
    path = str(root / EXAMPLE)
    run(tmp_path, "dependency", "update", path)
    return path


def run(tmp_path, *args, kubeconfig=os.devnull):
    proc = subprocess.run([find_helm(), *args], capture_output=True, text=True, timeout=120,
                          env=helm_env(tmp_path / "helm-home", kubeconfig))
    assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def rendered(tmp_path, chart, *args):
    """The release's objects (the `helm test` pod left out)."""
    out = run(tmp_path, "template", RELEASE, chart, "--namespace", NS, "--skip-tests", *args)
    return [doc for doc in yaml.safe_load_all(out) if doc]


def args_of(args, flag):
    return [value for key, value in zip(args, args[1:]) if key == flag]


def test_the_example_lints_and_renders_the_webhook_with_certctl_inside(tmp_path, chart):
    assert "1 chart(s) linted, 0 chart(s) failed" in run(tmp_path, "lint", "--strict", chart)
    objects = rendered(tmp_path, chart)
    assert sorted(obj["kind"] for obj in objects) == sorted([
        "Deployment", "Service", "ValidatingWebhookConfiguration", "ServiceAccount",
        "Role", "RoleBinding", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"])
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [certctl] = pod["initContainers"]
    [server] = pod["containers"]
    assert certctl["name"] == "certctl" and certctl["restartPolicy"] == "Always"
    assert args_of(certctl["args"], "--serving-addr") == ["127.0.0.1:9443"]
    assert args_of(certctl["args"], "--cert-dir") == ["/tls"]
    assert args_of(certctl["args"], "--service") == ["my-webhook"]
    assert "--leader-elect" in certctl["args"]  # two replicas
    assert certctl["startupProbe"]["httpGet"]["path"] == "/readyz?exclude=serving"
    assert certctl["readinessProbe"]["httpGet"]["path"] == "/readyz?exclude=callable&exclude=injected"
    # The server: the folder read-only, its own readinessProbe, the user certctl writes as.
    assert server["volumeMounts"] == [{"name": "certctl-certs", "mountPath": "/tls",
                                       "readOnly": True}]
    assert server["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "https",
                                                   "scheme": "HTTPS"}
    assert pod["securityContext"]["runAsUser"] == certctl["securityContext"]["runAsUser"]
    assert "runAsUser" not in server["securityContext"]
    # The token for certctl alone, from the dependency's ServiceAccount.
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    assert {v["name"] for v in pod["volumes"]} == {"certctl-certs", "certctl-token"}
    # certctl's RBAC names the example's webhook configuration and nothing else of its kind.
    cluster_role = one(objects, "ClusterRole")
    vwc_rules = [r for r in cluster_role["rules"]
                 if "validatingwebhookconfigurations" in r["resources"]]
    assert vwc_rules and all(r["resourceNames"] == ["my-webhook"] for r in vwc_rules)
    vwc = one(objects, "ValidatingWebhookConfiguration")
    assert vwc["webhooks"][0]["clientConfig"]["service"] == {
        "name": "my-webhook", "namespace": NS, "path": "/validate", "port": 443}
    assert "caBundle" not in vwc["webhooks"][0]["clientConfig"]


@pytest.mark.backends("real")
def test_the_example_installs_upgrades_and_its_pod_is_ready_only_while_it_serves(
        cluster, certctl_binary, tmp_path, chart):
    cluster.kubectl("create", "namespace", NS)
    kubeconfig = cluster.kubeconfig()
    # No --wait: the emulator stores Deployments but runs no pods.
    run(tmp_path, "install", RELEASE, chart, "--namespace", NS, kubeconfig=kubeconfig)
    run(tmp_path, "upgrade", RELEASE, chart, "--namespace", NS, "--set", "replicas=3",
        "--set", "certctl.sidecar.replicas=3", kubeconfig=kubeconfig)
    deployment = json.loads(cluster.kubectl("get", "deployment", RELEASE, "-n", NS, "-o",
                                            "json").stdout)
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]

    health, metrics, https = free_ports(3)
    cert_dir = tmp_path / "pod" / "tls"
    cluster.reset_request_log()
    certctl = pod_container(
        cluster, pod, "certctl", NS, {"certctl": certctl_binary}, str(tmp_path / "pod"),
        pod_name="my-webhook-6b7d9-abcde",
        args=lambda args: rewrite_flags(args, {
            "--cert-dir": str(cert_dir), "--health-addr": f"127.0.0.1:{health}",
            "--metrics-addr": f"127.0.0.1:{metrics}",
            "--serving-addr": f"127.0.0.1:{https}"}))
    server = pod_container(
        cluster, pod, "server", NS, {"my-webhook": WEBHOOK_SERVER}, str(tmp_path / "server"),
        pod_name="my-webhook-6b7d9-abcde",
        args=lambda args: rewrite_flags(args, {"--cert-dir": str(cert_dir),
                                               "--listen": f"127.0.0.1:{https}"}))
    assert certctl.user == USER
    readiness = pod["initContainers"][0]["readinessProbe"]["httpGet"]["path"]
    startup = pod["initContainers"][0]["startupProbe"]["httpGet"]["path"]
    with certctl:
        wait_for(lambda: certctl.get(startup, health)[0] == 200,
                 f"certctl's startupProbe\n{certctl.log()[-3000:]}")
        status, body = certctl.get(readiness, health)
        assert status == 503 and "serving" in body, body
        with server:
            wait_for(lambda: certctl.get(readiness, health)[0] == 200,
                     f"readiness once the server serves\n{certctl.log()[-3000:]}\n"
                     f"{server.log()[-2000:]}")
        wait_for(lambda: certctl.get(readiness, health)[0] == 503,
                 "readiness once the server stopped")

    secret = json.loads(cluster.kubectl("get", "secret", "webhook-server-cert", "-n", NS,
                                        "-o", "json").stdout)
    ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
    vwc = json.loads(cluster.kubectl("get", "validatingwebhookconfiguration", "my-webhook",
                                     "-o", "json").stdout)
    assert base64.b64decode(vwc["webhooks"][0]["clientConfig"]["caBundle"]).decode() == ca
    refused = [e for e in cluster.request_log()["requests"]
               if e["user"] == USER and e["code"] == 403]
    assert refused == []
