"""Pytest fixtures built on the harness (imported into e2e/conftest.py)."""

import pytest

from .kubelet import JobRunner

__all__ = ["kubelet"]


@pytest.fixture
def kubelet(cluster, certctl_binary):
    """A JobRunner on the test's emulator that runs Jobs whose image is .../certctl:TAG
    (or whose command is certctl) with the certctl binary under test."""
    with JobRunner(cluster, image_map={"certctl": certctl_binary}) as runner:
        yield runner
