"""Fixtures of the fault suite (the stage itself is harness/fault_scene.py)."""

import json

import pytest

from harness.fault_scene import JOB_RULES, JOB_USER, NS, RUN_RULES, USER, Scene, hook_manifest
from harness.faults import Monitor


@pytest.fixture
def hook(cluster):
    """Namespace infra, certctl's service accounts (run and job, the chart's RBAC each) and
    ValidatingWebhookConfiguration hook (two webhooks, no caBundle yet)."""
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user(USER, RUN_RULES)
    cluster.add_user(JOB_USER, JOB_RULES)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(hook_manifest()))
    return cluster


@pytest.fixture
def scene(hook, certctl_binary, tmp_path):
    s = Scene(hook, certctl_binary, str(tmp_path))
    yield s
    s.stop_all()


@pytest.fixture
def monitor():
    """monitor(sidecar) starts a Monitor that is stopped when the test ends."""
    started = []

    def start(sidecar, interval=0.25):
        m = Monitor(sidecar, interval).start()
        started.append(m)
        return m

    yield start
    for m in started:
        m.stop()
