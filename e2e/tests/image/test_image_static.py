"""The executable the image holds (build/static/certctl), without a container: it needs no
loader and no shared library, and it does its work in a file system holding nothing but itself
(a chroot, when the tests run as root) — `version`, `check` on a folder, `job` and `check`
against the emulator — and `certctl run` keeps a folder and a caBundle right. These run where
podman cannot, so the image's contents are checked either way."""

import base64
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from harness.certctl import webhook_configuration
from harness.rbac import emulator_rules
from harness.sidecar import SCRUBBED, Sidecar

NS = "infra"
SECRET = "webhook-server-cert"
USER = "system:serviceaccount:infra:certctl"
VWC = "ValidatingWebhookConfiguration"
VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/hook"
SECRET_PATH = f"/api/v1/namespaces/{NS}/secrets/{SECRET}"
JOB_RULES = emulator_rules("job", SECRET, NS, {"validatingWebhooks": ["hook"]})
RUN_RULES = emulator_rules("sidecar", SECRET, NS, {"validatingWebhooks": ["hook"]})
BOUND = 20.0


def readelf(*args):
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    return subprocess.run(["readelf", *args], capture_output=True, text=True, check=True).stdout


class EmptyRoot:
    """Runs the executable in a folder holding only itself (and what a test copies in),
    through chroot when running as root; otherwise in place, in a scrubbed environment."""

    def __init__(self, binary, root):
        self.chrooted = os.geteuid() == 0 and shutil.which("chroot") is not None
        self.root = root
        if self.chrooted:
            os.makedirs(root, exist_ok=True)
            shutil.copy2(binary, os.path.join(root, "certctl"))
            self.argv = [shutil.which("chroot"), root, "/certctl"]
        else:
            self.argv = [binary]

    def path(self, inside):
        """The path certctl is given for a file that lies at `inside` within the root."""
        return inside if self.chrooted else os.path.join(self.root, inside.lstrip("/"))

    def host(self, inside):
        return os.path.join(self.root, inside.lstrip("/"))

    def run(self, *args, env=None):
        base = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        if self.chrooted:
            base = {"PATH": "/"}
        base.update(env or {})
        return subprocess.run([*self.argv, *args], capture_output=True, text=True, env=base,
                              stdin=subprocess.DEVNULL, timeout=60)


def test_no_loader_no_shared_library(static_binary):
    headers = readelf("--program-headers", "--wide", static_binary)
    assert "INTERP" not in headers, headers
    dynamic = readelf("--dynamic", static_binary)
    assert "(NEEDED)" not in dynamic, dynamic
    assert os.path.getsize(static_binary) < 10_000_000


def test_version_and_check_in_an_empty_root(static_binary, tmp_path):
    root = EmptyRoot(static_binary, str(tmp_path / "root"))
    version = root.run("version", "-o", "json")
    assert version.returncode == 0, version.stderr
    assert json.loads(version.stdout)["openssl"].startswith("OpenSSL 3.")

    generated = root.run("generate", "--service", "hook", "-n", NS,
                         "--out-dir", root.path("/certs"))
    assert generated.returncode == 0, generated.stderr
    checked = root.run("check", "--cert-dir", root.path("/certs"), "--service", "hook", "-n", NS)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("ok:"), checked.stdout

    # Another pair's key: a finding, exit 1.
    other = root.run("generate", "--service", "hook", "-n", NS, "--out-dir", root.path("/other"))
    assert other.returncode == 0, other.stderr
    shutil.copyfile(root.host("/other/tls.key"), root.host("/certs/tls.key"))
    mismatched = root.run("check", "--cert-dir", root.path("/certs"), "--service", "hook",
                          "-n", NS)
    assert mismatched.returncode == 1, mismatched.stdout + mismatched.stderr
    assert "[key-mismatch]" in mismatched.stdout


@pytest.fixture
def hook(cluster):
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        webhook_configuration(VWC, "hook", ["a.hook.io", "b.hook.io"])))
    return cluster


def secret_ca(cluster):
    resp = cluster.api("GET", SECRET_PATH)
    assert resp.status == 200, resp
    return base64.b64decode(resp.json()["data"]["ca.crt"]).decode()


def bundles(cluster):
    resp = cluster.api("GET", VWC_PATH)
    assert resp.status == 200, resp
    return {base64.b64decode(w["clientConfig"].get("caBundle", "")).decode()
            for w in resp.json()["webhooks"]}


def test_job_and_check_in_an_empty_root(hook, static_binary, tmp_path):
    hook.add_user(USER, JOB_RULES)
    root = EmptyRoot(static_binary, str(tmp_path / "root"))
    # The service account where a pod has it; the API server by its Service IP, so no name
    # is resolved (nor could be: the root holds no /etc/hosts or resolv.conf).
    mount = "/var/run/secrets/kubernetes.io/serviceaccount"
    shutil.copytree(hook.service_account_dir(USER, NS), root.host(mount))
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(hook.port)}
    if not root.chrooted:
        env["CERTCTL_SERVICEACCOUNT_DIR"] = root.host(mount)

    job = root.run("job", "--service", "hook", "--validating-webhook", "hook", env=env)
    assert job.returncode == 0, job.stderr
    assert f"created secret/{NS}/{SECRET}" in job.stderr
    assert bundles(hook) == {secret_ca(hook)}

    checked = root.run("check", "--service", "hook", "--validating-webhook", "hook", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_run_keeps_the_folder_and_the_bundle(hook, static_binary, tmp_path):
    hook.add_user(USER, RUN_RULES)
    sidecar = Sidecar(static_binary, hook, str(tmp_path), "static", USER,
                      ["--validating-webhook", "hook"]).start()
    try:
        deadline = time.monotonic() + BOUND
        while sidecar.readyz()[0] != 200:
            assert sidecar.alive(), sidecar.describe()
            assert time.monotonic() < deadline, sidecar.describe()
            time.sleep(0.05)
        ca = secret_ca(hook)
        assert bundles(hook) == {ca}
        with open(os.path.join(sidecar.cert_dir, "ca.crt"), encoding="ascii") as f:
            assert f.read() == ca
        assert os.path.islink(os.path.join(sidecar.cert_dir, "..data"))
        assert os.path.exists(sidecar.ready_file)
        code, seconds = sidecar.stop(signal.SIGTERM)
        assert code == 0 and seconds < 5.0, sidecar.describe()
    finally:
        sidecar.reap()
