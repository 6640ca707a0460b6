"""The harness's JobRunner (harness/kubelet.py): a fake "certctl image" (a Python script)
runs as each Job's pod with the Job's env and a token carrying exactly the Job's RBAC."""

import json
import os
import threading
import time

import pytest

from harness.kubelet import (JobRunner, expand, image_repository, service_account_rules,
                             translate_rule)

NS = "hooks"

# Stands in for certctl: prints one JSON line with its argv, its environment and the result
# of GETs made with the mounted service-account token, then sleeps/fails as told.
FAKE = r'''#!/usr/bin/python3 -S
import json, os, sys, time
args = sys.argv[1:]
opts = {"get": [], "exit": 0, "sleep": 0.0, "fail_times": 0, "child": False}
i = 0
while i < len(args):
    a = args[i]
    if a == "--get": opts["get"].append(args[i + 1]); i += 2
    elif a == "--exit": opts["exit"] = int(args[i + 1]); i += 2
    elif a == "--sleep": opts["sleep"] = float(args[i + 1]); i += 2
    elif a == "--fail-times": opts["fail_times"] = int(args[i + 1]); i += 2
    elif a == "--child": opts["child"] = True; i += 1
    else: i += 1
sa = os.environ["CERTCTL_SERVICEACCOUNT_DIR"]
token = open(os.path.join(sa, "token")).read()
gets = {}
if opts["get"]:
    import http.client, ssl
for path in opts["get"]:
    ctx = ssl.create_default_context(cafile=os.path.join(sa, "ca.crt"))
    conn = http.client.HTTPSConnection(os.environ["KUBERNETES_SERVICE_HOST"],
                                       int(os.environ["KUBERNETES_SERVICE_PORT"]), context=ctx)
    conn.request("GET", path, headers={"Authorization": "Bearer " + token})
    resp = conn.getresponse()
    body = json.loads(resp.read())
    gets[path] = [resp.status, body.get("message", body.get("metadata", {}).get("name"))]
state = os.environ.get("FAKE_STATE")
attempt = 1
if state:
    count = os.path.join(state, "attempts")
    attempt = int(open(count).read()) + 1 if os.path.exists(count) else 1
    open(count, "w").write(str(attempt))
    if opts["child"]:
        import subprocess
        child = subprocess.Popen(["sleep", "30"])
        with open(os.path.join(state, "pids.tmp"), "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        os.rename(os.path.join(state, "pids.tmp"), os.path.join(state, "pids"))
print(json.dumps({"argv": sys.argv, "env": dict(os.environ), "gets": gets,
                  "namespace": open(os.path.join(sa, "namespace")).read(),
                  "attempt": attempt}), flush=True)
print("fake certctl: done", file=sys.stderr, flush=True)
time.sleep(opts["sleep"])
sys.exit(1 if attempt <= opts["fail_times"] else opts["exit"])
'''


@pytest.fixture
def fake(tmp_path):
    path = tmp_path / "fake-certctl"
    path.write_text(FAKE)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def runner(cluster, fake):
    apply(cluster, namespace(NS))
    with JobRunner(cluster, image_map={"certctl": fake}) as r:
        yield r


def job(name, args=(), command=None, sa="hook", env=None, namespace=NS, **spec):
    container = {"name": "certctl", "image": "ghcr.io/example/certctl:0.1.0",
                 "args": list(args)}
    if command is not None:
        container["command"] = command
    if env is not None:
        container["env"] = env
    pod = {"restartPolicy": "Never", "containers": [container]}
    if sa:
        pod["serviceAccountName"] = sa
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": pod}, **spec}}


PLURALS = {"ServiceAccount": "serviceaccounts", "Secret": "secrets", "ConfigMap": "configmaps",
           "Namespace": "namespaces", "Job": "jobs", "Role": "roles",
           "RoleBinding": "rolebindings", "ClusterRole": "clusterroles",
           "ClusterRoleBinding": "clusterrolebindings"}


def apply(cluster, *objects):
    """Create objects through the API (faster than kubectl, which has its own tests)."""
    for obj in objects:
        version = obj["apiVersion"]
        base = f"/apis/{version}" if "/" in version else f"/api/{version}"
        ns = obj["metadata"].get("namespace")
        path = f"{base}/namespaces/{ns}/{PLURALS[obj['kind']]}" if ns else \
            f"{base}/{PLURALS[obj['kind']]}"
        resp = cluster.api("POST", path, obj)
        assert resp.status == 201, resp


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def configmap(name, namespace=NS):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}}


def get_job(cluster, name, namespace=NS):
    return cluster.api("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}").json()


def output(run):
    return json.loads(run.stdout.splitlines()[0])


def rbac(namespace=NS, sa="hook"):
    """SA hook: get on Secret "allowed" (Role), get/list configmaps in NS through a
    ClusterRole bound by a RoleBinding, get on one webhook configuration cluster-wide."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": sa, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "hook", "namespace": namespace},
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                    "resourceNames": ["allowed"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "hook", "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "hook"},
         "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "cm-reader"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
                   {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "cm-reader", "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "cm-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": sa}]},  # namespace defaults
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "vwc"},
         "rules": [{"apiGroups": ["admissionregistration.k8s.io"],
                    "resources": ["validatingwebhookconfigurations"], "verbs": ["get"],
                    "resourceNames": ["hook"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "vwc"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "vwc"},
         "subjects": [{"kind": "Group", "name": f"system:serviceaccounts:{namespace}",
                       "apiGroup": "rbac.authorization.k8s.io"}]},
        # Bound to someone else: grants the hook nothing.
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "others"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "cm-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": "other", "namespace": namespace}]},
    ]


def secret(name, namespace=NS, **data):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name,
                                                               "namespace": namespace},
            "stringData": data}


# --- pure helpers -------------------------------------------------------------------------

def test_image_repository_and_expansion():
    assert image_repository("ghcr.io/x/certctl:0.1.0") == "certctl"
    assert image_repository("certctl") == "certctl"
    assert image_repository("localhost:5000/a/b/certctl@sha256:abc") == "certctl"
    assert image_repository("registry:5000/certctl:v1@sha256:abc") == "certctl"
    env = {"A": "x", "B": "y"}
    assert expand("$(A)-$(B)", env) == "x-y"
    assert expand("$$(A) $(C) $(A", env) == "$(A) $(C) $(A"
    assert expand("a$b$", env) == "a$b$"


def test_rbac_translation():
    rules = service_account_rules(NS, "hook", *[
        [o for o in rbac() if o["kind"] == kind]
        for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")])
    assert rules == [
        {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
         "resourceNames": ["allowed"], "namespaces": [NS]},
        {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"],
         "namespaces": [NS]},
        {"verbs": ["get"], "apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["validatingwebhookconfigurations"], "resourceNames": ["hook"]}]
    assert translate_rule({"nonResourceURLs": ["/x"], "verbs": ["get"]}) is None
    # The same name in another namespace matches none of those subjects.
    other = service_account_rules("elsewhere", "hook", *[
        [o for o in rbac() if o["kind"] == kind]
        for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")])
    assert other == []


# --- against the emulator -----------------------------------------------------------------

def test_job_runs_with_exactly_its_rbac(cluster, runner):
    apply(cluster, *rbac(), secret("allowed", a="1"), secret("other", b="2"), configmap("cfg"),
          namespace("elsewhere"), configmap("cfg", "elsewhere"))
    apply(cluster, job("rbac", command=["/certctl"], args=[
        "job", "--get", f"/api/v1/namespaces/{NS}/secrets/allowed",
        "--get", f"/api/v1/namespaces/{NS}/secrets/other",
        "--get", f"/api/v1/namespaces/{NS}/configmaps/cfg",
        "--get", "/api/v1/namespaces/elsewhere/configmaps/cfg",
        "--get", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/hook",
        "--get", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/x"]))
    result = runner.wait_for("rbac", timeout=20)
    assert result.succeeded, result.runs
    (run,) = result.runs
    user = "system:serviceaccount:hooks:hook"
    assert run.user == user and run.exit_code == 0
    gets = output(run)["gets"]
    assert gets[f"/api/v1/namespaces/{NS}/secrets/allowed"] == [200, "allowed"]
    assert gets[f"/api/v1/namespaces/{NS}/secrets/other"] == [403, (
        f'secrets "other" is forbidden: User "{user}" cannot get resource "secrets" in API '
        f'group "" in the namespace "{NS}"')]
    assert gets[f"/api/v1/namespaces/{NS}/configmaps/cfg"] == [200, "cfg"]
    assert gets["/api/v1/namespaces/elsewhere/configmaps/cfg"][0] == 403
    # Not created: the ClusterRoleBinding to the group lets the GET through to a 404.
    vwc = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    assert gets[f"{vwc}/hook"][0] == 404
    assert gets[f"{vwc}/x"][0] == 403
    assert output(run)["namespace"] == NS
    assert "fake certctl: done" in run.stderr
    # The emulator user carries exactly those rules and the service-account groups.
    users = [u for u in cluster.api("GET", "/_emulator/policy").json()["users"].values()
             if u["name"] == user]
    assert len(users) == 1
    assert users[0]["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{NS}",
                                  "system:authenticated"]
    assert users[0]["rules"] == run.rules and len(run.rules) == 3

    status = get_job(cluster, "rbac")["status"]
    assert status["succeeded"] == 1 and "active" not in status and "failed" not in status
    assert status["startTime"] and status["completionTime"]
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"),
        ("Complete", "True", "CompletionsReached")]
    # The status went through the subresource: spec untouched, generation still 1.
    assert get_job(cluster, "rbac")["metadata"]["generation"] == 1
    status_writes = [w for w in cluster.writes() if w["resource"] == "jobs"]
    assert status_writes and all(w["subresource"] == "status" for w in status_writes
                                 if w["verb"] == "update")


def test_env_argv_and_order(cluster, runner, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.setenv("POD_NAME", "leaked")
    apply(cluster, secret("creds", password="s3cret"))
    env = [{"name": "MODE", "value": "inject"},
           {"name": "FLAG", "value": "--mode=$(MODE) $$(MODE)"},
           {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath":
                                                                "metadata.namespace"}}},
           {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
           {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds",
                                                               "key": "password"}}}]
    # Two Jobs at once: they run one after the other, in creation order.
    apply(cluster, job("first", args=["--sleep", "0.3"], sa="", env=env),
          job("second", command=["/usr/local/bin/certctl", "job"],
              args=["--phase", "$(MODE)", "$(UNSET)"], sa="", env=env[:1]))
    first, second = runner.wait_for("first", 20), runner.wait_for("second", 20)
    assert first.succeeded and second.succeeded
    (run1,), (run2,) = first.runs, second.runs
    assert run1.finished <= run2.started
    assert [r.job for r in runner.runs] == ["first", "second"]

    out = output(run1)
    assert out["argv"][1:] == ["--sleep", "0.3"]
    seen = out["env"]
    assert seen["MODE"] == "inject" and seen["FLAG"] == "--mode=inject $(MODE)"
    assert seen["POD_NAMESPACE"] == NS and seen["SA"] == "default"
    assert seen["MY_POD"] == run1.pod == seen["HOSTNAME"] and run1.pod.startswith("first-")
    assert seen["PASSWORD"] == "s3cret"
    assert seen["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert seen["KUBERNETES_SERVICE_PORT"] == str(cluster.port)
    assert "KUBECONFIG" not in seen and "POD_NAME" not in seen  # scrubbed, not set by Job
    assert run1.user == f"system:serviceaccount:{NS}:default" and run1.rules == []
    assert run1.env["POD_NAMESPACE"] == NS and "PATH" not in run1.env

    assert run2.argv[1:] == ["job", "--phase", "inject", "$(UNSET)"]
    assert os.path.samefile(run2.argv[0], output(run2)["argv"][0])


def test_backoff_limit_then_failed(cluster, runner, tmp_path):
    env = [{"name": "FAKE_STATE", "value": str(tmp_path)}]
    apply(cluster, job("flaky", args=["--fail-times", "2"], sa="", env=env, backoffLimit=2))
    result = runner.wait_for("flaky", 20)
    assert result.succeeded and [r.exit_code for r in result.runs] == [1, 1, 0]
    assert len({r.pod for r in result.runs}) == 3  # restartPolicy Never: a pod per attempt
    status = get_job(cluster, "flaky")["status"]
    assert (status["failed"], status["succeeded"]) == (2, 1)

    state = tmp_path / "broken"
    state.mkdir()
    env = [{"name": "FAKE_STATE", "value": str(state)}]
    apply(cluster, job("broken", args=["--exit", "3"], sa="", env=env, backoffLimit=1))
    result = runner.wait_for("broken", 20)
    assert not result.succeeded and [r.exit_code for r in result.runs] == [3, 3]
    status = get_job(cluster, "broken")["status"]
    assert status["failed"] == 2 and "succeeded" not in status
    assert "completionTime" not in status and "active" not in status
    assert [(c["type"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def assert_dead(pids_file, timeout=5.0):
    """The fake and its child die soon after the kill (a busy machine may take a moment)."""
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, f"still alive: {[p for p in pids if _alive(p)]}"
        time.sleep(0.05)


def test_deadline_kills_the_process_group(cluster, runner, tmp_path):
    env = [{"name": "FAKE_STATE", "value": str(tmp_path)}]
    t0 = time.monotonic()
    apply(cluster, job("slow", args=["--child", "--sleep", "30"], sa="", env=env,
                       activeDeadlineSeconds=2))
    result = runner.wait_for("slow", 20)
    assert time.monotonic() - t0 < 10
    assert not result.succeeded and result.reason == "DeadlineExceeded"
    (run,) = result.runs
    assert run.killed == "DeadlineExceeded" and run.exit_code is None
    assert_dead(tmp_path / "pids")  # the fake and its `sleep` child
    status = get_job(cluster, "slow")["status"]
    assert status["failed"] == 1
    assert [(c["type"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("FailureTarget", "DeadlineExceeded", "Job was active longer than specified deadline"),
        ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")]

    # Stopping the runner kills what still runs and ends both threads.
    state = tmp_path / "left"
    state.mkdir()
    apply(cluster, job("left", args=["--child", "--sleep", "30"], sa="",
                       env=[{"name": "FAKE_STATE", "value": str(state)}]))
    deadline = time.monotonic() + 10
    while not (state / "pids").exists():
        assert time.monotonic() < deadline, runner.log
        time.sleep(0.05)
    runner.stop()
    assert runner.runs_of("left")[0].killed == "RunnerStopped"
    assert_dead(state / "pids")
    assert not [t for t in threading.enumerate() if t.name.startswith("kubelet-")]


def test_config_errors_fail_fast_and_deleted_jobs_stop(cluster, runner, tmp_path):
    apply(cluster, job("badenv", sa="", env=[{"name": "IP", "valueFrom": {
        "fieldRef": {"fieldPath": "status.podIP"}}}]))
    unmapped = job("unmapped", sa="")
    unmapped["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.36"
    apply(cluster, unmapped)
    result = runner.wait_for("badenv", 20)
    assert (result.succeeded, result.reason) == (False, "CreateContainerConfigError")
    assert "status.podIP" in result.message
    result = runner.wait_for("unmapped", 20)
    assert (result.succeeded, result.reason) == (False, "ErrImagePull")
    assert "busybox" in result.message
    failed = get_job(cluster, "unmapped")["status"]["conditions"][-1]
    assert (failed["type"], failed["reason"]) == ("Failed", "ErrImagePull")

    # Deleting a running Job kills its process; no status is written.
    env = [{"name": "FAKE_STATE", "value": str(tmp_path)}]
    apply(cluster, job("doomed", args=["--child", "--sleep", "30"], sa="", env=env))
    deadline = time.monotonic() + 10
    while not (tmp_path / "pids").exists():
        assert time.monotonic() < deadline, runner.log
        time.sleep(0.05)
    assert cluster.api("DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/doomed",
                       {"propagationPolicy": "Background"}).status == 200
    deadline = time.monotonic() + 10
    while not (runner.runs_of("doomed") and runner.runs_of("doomed")[0].finished):
        assert time.monotonic() < deadline, runner.log
        time.sleep(0.05)
    assert runner.runs_of("doomed")[0].killed == "JobDeleted"
    assert_dead(tmp_path / "pids")


def test_kubectl_wait_and_service_account_wait(cluster, runner, tmp_path):
    # The Job names a service account that does not exist yet: it waits, like a real one.
    apply(cluster, job("waits", args=["--sleep", "0.2"], sa="late"))
    watcher = cluster.kubectl_background("wait", "--for=condition=complete", "job/waits",
                                         "-n", NS, "--timeout=30s")
    try:
        time.sleep(0.5)
        assert runner.runs_of("waits") == [] and watcher.poll() is None
        apply(cluster, {"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "late", "namespace": NS}})
        out, err = watcher.communicate(timeout=30)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.communicate()
    assert watcher.returncode == 0, err
    assert out.strip() == "job.batch/waits condition met"
    assert runner.wait_for("waits", 5).succeeded
    # A finished Job is never run again, whatever happens to it later.
    resp = cluster.api("PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/waits",
                       {"metadata": {"labels": {"again": "please"}}},
                       content_type="application/merge-patch+json")
    assert resp.status == 200
    apply(cluster, job("sentinel", sa=""))
    runner.wait_for("sentinel", 20)
    assert len(runner.runs_of("waits")) == 1


def test_kubelet_fixture_runs_the_certctl_binary(cluster, kubelet, certctl_binary):
    apply(cluster, namespace(NS), job("version", args=["version"], sa=""))
    result = kubelet.wait_for("version", 20)
    assert result.succeeded, result.runs
    (run,) = result.runs
    assert run.argv == [certctl_binary, "version"]
    assert run.stdout.startswith("certctl ")
