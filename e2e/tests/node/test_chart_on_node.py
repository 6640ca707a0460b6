"""The chart on a real node, mode sidecar: `helm install` of manifests/helm/certctl with the
example webhook (examples/webhook/deploy/, the files the docs give a new user) — the pod 2/2
Ready, the webhook container started once certctl's startupProbe had passed (so it found
its certificate at its first start and never restarted), and then kube-apiserver's own
admission calls reaching the pod: an object allowed, one refused with the webhook's
message. `helm test` runs its pod and passes."""

import os
import subprocess

import pytest

from harness.helm import REPO, find_helm, helm_env
from harness.node import NodeCluster, node_problem

pytestmark = pytest.mark.skipif(node_problem() is not None, reason=str(node_problem()))

NS = "example"
CHECKED = "checked"  # a namespace the example webhook judges
CHART = os.path.join(REPO, "manifests", "helm", "certctl")
DEPLOY = os.path.join(REPO, "examples", "webhook", "deploy")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with NodeCluster(tmp_path_factory.mktemp("node") / "k") as started:
        yield started


def helm(node, home, *args, timeout=300):
    proc = subprocess.run([find_helm(), *args], capture_output=True, text=True,
                          env=helm_env(home, node.kubeconfig), timeout=timeout)
    assert proc.returncode == 0, f"helm {' '.join(args)}: {proc.stderr}"
    return proc


@pytest.mark.time_limit(900)
def test_sidecar_mode_admits_and_denies_through_the_pod(node, tmp_path):
    node.kubectl("apply", "-f", os.path.join(DEPLOY, "webhook-configuration.yaml"))
    helm(node, tmp_path, "install", "example-webhook", CHART, "-n", NS, "--create-namespace",
         "-f", os.path.join(DEPLOY, "values.yaml"), "--wait", "--timeout", "180s")

    (pod,) = node.get("pods", "-n", NS, "-l", "app.kubernetes.io/component=webhook")["items"]
    statuses = {s["name"]: s for s in pod["status"]["containerStatuses"]
                + pod["status"]["initContainerStatuses"]}
    assert all(s["ready"] for s in statuses.values()), statuses
    # The webhook reads its certificate once at its start and fails without it: started
    # once, never restarted, means it started after certctl had written the files.
    assert statuses["webhook"]["restartCount"] == 0, statuses["webhook"]
    assert statuses["certctl"]["started"], statuses["certctl"]
    assert (statuses["webhook"]["state"]["running"]["startedAt"]
            >= statuses["certctl"]["state"]["running"]["startedAt"]), statuses

    node.kubectl("create", "namespace", CHECKED)
    node.kubectl("label", "namespace", CHECKED, "example.certctl.io/checked=true")
    allowed = node.kubectl("create", "configmap", "allowed", "-n", CHECKED, check=False)
    assert allowed.returncode == 0, allowed.stderr
    denied = node.kubectl("apply", "-n", CHECKED, "-f", "-", check=False, stdin=(
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "denied", '
        '"labels": {"example.certctl.io/deny": "true"}}}'))
    assert denied.returncode != 0
    assert ('admission webhook "configmaps.example.certctl.io" denied the request: denied by '
            'the example webhook') in denied.stderr, denied.stderr

    logs = node.kubectl("logs", "-n", NS, pod["metadata"]["name"], "-c", "webhook").stdout
    assert f"CREATE ConfigMap {CHECKED}/allowed: allowed" in logs, logs
    assert f"CREATE ConfigMap {CHECKED}/denied: denied" in logs, logs

    # The test pod is deleted once it succeeded (its hook-delete-policy): helm reports it.
    tested = helm(node, tmp_path, "test", "example-webhook", "-n", NS)
    assert "Phase:          Succeeded" in tested.stdout, tested.stdout
