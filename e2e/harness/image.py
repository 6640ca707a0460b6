"""certctl's static executable and container image for the end-to-end tests
(tests/image/): where they are, why they cannot be used here (a reason to skip with), and
`Podman`, which runs certctl from the image the way a pod runs it.

The static executable is build/static/certctl (scripts/build-static.sh), the image
localhost/certctl:latest (scripts/build-image.sh); CERTCTL_STATIC_BINARY and CERTCTL_IMAGE
override them. The image carries the SHA-256 of the executable it was built from in the
label io.certctl.binary.sha256, so an older image left in podman's storage is not taken for
the current one.
"""

import functools
import hashlib
import json
import os
import shutil
import subprocess
import uuid

from .helm import REPO

STATIC_BINARY = os.environ.get("CERTCTL_STATIC_BINARY",
                               os.path.join(REPO, "build", "static", "certctl"))
IMAGE = os.environ.get("CERTCTL_IMAGE", "localhost/certctl:latest")
# Where a pod has its service account, and what certctl reads when nothing overrides it.
SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
BINARY_LABEL = "io.certctl.binary.sha256"

__all__ = ["STATIC_BINARY", "IMAGE", "SERVICE_ACCOUNT_MOUNT", "BINARY_LABEL", "Podman",
           "image_problem", "run_problem", "in_cluster", "writable_folder", "sha256"]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@functools.lru_cache(maxsize=None)
def image_problem():
    """Why the image cannot be inspected here (None when it can)."""
    if shutil.which("podman") is None:
        return "podman is not installed (scripts/build-image.sh installs it)"
    inspected = subprocess.run(["podman", "image", "inspect", IMAGE], capture_output=True,
                               text=True, timeout=60)
    if inspected.returncode != 0:
        return f"image {IMAGE} not built (scripts/build-image.sh)"
    labels = json.loads(inspected.stdout)[0]["Config"].get("Labels") or {}
    if os.path.isfile(STATIC_BINARY) and labels.get(BINARY_LABEL) != sha256(STATIC_BINARY):
        return (f"image {IMAGE} holds another certctl than {STATIC_BINARY} "
                "(rebuild it with scripts/build-image.sh)")
    return None


@functools.lru_cache(maxsize=None)
def run_problem():
    """Why podman cannot run the image here (None when it can)."""
    problem = image_problem()
    if problem:
        return problem
    probe = subprocess.run(["podman", "run", "--rm", "--network", "none", IMAGE, "version"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"]
        return f"podman cannot run containers here: {lines[-1]}"
    return None


class Podman:
    """Runs certctl from the image: host network (the emulator listens on 127.0.0.1), a
    read-only root file system, mounts given as {host path: (container path, "ro" or "rw")},
    the container removed afterwards whatever happens."""

    def __init__(self, image_name):
        self.image = image_name
        self.names = []

    def argv(self, args, mounts=None, env=None, name=None):
        name = name or f"certctl-e2e-{uuid.uuid4().hex[:12]}"
        self.names.append(name)
        # A read-only root with no tmpfs anywhere: certctl writes only to its mounted folders.
        argv = ["podman", "run", "--rm", "--name", name, "--network", "host", "--read-only",
                "--read-only-tmpfs=false"]
        for source, (target, mode) in (mounts or {}).items():
            # --mount, not -v: the harness's service account folders have colons in their names.
            readonly = ",readonly=true" if mode == "ro" else ""
            argv += ["--mount", f"type=bind,source={source},target={target}{readonly}"]
        for key, value in (env or {}).items():
            argv += ["-e", f"{key}={value}"]
        return argv + [self.image, *args]

    def run(self, *args, mounts=None, env=None, timeout=60):
        return subprocess.run(self.argv(args, mounts, env), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)

    def start(self, *args, mounts=None, env=None, name, stdout, stderr):
        return subprocess.Popen(self.argv(args, mounts, env, name), stdin=subprocess.DEVNULL,
                                stdout=stdout, stderr=stderr)

    def kill(self, name, signal_name):
        subprocess.run(["podman", "kill", "--signal", signal_name, name], capture_output=True,
                       timeout=30)

    def cleanup(self):
        for name in self.names:
            subprocess.run(["podman", "rm", "--force", "--time", "0", "--ignore", name],
                           capture_output=True, timeout=60)


def in_cluster(cluster, user, namespace):
    """What a pod running as `user` gets: the service account folder, mounted read-only where
    the kubelet puts it, and the Service address of the API server (the emulator, reached
    over the host network)."""
    folder = cluster.service_account_dir(user, namespace)
    mounts = {folder: (SERVICE_ACCOUNT_MOUNT, "ro")}
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": str(cluster.port)}
    return mounts, env


def writable_folder(path):
    """A folder the image's user (65532) may write, as an emptyDir is."""
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o777)
    return path
