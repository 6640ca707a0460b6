"""Fixtures for the image tests. What is missing is a skip that names it, never a failure:
a machine without podman, or where podman cannot run containers, still runs
test_image_static.py, which checks the executable the image holds without a container.
"""

import os

import pytest

from harness.image import IMAGE, STATIC_BINARY, Podman, image_problem, run_problem


@pytest.fixture
def static_binary():
    """build/static/certctl, or a skip when it was not built."""
    if not os.path.isfile(STATIC_BINARY):
        pytest.skip(f"{STATIC_BINARY} not built (scripts/build-static.sh)")
    return STATIC_BINARY


@pytest.fixture
def image():
    """The image's name, once podman can inspect it (no container is run)."""
    problem = image_problem()
    if problem:
        pytest.skip(problem)
    return IMAGE


@pytest.fixture
def podman():
    """A Podman runner for the image, once podman has run it here (else a skip naming why);
    every container it started is removed afterwards."""
    problem = run_problem()
    if problem:
        pytest.skip(problem)
    runner = Podman(IMAGE)
    yield runner
    runner.cleanup()
