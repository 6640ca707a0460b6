"""`kubectl kustomize` of the repository's kustomizations, offline (no kubeconfig, no
server), with certctl's image set the way a user sets it.

No public image of certctl exists, so the examples leave it unset: the line `image=` of
their ConfigMap certctl-image is commented out, as is `image:` in the kustomize component's
example settings, and kustomize stops, naming data.image, until a user sets it. Tests set
it in a copy of manifests/ (`kustomize`) or in a copy of their own (`name_image`)."""

import os
import shutil
import subprocess
import tempfile

import yaml

from .kubectl_path import KUBECTL

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFESTS = os.path.join(REPO, "manifests")
# The image the tests set.
TEST_IMAGE = "registry.example/certctl:0.2.0"
# The commented lines that show a user where the image goes, and what they become.
UNSET = {"      # - image=registry.example.com/platform/certctl:0.2.0": "      - image={}",
         "  # image: registry.example.com/platform/certctl:0.2.0": "  image: {}"}
# What kustomize says while it is unset.
MISSING = "fieldPath `data.image` is missing for replacement source"


def documents(stream):
    return [doc for doc in yaml.safe_load_all(stream) if doc]


def name_image(root, image=TEST_IMAGE):
    """Sets certctl's image in every file under `root` that shows where it goes; returns
    how many files changed (a test that copies an example asserts it is not 0)."""
    changed = 0
    for folder, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".yaml"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            named = text
            for unset, setting in UNSET.items():
                named = named.replace(unset, setting.format(image))
            if named != text:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(named)
                changed += 1
    return changed


def run_kustomize(path):
    """The finished `kubectl kustomize PATH` process, as it is; HOME is the folder, so no
    user configuration takes part."""
    path = str(path)
    env = dict(os.environ, KUBECONFIG=os.devnull, HOME=path)
    return subprocess.run([KUBECTL, "kustomize", path], capture_output=True, text=True,
                          env=env, timeout=30)


def kustomize(path, image=TEST_IMAGE):
    """(stream, objects) of `kubectl kustomize PATH`. A path under the repository's
    manifests/ is rendered from a copy of that folder with certctl's image set to `image`
    (None: the repository's files as they are); a copy a test made is rendered as it is
    (the test sets the image in it with name_image)."""
    path = os.path.abspath(str(path))
    inside = os.path.commonpath([path, MANIFESTS]) == MANIFESTS
    if image is None or not inside:
        proc = run_kustomize(path)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "manifests")
            shutil.copytree(MANIFESTS, copy)
            assert name_image(copy, image), "no file shows where certctl's image goes"
            proc = run_kustomize(os.path.join(copy, os.path.relpath(path, MANIFESTS)))
    assert proc.returncode == 0, f"kubectl kustomize {path} failed:\n{proc.stderr}"
    return proc.stdout, documents(proc.stdout)


def pod_containers(obj):
    """The containers and init containers of a workload's pod template (a CronJob's too)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    return pod.get("initContainers", []) + pod.get("containers", [])


def certctl_images(objects):
    """(kind, name, image) of each certctl container in the rendered objects."""
    return [(obj["kind"], obj["metadata"]["name"], c["image"]) for obj in objects
            for c in pod_containers(obj) if c["name"] == "certctl"]
