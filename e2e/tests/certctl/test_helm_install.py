"""The chart for real: `helm install` and `helm upgrade` of manifests/helm/certctl in mode
job against the emulator and the real API server. The harness runs the hook Jobs with the
certctl binary, as the Jobs' service account with exactly the chart's RBAC, so every request
certctl makes is judged by that RBAC. Mode sidecar, `helm test` and `helm uninstall` run on a
real node: e2e/tests/node/test_chart_on_node.py."""

import base64
import json
import os
import re
import shlex
import shutil
import subprocess

import pytest

from harness.certctl import api_service, crd, service_with_endpoints, webhook_configuration
from harness.helm import REPO, find_helm, helm_env

NS = "infra"
RELEASE = "rel"
SERVICE_ACCOUNT = f"system:serviceaccount:{NS}:{RELEASE}-certctl"
CHART = os.path.join(REPO, "manifests", "helm", "certctl")
VALUES = {
    "mode": "job",
    "image": {"repository": "registry.example/certctl", "tag": "test"},
    "webhook": {"service": "hook"},
    "targets": {"validatingWebhooks": ["hook"], "mutatingWebhooks": ["hook"],
                "crds": ["widgets.hook.io"], "apiServices": ["v1.metrics.hook.io"]},
    "job": {"waitForTargets": "30s"},
}


def helm(cluster, tmp_path, *args, values_doc=None, check=True):
    values = tmp_path / "values.json"
    values.write_text(json.dumps(values_doc or VALUES))  # JSON is YAML
    proc = subprocess.run([find_helm(), *args, "--namespace", NS, "-f", str(values)],
                          capture_output=True, text=True, timeout=150,
                          env=helm_env(tmp_path / "helm-home", cluster.kubeconfig()))
    if check:
        assert proc.returncode == 0, f"helm {args[0]} failed:\n{proc.stdout}{proc.stderr}"
    return proc


def bundles(cluster):
    out = []
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        obj = json.loads(cluster.kubectl("get", kind, "hook", "-o", "json").stdout)
        out += [w["clientConfig"].get("caBundle", "") for w in obj["webhooks"]]
    obj = json.loads(cluster.kubectl("get", "crd", "widgets.hook.io", "-o", "json").stdout)
    out.append(obj["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle", ""))
    obj = json.loads(cluster.kubectl("get", "apiservice", "v1.metrics.hook.io", "-o",
                                     "json").stdout)
    out.append(obj["spec"].get("caBundle", ""))
    return [base64.b64decode(b).decode() for b in out]


@pytest.mark.backends("real")
def test_without_an_image_helm_install_stops_naming_what_to_set(cluster, tmp_path):
    """No public image of certctl exists: the chart of a clone installs nothing until
    image.repository names one, in either mode, and its one line says how to get one."""
    cluster.kubectl("create", "namespace", NS)
    sidecar = {"mode": "sidecar", "sidecar": {"webhook": {"image": {"repository": "hook"}}}}
    for mode_values in ({}, sidecar):
        values = {**{k: v for k, v in VALUES.items() if k != "image"}, **mode_values}
        proc = helm(cluster, tmp_path, "install", RELEASE, CHART, values_doc=values,
                    check=False)
        assert proc.returncode == 1, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        for words in ("certctl: image.repository is required", "no public certctl image",
                      "scripts/release.sh", "scripts/publish.sh",
                      "--set image.repository=REGISTRY/certctl,image.tag=VERSION",
                      "docs/try-the-chart.md"):
            assert words in lines[0], lines[0]
    # Nothing was created: no release, no object of the chart's.
    listed = helm(cluster, tmp_path, "list", "-o", "json", values_doc=VALUES)
    assert json.loads(listed.stdout) == []
    names = cluster.kubectl("get", "serviceaccounts,roles,rolebindings,jobs,deployments",
                            "-n", NS, "-o", "name").stdout.split()
    assert [n for n in names if n != "serviceaccount/default"] == [], names


@pytest.mark.backends("real")
def test_helm_install_then_upgrade(cluster, kubelet, tmp_path):
    cluster.kubectl("create", "namespace", NS)
    for obj in (webhook_configuration("ValidatingWebhookConfiguration", "hook",
                                      ["a.hook.io", "b.hook.io", "c.hook.io"]),
                webhook_configuration("MutatingWebhookConfiguration", "hook", ["m.hook.io"]),
                crd("widgets.hook.io"), api_service("metrics.hook.io")):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))

    helm(cluster, tmp_path, "install", RELEASE, CHART, "--wait", "--timeout", "120s")
    secret_job = kubelet.wait_for(f"{RELEASE}-certctl-secret")
    inject_job = kubelet.wait_for(f"{RELEASE}-certctl-inject")
    assert secret_job.succeeded and inject_job.succeeded, (secret_job.runs, inject_job.runs)
    assert [r.user for r in secret_job.runs + inject_job.runs] == [SERVICE_ACCOUNT] * 2
    assert "created secret/infra/webhook-server-cert" in secret_job.runs[0].stderr
    assert "injected the CA bundle into 6 of 6" in inject_job.runs[0].stderr

    secret = json.loads(cluster.kubectl("get", "secret", "webhook-server-cert", "-n", NS,
                                        "-o", "json").stdout)
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "certctl"
    ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
    assert set(bundles(cluster)) == {ca}
    # The chart's RBAC was enough: certctl was never refused.
    refused = [e for e in cluster.request_log()["requests"]
               if e["user"] == SERVICE_ACCOUNT and e["code"] == 403]
    assert refused == []
    status = subprocess.run([find_helm(), "status", RELEASE, "-n", NS, "-o", "json"],
                            capture_output=True, text=True,
                            env=helm_env(tmp_path / "helm-home", cluster.kubeconfig()))
    assert json.loads(status.stdout)["info"]["status"] == "deployed"
    # hook-succeeded: Jobs and their RBAC are gone once the release is deployed.
    jobs = json.loads(cluster.kubectl("get", "jobs", "-n", NS, "-o", "json").stdout)["items"]
    assert jobs == []

    # Upgrade: the hooks run again and find nothing to do.
    cluster.reset_request_log()
    helm(cluster, tmp_path, "upgrade", RELEASE, CHART, "--wait", "--timeout", "120s")
    secret_job = kubelet.wait_for(f"{RELEASE}-certctl-secret", count=2)
    inject_job = kubelet.wait_for(f"{RELEASE}-certctl-inject", count=2)
    assert secret_job.succeeded and inject_job.succeeded
    assert "nothing to do" in secret_job.runs[-1].stderr
    assert "already hold the CA bundle" in inject_job.runs[-1].stderr
    writes = [e for e in cluster.request_log()["writes"] if e["user"] == SERVICE_ACCOUNT]
    assert writes == []
    assert set(bundles(cluster)) == {ca}


def failure_policies(cluster):
    return [w["failurePolicy"]
            for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration")
            for w in json.loads(cluster.kubectl("get", kind, "hook", "-o", "json").stdout)[
                "webhooks"]]


@pytest.mark.backends("real")
def test_helm_install_with_failure_policy_once_ready(cluster, kubelet, tmp_path):
    # The webhook's own manifests ship Ignore, so nothing deadlocks before the certificate.
    cluster.kubectl("create", "namespace", NS)
    for obj in (webhook_configuration("ValidatingWebhookConfiguration", "hook",
                                      ["a.hook.io", "b.hook.io", "c.hook.io"]),
                webhook_configuration("MutatingWebhookConfiguration", "hook", ["m.hook.io"]),
                crd("widgets.hook.io"), api_service("metrics.hook.io")):
        for webhook in obj.get("webhooks", []):
            webhook["failurePolicy"] = "Ignore"
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
    # The webhook's Service with a ready endpoint: Fail goes only where the API server can call.
    for obj in service_with_endpoints("hook", NS):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
    values = dict(VALUES, failurePolicyOnceReady="Fail")

    helm(cluster, tmp_path, "install", RELEASE, CHART, "--wait", "--timeout", "120s",
         values_doc=values)
    inject_job = kubelet.wait_for(f"{RELEASE}-certctl-inject")
    assert inject_job.succeeded, inject_job.runs
    assert "--failure-policy-once-ready" in inject_job.runs[0].argv
    assert "set failurePolicy Fail on 4 webhook entries" in inject_job.runs[0].stderr
    assert failure_policies(cluster) == ["Fail"] * 4
    refused = [e for e in cluster.request_log()["requests"]
               if e["user"] == SERVICE_ACCOUNT and e["code"] == 403]
    assert refused == []  # the chart's RBAC needed nothing more for it

    # The next run finds every entry at Fail and writes nothing.
    cluster.reset_request_log()
    helm(cluster, tmp_path, "upgrade", RELEASE, CHART, "--wait", "--timeout", "120s",
         values_doc=values)
    inject_job = kubelet.wait_for(f"{RELEASE}-certctl-inject", count=2)
    assert inject_job.succeeded
    assert "every webhook entry already has failurePolicy Fail" in inject_job.runs[-1].stderr
    writes = [e for e in cluster.request_log()["writes"] if e["user"] == SERVICE_ACCOUNT]
    assert writes == []
    assert failure_policies(cluster) == ["Fail"] * 4


def chart_release(tmp_path, name, digest, adds_the_pause=True):
    """A copy of the chart as a release publishes it (its image pinned by digest); without
    adds_the_pause, as a release before `sidecar.webhook.preStopSleepSeconds` was."""
    chart = tmp_path / name
    shutil.copytree(CHART, chart)
    values = (chart / "values.yaml").read_text()
    values, pinned = re.subn(r'(?m)^  digest: ""$', f'  digest: "{digest}"', values)
    values, named = re.subn(r'(?m)^  repository: ""$', "  repository: registry.example/certctl",
                            values)
    assert pinned == 1 and named == 1
    if not adds_the_pause:
        values, dropped = re.subn(r"(?m)^    preStopSleepSeconds: \d+\n", "", values)
        assert dropped == 1
    (chart / "values.yaml").write_text(values)
    return str(chart)


def documented_upgrade_flags():
    """The flags of docs/upgrade.md's `helm upgrade my-webhook <chart> -n my-system ...`, in
    its section "With Helm"."""
    with open(os.path.join(REPO, "docs", "upgrade.md"), encoding="utf-8") as f:
        section = f.read().split("\n## With Helm\n", 1)[1].split("\n## ", 1)[0]
    (flags,) = re.findall(r"(?m)^helm upgrade my-webhook <chart> -n my-system (.+)$", section)
    return shlex.split(flags)


def test_the_documented_upgrade_takes_the_new_charts_image_and_defaults(cluster, tmp_path):
    """docs/upgrade.md's command, from a release of the chart to the next: the user's values
    stay, the image is the one the new chart pins, and a value the new chart adds has its
    default. `--reuse-values`, which the docs warn of, keeps the old digest and drops the
    new default."""
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        webhook_configuration("ValidatingWebhookConfiguration", "hook", ["a.hook.io"])))
    old_digest, new_digest = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    old = chart_release(tmp_path, "old", old_digest, adds_the_pause=False)
    new = chart_release(tmp_path, "new", new_digest)
    values = {"webhook": {"service": "hook"}, "targets": {"validatingWebhooks": ["hook"]},
              "sidecar": {"replicas": 2,
                          "webhook": {"image": {"repository": "registry.example/hook",
                                                "tag": "1.0"}}}}
    (tmp_path / "mine.json").write_text(json.dumps(values))
    env = helm_env(tmp_path / "helm-home", cluster.kubeconfig())

    def run_helm(*args):
        proc = subprocess.run([find_helm(), *args, "--namespace", NS], capture_output=True,
                              text=True, timeout=60, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def deployed():
        spec = json.loads(cluster.kubectl("get", "deployment", "hook", "-n", NS, "-o",
                                          "json").stdout)["spec"]
        pod = spec["template"]["spec"]
        certctl = next(c for c in pod["initContainers"] if c["name"] == "certctl")
        webhook = next(c for c in pod["containers"] if c["name"] == "webhook")
        return spec["replicas"], certctl["image"], webhook.get("lifecycle")

    run_helm("install", RELEASE, old, "-f", str(tmp_path / "mine.json"))
    assert deployed() == (2, f"registry.example/certctl@{old_digest}", None)

    run_helm("upgrade", RELEASE, new, *documented_upgrade_flags())
    assert deployed() == (2, f"registry.example/certctl@{new_digest}",
                          {"preStop": {"sleep": {"seconds": 5}}})

    run_helm("rollback", RELEASE, "1")
    run_helm("upgrade", RELEASE, new, "--reuse-values")
    assert deployed() == (2, f"registry.example/certctl@{old_digest}", None)


@pytest.mark.backends("real")
def test_a_rename_keeps_the_deployment_and_the_service_a_target_calls(cluster, tmp_path):
    """`helm upgrade` with a new webhook.service: the Deployment keeps its name and its
    selector (which cannot change), so its pods roll instead of all going at once, and the
    old Service stays, selecting the same pods, while a target calls it. The upgrade after
    the last target moved removes it."""
    cluster.kubectl("create", "namespace", NS)
    kinds = ("validatingwebhookconfiguration", "mutatingwebhookconfiguration")
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(
            webhook_configuration(kind, "hook", ["a.hook.io"])))
    values = {"mode": "sidecar", "image": VALUES["image"], "webhook": {"service": "hook"},
              "targets": {"validatingWebhooks": ["hook"], "mutatingWebhooks": ["hook"]},
              "sidecar": {"webhook": {"image": {"repository": "registry.example/hook",
                                                "tag": "1.0"}}}}

    def objects(kind):
        items = json.loads(cluster.kubectl("get", kind, "-n", NS, "-o", "json").stdout)["items"]
        return {item["metadata"]["name"]: item for item in items}

    helm(cluster, tmp_path, "install", RELEASE, CHART, values_doc=values)
    (deployment,) = objects("deployments").values()
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert deployment["metadata"]["name"] == "hook"

    values["webhook"]["service"] = "renamed"
    upgrade = helm(cluster, tmp_path, "upgrade", RELEASE, CHART, values_doc=values)
    assert list(objects("deployments")) == ["hook"]
    (deployment,) = objects("deployments").values()
    assert deployment["spec"]["selector"]["matchLabels"] == selector
    args = next(c for c in deployment["spec"]["template"]["spec"]["initContainers"]
                if c["name"] == "certctl")["args"]
    assert args[args.index("--service") + 1] == "renamed"
    services = objects("services")
    assert sorted(services) == ["hook", "renamed"]
    assert all(s["spec"]["selector"] == selector for s in services.values())
    assert f"Service {NS}/hook is kept" in upgrade.stdout

    for kind in kinds:
        cluster.kubectl("patch", kind, "hook", "--type=json", "-p", json.dumps([
            {"op": "replace", "path": "/webhooks/0/clientConfig/service/name",
             "value": "renamed"}]))
        helm(cluster, tmp_path, "upgrade", RELEASE, CHART, values_doc=values)
        expected = ["renamed"] if kind == kinds[-1] else ["hook", "renamed"]
        assert sorted(objects("services")) == expected, f"after {kind} moved"
    assert list(objects("deployments")) == ["hook"]
