"""The chart on a real node, with the example webhook (examples/webhook/deploy/, the files the
docs give a new user), kube-apiserver making every admission call:

- mode sidecar: `helm install`, the pod 2/2 Ready, the webhook container started once
  certctl's startupProbe had passed (so it found its certificate at its first start and
  never restarted), an object allowed and one refused with the webhook's message, no
  request of certctl refused, `helm test` run as a pod;
- the pods' lifecycle with a dry-run ConfigMap create every 50 ms: a new webhook tag rolled
  out by `helm upgrade`, `kubectl rollout restart`, scaling 1 -> 3 (leader election), the
  certctl container killed (the kubelet restarts it), a pod deleted (the webhook's preStop
  pause), `certctl rotate --ca` through `kubectl exec`, back to 1, and the Service renamed
  through `helm upgrade` — no call fails;
- the audit CronJob run as a Job: it passes, then fails on a configuration without a
  caBundle and names it;
- `helm uninstall`: the release's objects gone, the Secret and the caBundle left;
- mode job: the hooks run as Jobs, the webhook's own Deployment mounts the Secret, and the
  time from `helm install` to the first admitted call is measured (docs/try-the-chart.md);
- mode controller: the same Deployment, Service and configuration (and a mutating copy of it)
  served by annotations alone, with no request of the controller refused, then a CA rotation
  of the Secret it issued reaching both configurations with calls flowing, none failing.

The tests share one node and run in order; each leaves the release as the next expects.
"""

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import time

import pytest
import yaml

from harness.api_server import RealAdmissionProbe, dry_run_admission
from harness.helm import REPO, find_helm, helm_env
from harness.node import NodeCluster, node_problem

pytestmark = pytest.mark.skipif(node_problem() is not None, reason=str(node_problem()))

NS = "example"
CHECKED = "checked"  # a namespace the example webhook judges
RELEASE = "example-webhook"
VWC = "example-webhook"
VWC_PATH = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{VWC}"
MWC_PATH = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{VWC}"
SECRET = "webhook-server-cert"
CHART = os.path.join(REPO, "manifests", "helm", "certctl")
DEPLOY = os.path.join(REPO, "examples", "webhook", "deploy")
WEBHOOK_PODS = "app.kubernetes.io/component=webhook"
ACCOUNT = f"system:serviceaccount:{NS}:{RELEASE}-certctl"  # the chart's ServiceAccount


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    # A Secret volume follows its Secret at the kubelet's next sync of the pod: 15 s instead
    # of the kubelet's 1 min bounds how long the rotation test waits for the new leaf.
    with NodeCluster(tmp_path_factory.mktemp("node") / "k", kubelet_sync="15s") as started:
        started.kubectl("create", "namespace", CHECKED)
        started.kubectl("label", "namespace", CHECKED, "example.certctl.io/checked=true")
        yield started


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory):
    return tmp_path_factory.mktemp("helm")


def helm(node, home, *args, timeout=300):
    proc = subprocess.run([find_helm(), *args], capture_output=True, text=True,
                          env=helm_env(home, node.kubeconfig()), timeout=timeout)
    assert proc.returncode == 0, f"helm {' '.join(args)}: {proc.stderr}"
    return proc


def upgrade(node, home, *settings):
    """`helm upgrade` of the sidecar release with the example's values and `settings`, waiting
    for the rollout as a user's upgrade does."""
    args = ["upgrade", RELEASE, CHART, "-n", NS, "--reuse-values", "--wait", "--timeout", "180s"]
    for setting in settings:
        args += ["--set", setting]
    return helm(node, home, *args)


def first_admitted(node, began, bound=180.0):
    """Seconds from `began` (monotonic) to the first dry-run create the API server admitted,
    polled every 50 ms."""
    while time.monotonic() - began < bound:
        try:
            status, _ = dry_run_admission(node, CHECKED, "first", timeout=10)
        except OSError:
            status = None
        if status == 201:
            return time.monotonic() - began
        time.sleep(0.05)
    raise AssertionError(f"no admitted call within {bound:.0f} s")


def webhook_pods(node):
    return [p for p in node.get("pods", "-n", NS, "-l", WEBHOOK_PODS)["items"]
            if not p["metadata"].get("deletionTimestamp")]


def container_statuses(pod):
    status = pod["status"]
    return {s["name"]: s for s in status.get("containerStatuses", [])
            + status.get("initContainerStatuses", [])}


def webhook_logs(node):
    """The webhook containers' logs, pod by pod. A pod that goes between the listing and its
    read (a scale-down, a rollout) or whose container has not started is left out: `kubectl
    logs -l` fails on the first such pod (a CI run lost the test to one)."""
    logs = []
    for pod in node.get("pods", "-n", NS, "-l", WEBHOOK_PODS)["items"]:
        proc = node.kubectl("logs", "-n", NS, pod["metadata"]["name"], "-c", "webhook",
                            "--tail=-1", "--prefix", check=False)
        if proc.returncode == 0:
            logs.append(proc.stdout)
        elif "NotFound" not in proc.stderr and "waiting to start" not in proc.stderr:
            raise AssertionError(f"kubectl logs {pod['metadata']['name']} failed:\n{proc.stderr}")
    return "".join(logs)


def wait_for(what, predicate, bound=120.0, every=0.2):
    deadline = time.monotonic() + bound
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {bound:.0f} s: {what}")
        time.sleep(every)


@pytest.fixture(scope="module")
def sidecar(node, helm_home):
    """The example installed in mode sidecar; returns the seconds from `helm install` to the
    first admitted call."""
    node.kubectl("apply", "-f", os.path.join(DEPLOY, "webhook-configuration.yaml"))
    began = time.monotonic()
    install = subprocess.Popen(
        [find_helm(), "install", RELEASE, CHART, "-n", NS, "--create-namespace", "-f",
         os.path.join(DEPLOY, "values.yaml"), "--wait", "--timeout", "180s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=helm_env(helm_home, node.kubeconfig()))
    seconds = first_admitted(node, began)
    _, stderr = install.communicate(timeout=200)
    assert install.returncode == 0, f"helm install: {stderr}"
    return seconds


@pytest.mark.time_limit(900)
def test_sidecar_mode_admits_and_denies_through_the_pod(node, sidecar, helm_home):
    (pod,) = webhook_pods(node)
    statuses = container_statuses(pod)
    assert all(s["ready"] for s in statuses.values()), statuses
    # The webhook reads its certificate once at its start and fails without it: started
    # once, never restarted, means it started after certctl had written the files.
    assert statuses["webhook"]["restartCount"] == 0, statuses["webhook"]
    assert statuses["certctl"]["started"], statuses["certctl"]
    assert (statuses["webhook"]["state"]["running"]["startedAt"]
            >= statuses["certctl"]["state"]["running"]["startedAt"]), statuses
    print(f"sidecar mode: helm install to the first admitted call {sidecar:.1f} s")

    allowed = node.kubectl("create", "configmap", "allowed", "-n", CHECKED, check=False)
    assert allowed.returncode == 0, allowed.stderr
    denied = node.kubectl("apply", "-n", CHECKED, "-f", "-", check=False, input=(
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "denied", '
        '"labels": {"example.certctl.io/deny": "true"}}}'))
    assert denied.returncode != 0
    assert ('admission webhook "configmaps.example.certctl.io" denied the request: denied by '
            'the example webhook') in denied.stderr, denied.stderr

    logs = webhook_logs(node)
    called = f"(called as {RELEASE}.{NS}.svc)"
    assert f"CREATE ConfigMap {CHECKED}/allowed: allowed {called}" in logs, logs
    assert f"CREATE ConfigMap {CHECKED}/denied: denied {called}" in logs, logs

    # Mode sidecar has no hooks: no Job ran. Every request of certctl's ServiceAccount in the
    # sidecar was allowed by the RBAC the release created.
    assert node.get("jobs", "-n", NS)["items"] == []
    assert refused_requests(node) == []

    # The test pod is deleted once it succeeded (its hook-delete-policy): helm reports it.
    tested = helm(node, helm_home, "test", RELEASE, "-n", NS)
    assert "Phase:          Succeeded" in tested.stdout, tested.stdout
    # Its `certctl check` runs as the same ServiceAccount, which may not read Services
    # unless failurePolicyOnceReady is on (least privilege): the one request refused, which
    # check reports as a note, not a failure.
    assert refused_requests(node) == [("get", "services", RELEASE)]


def refused_requests(node):
    """(verb, resource, name) of the requests of certctl's ServiceAccount the API server
    refused (403)."""
    return [(r["verb"], r["resource"], r["name"]) for r in node.request_log()["requests"]
            if r["user"] == ACCOUNT and r["code"] == 403]


def served_certificate(address, port=9443):
    """The certificate (DER) a pod serves, fetched without verifying it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((address, port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname=f"{RELEASE}.{NS}.svc") as tls:
            return tls.getpeercert(binary_form=True)


def secret_leaf(node):
    data = node.get("secret", "-n", NS, SECRET)["data"]
    return ssl.PEM_cert_to_DER_cert(base64.b64decode(data["tls.crt"]).decode())


@pytest.mark.time_limit(900)
def test_no_call_fails_through_the_pods_lifecycle(node, sidecar, helm_home):
    steps = []  # (what, began, ended)

    def step(what, action):
        began = time.monotonic()
        action()
        steps.append((what, began, time.monotonic()))

    def new_tag():
        node.ctr("images", "tag", "localhost/example-webhook:dev", "localhost/example-webhook:v2")
        upgrade(node, helm_home, "sidecar.webhook.image.tag=v2")
        images = {c["image"] for p in webhook_pods(node) for c in p["spec"]["containers"]}
        assert images == {"localhost/example-webhook:v2"}, images

    def restart():
        node.kubectl("rollout", "restart", "-n", NS, f"deployment/{RELEASE}")
        node.kubectl("rollout", "status", "-n", NS, f"deployment/{RELEASE}", "--timeout=180s",
                     timeout=200)

    def scale_to_3():
        upgrade(node, helm_home, "sidecar.replicas=3")
        assert len(webhook_pods(node)) == 3

    def kill_certctl():
        pod = webhook_pods(node)[0]
        name = pod["metadata"]["name"]
        os.kill(node.container_init_pid(NS, name, "certctl"), signal.SIGKILL)
        wait_for(f"{name}'s certctl restarted and ready", lambda: (
            (s := container_statuses(node.get("pod", "-n", NS, name))["certctl"])
            ["restartCount"] == 1 and s["ready"]))

    def delete_pod():
        name = webhook_pods(node)[0]["metadata"]["name"]
        node.kubectl("delete", "pod", "-n", NS, name, "--wait=true", timeout=120)
        node.kubectl("rollout", "status", "-n", NS, f"deployment/{RELEASE}", "--timeout=180s",
                     timeout=200)

    def rotate_ca():
        before = node.get("secret", "-n", NS, SECRET)["data"]["ca.crt"]
        node.kubectl("exec", "-n", NS, f"deployment/{RELEASE}", "-c", "certctl", "--",
                     "certctl", "rotate", "-n", NS, "--secret", SECRET, "--ca", "--wait",
                     timeout=180)
        secret = node.get("secret", "-n", NS, SECRET)
        assert secret["metadata"]["annotations"]["certctl.io/rotation-phase"] == "overlapping"
        assert secret["data"]["ca.crt"] != before
        leaf = secret_leaf(node)
        # Every pod serves the new leaf: each folder followed the Secret.
        for pod in webhook_pods(node):
            wait_for(f"{pod['metadata']['name']} serving the new leaf",
                     lambda address=pod["status"]["podIP"]: served_certificate(address) == leaf,
                     bound=60)

    def scale_to_1():
        upgrade(node, helm_home, "sidecar.replicas=1")
        wait_for("one webhook pod", lambda: len(webhook_pods(node)) == 1)

    def rename():
        renamed = f"{RELEASE}-v2"
        upgrade(node, helm_home, f"webhook.service={renamed}")
        node.kubectl("patch", "validatingwebhookconfiguration", VWC, "--type=json", "-p",
                     json.dumps([{"op": "replace", "value": renamed,
                                  "path": "/webhooks/0/clientConfig/service/name"}]))
        # The API server calls the new name once its cache holds the patched configuration.
        wait_for("a call to the new name", lambda: (
            f"(called as {renamed}.{NS}.svc)" in webhook_logs(node)))
        upgrade(node, helm_home)  # no target calls the old Service now: it goes
        services = {s["metadata"]["name"] for s in node.get("services", "-n", NS)["items"]}
        assert RELEASE not in services and renamed in services, services

    probe = RealAdmissionProbe(node, [VWC_PATH], lambda: [], CHECKED, interval=0.05)
    with probe:
        for what, action in (("helm upgrade to a new webhook tag", new_tag),
                             ("kubectl rollout restart", restart),
                             ("scale 1 -> 3", scale_to_3),
                             ("the certctl container killed", kill_certctl),
                             ("a pod deleted", delete_pod),
                             ("certctl rotate --ca through kubectl exec", rotate_ca),
                             ("scale 3 -> 1", scale_to_1),
                             ("the Service renamed through helm upgrade", rename)):
            step(what, action)
        probe.wait_rounds(5)

    def during(at):
        return next((what for what, began, ended in steps if began <= at <= ended), "between")

    failures = [f"{during(at)}: {status} {message[:200]}"
                for at, _, status, _, message in probe.failures]
    timings = ", ".join(f"{what} {ended - began:.1f} s" for what, began, ended in steps)
    assert not failures and not probe.read_errors, (
        f"{len(failures)} of {probe.calls + len(failures)} calls failed:\n"
        + "\n".join(failures[:30]) + f"\nread errors: {probe.read_errors[:5]}\n{timings}")
    assert probe.calls > 200, probe.report()
    print(f"{probe.calls} calls, none failed; {timings}")


def audit_report(logs):
    """The report in an audit pod's log: its JSON document among certctl's log lines (the
    pod's log holds both of its streams)."""
    decoder = json.JSONDecoder()
    for at in (i for i, c in enumerate(logs) if c == "{" and (i == 0 or logs[i - 1] == "\n")):
        try:
            document, _ = decoder.raw_decode(logs, at)
        except ValueError:
            continue
        if isinstance(document, dict) and "objects" in document:
            return document
    raise AssertionError(f"no audit report in the pod's log:\n{logs[-3000:]}")


@pytest.mark.time_limit(600)
def test_the_audit_cronjob_reports_from_a_pod(node, sidecar, helm_home):
    upgrade(node, helm_home, "audit.enabled=true")
    (cronjob,) = node.get("cronjobs", "-n", NS)["items"]
    name = cronjob["metadata"]["name"]

    def audit(job):
        node.kubectl("create", "job", "-n", NS, job, f"--from=cronjob/{name}")
        wait_for(f"job {job} finished", lambda: any(
            c["type"] in ("Complete", "Failed") and c["status"] == "True"
            for c in node.get("job", "-n", NS, job)["status"].get("conditions", [])))
        conditions = {c["type"] for c in node.get("job", "-n", NS, job)["status"]["conditions"]
                      if c["status"] == "True"}
        return conditions, audit_report(node.kubectl("logs", "-n", NS, f"job/{job}").stdout)

    conditions, report = audit("audit-healthy")
    assert "Complete" in conditions, (conditions, report)
    assert report["ok"] is True and not report["findings"], report
    (entry,) = [o for o in report["objects"] if o["name"] == VWC]
    assert entry["calls"].endswith(f".{NS}.svc") and not entry["findings"], entry

    # A configuration nobody injected: the Job fails, and its report names it.
    node.apply({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "not-injected"},
                "webhooks": [{"name": "nothing.example.certctl.io",
                              "clientConfig": {"service": {"name": "absent", "namespace": NS,
                                                           "path": "/validate"}},
                              "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                         "operations": ["CREATE"], "resources": ["configmaps"]}],
                              "objectSelector": {"matchLabels": {"never": "matched"}},
                              "failurePolicy": "Ignore", "sideEffects": "None",
                              "admissionReviewVersions": ["v1"]}]})
    try:
        conditions, report = audit("audit-broken")
    finally:
        node.kubectl("delete", "validatingwebhookconfiguration", "not-injected")
    assert "Failed" in conditions, (conditions, report)
    codes = {(f["object"], f["code"]) for f in report["findings"]}
    assert ("validatingwebhookconfiguration/not-injected", "ca-bundle-missing") in codes, report


@pytest.mark.time_limit(300)
def test_uninstall_leaves_the_secret_and_the_ca_bundle(node, sidecar, helm_home):
    """`helm uninstall` of the sidecar release removes the release's objects and leaves what
    keeps the webhook callable once it is reinstalled: the Secret and the caBundle."""
    helm(node, helm_home, "uninstall", RELEASE, "-n", NS, "--wait")
    for kind in ("deployment", "service", "serviceaccount", "role", "rolebinding"):
        left = node.kubectl("get", kind, "-n", NS, "-o", "name").stdout.split()
        # The namespace's own ServiceAccount, which kube-controller-manager made.
        assert [name for name in left if name != "serviceaccount/default"] == [], kind
    assert RELEASE not in node.kubectl("get", "clusterrole,clusterrolebinding", "-o",
                                       "name").stdout
    node.kubectl("get", "secret", SECRET, "-n", NS)
    assert node.api("GET", VWC_PATH).json()["webhooks"][0]["clientConfig"]["caBundle"]


def start_afresh(node, home):
    """The example's release, namespace and configuration gone, for the next mode."""
    subprocess.run([find_helm(), "uninstall", RELEASE, "-n", NS, "--wait", "--ignore-not-found"],
                   capture_output=True, text=True, env=helm_env(home, node.kubeconfig()),
                   timeout=300, check=True)
    node.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", timeout=180)
    node.kubectl("delete", "validatingwebhookconfiguration", VWC, "--ignore-not-found")


@pytest.mark.time_limit(900)
def test_job_mode_hooks_run_as_jobs(node, helm_home):
    """It removes the sidecar release and installs the example in mode job."""
    start_afresh(node, helm_home)
    node.kubectl("apply", "-f", os.path.join(DEPLOY, "webhook-configuration.yaml"))
    node.kubectl("apply", "-f", os.path.join(DEPLOY, "webhook-deployment.yaml"))
    node.reset_request_log()

    began = time.monotonic()
    install = subprocess.Popen(
        [find_helm(), "install", RELEASE, CHART, "-n", NS, "-f",
         os.path.join(DEPLOY, "job-values.yaml"), "--wait", "--timeout", "300s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=helm_env(helm_home, node.kubeconfig()))
    seconds = first_admitted(node, began, bound=300)
    _, stderr = install.communicate(timeout=320)
    assert install.returncode == 0, f"helm install: {stderr}"
    print(f"job mode: helm install to the first admitted call {seconds:.1f} s")

    # The hook Jobs' pods wrote the Secret and the caBundle with certctl's ServiceAccount.
    writes = {(r["user"], r["verb"], r["resource"]) for r in node.request_log()["requests"]
              if r["code"] < 300 and r["resource"] in ("secrets",
                                                       "validatingwebhookconfigurations")
              and r["verb"] in ("create", "update", "patch")}
    account = f"system:serviceaccount:{NS}:{RELEASE}-certctl"
    assert (account, "create", "secrets") in writes, writes
    assert any(user == account and resource == "validatingwebhookconfigurations"
               for user, _, resource in writes), writes
    assert_own_deployment_serves(node, "denied-job")


def assert_own_deployment_serves(node, denied_name):
    """The webhook's own Deployment (webhook-deployment.yaml) started once, never restarted,
    and denies what it should through the API server."""
    (pod,) = webhook_pods_of_job_mode(node)
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, pod["status"]
    denied = node.kubectl("apply", "-n", CHECKED, "-f", "-", check=False, input=json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": denied_name, "labels": {"example.certctl.io/deny": "true"}}}))
    assert "denied by the example webhook" in denied.stderr, denied.stderr


def webhook_pods_of_job_mode(node):
    return node.get("pods", "-n", NS, "-l", "app.kubernetes.io/name=example-webhook")["items"]


CONTROLLER_NS = "certctl-system"
CONTROLLER_ACCOUNT = f"system:serviceaccount:{CONTROLLER_NS}:certctl"


@pytest.mark.time_limit(900)
def test_controller_mode_serves_the_example_by_annotations_alone(node, helm_home):
    """Last: it removes the job release and installs the chart in mode controller beside the
    example's own Deployment, Service and configuration, which then ask by annotations
    alone; a CA rotation of the issued Secret follows with calls flowing."""
    start_afresh(node, helm_home)
    node.kubectl("apply", "-f", os.path.join(DEPLOY, "webhook-deployment.yaml"),
                 "-f", os.path.join(DEPLOY, "webhook-configuration.yaml"))
    helm(node, helm_home, "install", "certctl", CHART, "-n", CONTROLLER_NS, "--create-namespace",
         "-f", os.path.join(DEPLOY, "controller-values.yaml"), "--wait", "--timeout", "180s")
    pods = node.get("pods", "-n", CONTROLLER_NS, "-l", "app.kubernetes.io/component=controller")
    assert len(pods["items"]) == 2 and all(
        s["ready"] for p in pods["items"] for s in p["status"]["containerStatuses"]), pods
    # The same webhook also called as a mutating one: one Secret, two configurations.
    with open(os.path.join(DEPLOY, "webhook-configuration.yaml"), encoding="utf-8") as f:
        mutating = yaml.safe_load(f)
    mutating["kind"] = "MutatingWebhookConfiguration"
    node.apply(mutating)
    node.reset_request_log()

    began = time.monotonic()
    node.kubectl("annotate", "service", "-n", NS, RELEASE,
                 f"certctl.io/serving-cert-secret={SECRET}")
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        node.kubectl("annotate", kind, VWC, f"certctl.io/inject-ca-from={NS}/{SECRET}")
    seconds = first_admitted(node, began, bound=300)
    print(f"controller mode: annotations to the first admitted call {seconds:.1f} s")

    secret = node.get("secret", "-n", NS, SECRET)
    assert secret["metadata"]["labels"]["certctl.io/serving-cert-for"] == RELEASE, secret
    assert_own_deployment_serves(node, "denied-controller")
    # The chart's RBAC allowed every request the controller's pods made.
    requests = [r for r in node.request_log()["requests"] if r["user"] == CONTROLLER_ACCOUNT]
    assert requests and [r for r in requests if r["code"] == 403] == [], requests[-5:]

    # A CA rotation with admission calls flowing: the controller puts the new CA into both
    # configurations before the leaf moves, and the pod's Secret volume follows.
    before = secret["data"]["ca.crt"]
    probe = RealAdmissionProbe(node, [VWC_PATH, MWC_PATH], lambda: [], CHECKED, interval=0.05)
    with probe:
        node.kubectl("exec", "-n", CONTROLLER_NS, "deployment/certctl", "--", "certctl",
                     "rotate", "-n", NS, "--secret", SECRET, "--ca", "--wait", timeout=180)
        rotated = node.get("secret", "-n", NS, SECRET)
        assert rotated["data"]["ca.crt"] != before
        leaf = secret_leaf(node)
        wait_for("the webhook serving the new leaf", lambda: served_certificate(
            webhook_pods_of_job_mode(node)[0]["status"]["podIP"]) == leaf, bound=120)
        probe.wait_rounds(5)
    node.kubectl("delete", "mutatingwebhookconfiguration", VWC)
    assert not probe.failures and not probe.read_errors, (probe.failures[:5],
                                                          probe.read_errors[:5])
    assert probe.calls > 20, probe.report()
    print(f"CA rotation under the controller: {probe.calls} calls, none failed")
