"""certctl run from the image with podman, as a pod runs it: the image's own user (65532),
a read-only root file system, the service account folder mounted read-only at its usual
place, the API server (the emulator) at KUBERNETES_SERVICE_HOST over the host network,
folders mounted for the certificates. `check` on a mounted folder, `job` then `check`
against the cluster, `check` with a kubeconfig that names the server `localhost`, and
`certctl run` as PID 1 of its container: ready, folder and caBundle kept, a wiped caBundle
repaired, SIGTERM honoured."""

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from harness.certctl import webhook_configuration
from harness.image import in_cluster, writable_folder
from harness.rbac import emulator_rules
from harness.sidecar import free_ports

NS = "infra"
SECRET = "webhook-server-cert"
USER = "system:serviceaccount:infra:certctl"
VWC = "ValidatingWebhookConfiguration"
VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/hook"
SECRET_PATH = f"/api/v1/namespaces/{NS}/secrets/{SECRET}"
JOB_RULES = emulator_rules("job", SECRET, NS, {"validatingWebhooks": ["hook"]})
RUN_RULES = emulator_rules("sidecar", SECRET, NS, {"validatingWebhooks": ["hook"]})
TARGETS = ["--validating-webhook", "hook"]
BOUND = 30.0      # a container start on a loaded 2-core machine included
STOP_LIMIT = 5.0  # what certctl run promises for SIGTERM


def test_version(podman):
    result = podman.run("version", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["openssl"].startswith("OpenSSL 3.")


def test_check_on_a_mounted_folder(podman, tmp_path):
    # generate from the image too, into a folder its user may write.
    work = writable_folder(str(tmp_path / "work"))
    mounts = {work: ("/work", "rw")}
    for folder in ("certs", "other"):
        made = podman.run("generate", "--service", "hook", "-n", NS, "--out-dir",
                          f"/work/{folder}", mounts=mounts)
        assert made.returncode == 0, made.stderr

    readonly = {os.path.join(work, "certs"): ("/certs", "ro")}
    ok = podman.run("check", "--cert-dir", "/certs", "--service", "hook", "-n", NS,
                    mounts=readonly)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("ok:"), ok.stdout

    shutil.copyfile(os.path.join(work, "other", "tls.key"), os.path.join(work, "certs", "tls.key"))
    bad = podman.run("check", "--cert-dir", "/certs", "--service", "hook", "-n", NS, "-o",
                     "json", mounts=readonly)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    codes = {finding["code"] for finding in json.loads(bad.stdout)["findings"]}
    assert "key-mismatch" in codes, bad.stdout


@pytest.fixture
def hook(cluster):
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        webhook_configuration(VWC, "hook", ["a.hook.io", "b.hook.io"])))
    return cluster


def api_get(cluster, path):
    resp = cluster.api("GET", path)
    if resp.status == 404:
        return None
    assert resp.status == 200, resp
    return resp.json()


def secret_ca(cluster):
    secret = api_get(cluster, SECRET_PATH)
    return None if secret is None else base64.b64decode(secret["data"]["ca.crt"]).decode()


def bundles(cluster):
    return [base64.b64decode(w["clientConfig"].get("caBundle", "")).decode()
            for w in api_get(cluster, VWC_PATH)["webhooks"]]


def test_job_then_check(hook, podman):
    hook.add_user(USER, JOB_RULES)
    mounts, env = in_cluster(hook, USER, NS)
    job = podman.run("job", "--service", "hook", *TARGETS, mounts=mounts, env=env)
    assert job.returncode == 0, job.stderr
    assert f"created secret/{NS}/{SECRET}" in job.stderr
    assert bundles(hook) == [secret_ca(hook)] * 2

    checked = podman.run("check", "--service", "hook", *TARGETS, mounts=mounts, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("ok:"), checked.stdout


def test_check_finds_the_server_by_name(hook, podman, tmp_path):
    # The static executable resolves names with the C library's own files and DNS sources,
    # reading the /etc/hosts and /etc/resolv.conf the runtime mounts (the kubelet does too):
    # a kubeconfig naming the API server `localhost` works from the image.
    hook.add_user(USER, JOB_RULES)
    mounts, env = in_cluster(hook, USER, NS)
    job = podman.run("job", "--service", "hook", *TARGETS, mounts=mounts, env=env)
    assert job.returncode == 0, job.stderr
    with open(hook.kubeconfig(USER), encoding="utf-8") as f:
        config = json.load(f)
    config["clusters"][0]["cluster"]["server"] = f"https://localhost:{hook.port}"
    folder = writable_folder(str(tmp_path / "kube"))
    with open(os.path.join(folder, "config"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    os.chmod(os.path.join(folder, "config"), 0o644)
    checked = podman.run("check", "--kubeconfig", "/kube/config", "-n", NS, "--service", "hook",
                         *TARGETS, mounts={folder: ("/kube", "ro")})
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("ok:"), checked.stdout


def readyz(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def wait_for(predicate, what, proc, log_path, bound=BOUND):
    deadline = time.monotonic() + bound
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                log = f.read()
            state = f"exited {proc.returncode}" if proc.poll() is not None else "still running"
            pytest.fail(f"no {what} within {bound:g}s (container {state}); stderr:\n{log}")
        time.sleep(0.05)


def test_run_as_the_pods_sidecar(hook, podman, tmp_path):
    hook.add_user(USER, RUN_RULES)
    mounts, env = in_cluster(hook, USER, NS)
    work = writable_folder(str(tmp_path / "work"))
    mounts[work] = ("/tls", "rw")
    health, metrics = free_ports(2)
    name = f"certctl-e2e-run-{health}"
    log_path = str(tmp_path / "run.stderr")
    with open(log_path, "wb") as err:
        proc = podman.start("run", "--service", "hook", "-n", NS, *TARGETS,
                            "--cert-dir", "/tls/certs", "--ready-file", "/tls/ready",
                            "--health-addr", f"127.0.0.1:{health}",
                            "--metrics-addr", f"127.0.0.1:{metrics}",
                            mounts=mounts, env=env, name=name, stdout=subprocess.DEVNULL,
                            stderr=err)
    try:
        wait_for(lambda: readyz(health) == 200, "/readyz 200", proc, log_path)
        ca = secret_ca(hook)
        assert bundles(hook) == [ca, ca]
        certs = os.path.join(work, "certs")
        assert os.path.islink(os.path.join(certs, "..data"))
        with open(os.path.join(certs, "ca.crt"), encoding="ascii") as f:
            assert f.read() == ca
        assert os.stat(os.path.join(certs, "..data", "tls.key")).st_uid == 65532
        assert os.path.exists(os.path.join(work, "ready"))

        # A caBundle wiped by someone else is repaired through the watch.
        hook.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json",
                     "-p", json.dumps([{"op": "replace",
                                        "path": "/webhooks/0/clientConfig/caBundle",
                                        "value": ""}]))
        wait_for(lambda: bundles(hook) == [ca, ca], "repaired caBundle", proc, log_path)

        # SIGTERM reaches certctl as PID 1 of the container: exit 0, ready file removed.
        started = time.monotonic()
        podman.kill(name, "TERM")
        code = proc.wait(STOP_LIMIT + 10)
        assert code == 0, open(log_path, encoding="utf-8", errors="replace").read()
        assert time.monotonic() - started < STOP_LIMIT + 2
        assert not os.path.exists(os.path.join(work, "ready"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
