"""Fixtures for the release tests that need a registry: a docker-registry on loopback
(harness/registry.py) and a release built for it by scripts/release.sh, from the static
executables already built (--reuse-builds: nothing is compiled here).

Without build/static/certctl and build/static-arm64/certctl the tests skip naming what is
missing; scripts/test.sh builds both before the end-to-end tests.
"""

import json
import os
import subprocess
from dataclasses import dataclass

import pytest

from harness.helm import REPO
from harness.registry import Registry
from harness.signing import generate_key

STATIC_BUILDS = {"amd64": os.path.join(REPO, "build", "static", "certctl"),
                 "arm64": os.path.join(REPO, "build", "static-arm64", "certctl")}
RELEASE_SH = os.path.join(REPO, "scripts", "release.sh")
RELEASE_BOUND = 600  # seconds: two images, their SBOMs and the chart, on a busy machine


@dataclass
class RegistryRelease:
    """A release in `dir` built for `registry` (host:port): its version and the digest of its
    image index."""
    dir: str
    version: str
    digest: str
    registry: str

    @property
    def image(self):
        """The image by the digest the chart pins."""
        return f"{self.registry}/certctl@{self.digest}"

    @property
    def chart(self):
        return f"oci://{self.registry}/charts/certctl"


@pytest.fixture(scope="module")
def static_version():
    """The version the built static executables report (the release takes them as built),
    or a skip naming the one that is missing."""
    missing = [path for path in STATIC_BUILDS.values() if not os.access(path, os.X_OK)]
    if missing:
        pytest.skip(f"{', '.join(os.path.relpath(p, REPO) for p in missing)} not built "
                    "(scripts/build-static.sh --arch amd64|arm64; scripts/test.sh builds both)")
    proc = subprocess.run([STATIC_BUILDS["amd64"], "version", "-o", "json"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["version"]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A registry on 127.0.0.1, plain HTTP, empty; stopped after the module."""
    with Registry(tmp_path_factory.mktemp("registry")) as running:
        yield running


@pytest.fixture(scope="module")
def signing_key(tmp_path_factory):
    """The key the release is signed with."""
    return generate_key(str(tmp_path_factory.mktemp("signing-key")), "release-password")


@pytest.fixture(scope="module")
def registry_release(static_version, registry, signing_key, tmp_path_factory):
    """scripts/release.sh run for the registry (CERTCTL_REGISTRY=127.0.0.1:PORT), signed
    with `signing_key`."""
    out = os.path.join(str(tmp_path_factory.mktemp("release")), "dist")
    env = dict(os.environ, CERTCTL_REGISTRY=registry.host, **signing_key.env())
    proc = subprocess.run([RELEASE_SH, static_version, "--out", out, "--reuse-builds"],
                          cwd=REPO, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=RELEASE_BOUND)
    assert proc.returncode == 0, f"scripts/release.sh failed:\n{proc.stdout}{proc.stderr}"
    assert "signed with" in proc.stderr, proc.stderr
    with open(os.path.join(out, f"certctl-{static_version}.index-digest"),
              encoding="utf-8") as f:
        digest = f.read().strip()
    return RegistryRelease(out, static_version, digest, registry.host)
