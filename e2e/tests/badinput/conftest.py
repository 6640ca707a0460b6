"""Fixtures of the bad-input corpus: one emulator per test module (each case resets the
objects it needs), and a pair made by `certctl generate` for the cases that need a healthy
setup to leave untouched."""

import json
import os
import subprocess

import pytest

from harness import Cluster
from harness.corpus import NS, Stage, decode, hook_target

# The configurations the modules target; certctl's RBAC names all of them.
TARGET_NAMES = ("hook", "urls", "huge", "many")


def binary_path():
    path = os.path.abspath(os.environ.get("CERTCTL_BINARY", "build/ci/certctl"))
    if not os.path.isfile(path):
        pytest.fail(f"certctl binary not built: {path} (build it, or pass its path to "
                    "e2e/run.sh)")
    return path


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    """The module's emulator with namespace infra and certctl's service account."""
    with Cluster() as cluster:
        yield Stage(cluster, binary_path(), str(tmp_path_factory.mktemp("badinput")),
                    targets=TARGET_NAMES)


@pytest.fixture(scope="module")
def generated():
    """A managed Secret for Service hook made by `certctl generate -o secret-json`."""
    proc = subprocess.run([binary_path(), "generate", "--service", "hook", "-n", NS,
                           "-o", "secret-json", "--log-level", "off"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def healthy(stage, generated):
    """A valid managed Secret and configuration hook already holding its CA: the setup a
    bad command line must leave exactly as it is."""
    stage.reset(secret=generated, targets=[hook_target(decode(generated["data"]["ca.crt"]))])
    stage.cluster.reset_request_log()
    return stage
