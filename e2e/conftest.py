"""pytest plugin for the end-to-end suite: emulator fixtures and a per-test time limit.

pytest-timeout is not a dependency, so each test (setup, call and teardown together)
runs under SIGALRM; E2E_TEST_TIMEOUT (seconds, default 60) changes the limit, and a test
whose scenario is long by nature says so with @pytest.mark.time_limit(SECONDS) (never below
the default).
"""

import os
import signal

import pytest

from harness import Cluster
from harness.fixtures import *  # noqa: F401,F403

TEST_TIMEOUT = float(os.environ.get("E2E_TEST_TIMEOUT", "60"))


class TestTimeout(Exception):
    pass


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "time_limit(seconds): this test's own limit, for scenarios long by nature")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    marker = item.get_closest_marker("time_limit")
    limit = max(TEST_TIMEOUT, float(marker.args[0])) if marker else TEST_TIMEOUT

    def expire(signum, frame):
        raise TestTimeout(f"{item.nodeid} exceeded {limit:g}s (E2E_TEST_TIMEOUT or time_limit)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def cluster():
    """A fresh emulator for one test."""
    with Cluster() as c:
        yield c


@pytest.fixture
def fast_bookmarks_cluster():
    """An emulator that sends watch bookmarks every 0.2 s instead of every minute."""
    with Cluster(bookmark_interval=0.2) as c:
        yield c


@pytest.fixture
def certctl_binary():
    """Path of the certctl binary under test (e2e/run.sh exports CERTCTL_BINARY)."""
    path = os.environ.get("CERTCTL_BINARY", "build/ci/certctl")
    if not os.path.isfile(path):
        pytest.fail(f"certctl binary not built: {path} (build it, or pass its path to e2e/run.sh)")
    return os.path.abspath(path)
