"""scripts/kube-up.sh --node: a node that runs pods for real — Ready, a Deployment whose pod
mounts a Secret and passes an HTTPS readiness probe, `kubectl logs` and `kubectl exec` into
it, a Job run to completion — a second node refused in one line while it runs, and after
`--down` nothing left on the host: every process, mount, network namespace, link, route,
iptables rule, cgroup, default path and kernel setting as it was before the start."""

import subprocess

import pytest

from harness.node import KUBE_UP, NodeCluster, host_state, node_problem

pytestmark = pytest.mark.skipif(node_problem() is not None, reason=str(node_problem()))

NS = "bed"


def example_webhook(secret):
    """The example webhook as a Deployment serving the certificate in `secret`."""
    labels = {"app": "example-webhook"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "example-webhook", "namespace": NS},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{
                    "name": "webhook", "image": "localhost/example-webhook:dev",
                    "imagePullPolicy": "Never",
                    "args": ["--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key"],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 9443,
                                                   "scheme": "HTTPS"}, "periodSeconds": 1},
                    "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}],
                }],
                "volumes": [{"name": "tls", "secret": {"secretName": secret}}],
            }},
        },
    }


def certctl_version_job():
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "version", "namespace": NS},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "certctl", "image": "localhost/certctl:dev",
                            "imagePullPolicy": "Never", "args": ["version"]}],
        }}},
    }


def differences(before, after):
    return {key: {"gone": sorted(set(before[key]) - set(after[key])),
                  "new": sorted(set(after[key]) - set(before[key]))}
            for key in before if before[key] != after[key]}


@pytest.mark.time_limit(900)
def test_a_node_runs_pods_and_leaves_nothing_behind(tmp_path, certctl_binary):
    folder = tmp_path / "k"
    before = host_state(folder)
    with NodeCluster(folder) as node:
        (ready,) = [c for c in node.get("node", "certctl-node")["status"]["conditions"]
                    if c["type"] == "Ready"]
        assert ready["status"] == "True", ready
        info = node.get("node", "certctl-node")["status"]["nodeInfo"]
        assert info["kubeletVersion"].startswith("v1.37."), info
        assert info["containerRuntimeVersion"].startswith("containerd://1.6"), info

        # What the check below looks for is there while the node runs: it would see it left.
        running = host_state(folder)
        assert "certctl-node" in running["netns"] and running["cgroups"], running
        assert any(p.startswith("containerd:") for p in running["processes"]), running
        assert any(p.startswith("kube:") and "/kubelet " in p for p in running["processes"]), \
            running

        other = subprocess.run([KUBE_UP, "--node", str(tmp_path / "other")],
                               capture_output=True, text=True, timeout=120)
        assert other.returncode == 1
        assert other.stderr.strip().splitlines() == [
            f"kube-up: a node already runs on this machine (for {folder}); one node a "
            f"machine: stop it first: scripts/kube-up.sh --down {folder}"], other.stderr

        node.kubectl("create", "namespace", NS)
        secret = subprocess.run([certctl_binary, "generate", "--service", "example-webhook",
                                 "-n", NS, "--secret", "serving", "-o", "secret-json"],
                                capture_output=True, text=True, check=True).stdout
        node.kubectl("apply", "-n", NS, "-f", "-", input=secret)
        node.apply([example_webhook("serving"), certctl_version_job()])
        node.wait("-n", NS, "deployment/example-webhook", "--for=condition=Available")
        node.wait("-n", NS, "job/version", "--for=condition=Complete")

        version = node.kubectl("logs", "-n", NS, "job/version").stdout
        assert version.startswith("certctl "), version
        logs = node.kubectl("logs", "-n", NS, "deployment/example-webhook").stdout
        assert "webhook: serving /validate on :9443 with /tls/tls.crt" in logs, logs
        # exec: the image has no shell; the webhook's own executable answers --help.
        executed = node.kubectl("exec", "-n", NS, "deployment/example-webhook", "--",
                                "/webhook", "--help", check=False)
        assert "-tls-cert-file" in executed.stderr, executed

        # The --node start stays the one running.
        assert node.get("node", "certctl-node")["metadata"]["name"] == "certctl-node"

    after = host_state(folder)
    assert after == before, differences(before, after)
    again = subprocess.run([KUBE_UP, "--down", str(folder)], capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0 and again.stderr == "", again.stderr
