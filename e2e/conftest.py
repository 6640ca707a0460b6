"""pytest plugin for the end-to-end suite: emulator fixtures, a per-test time limit and
the longest tests first.

pytest-timeout is not a dependency, so each test (setup, call and teardown together)
runs under SIGALRM; E2E_TEST_TIMEOUT (seconds, default 60) changes the limit, and a test
whose scenario is long by nature says so with @pytest.mark.time_limit(SECONDS) (never below
the default). Under pytest-xdist each worker is a process of its own that runs its tests in
its main thread, so the alarm works there as it does in a serial run.

Order: with several workers (e2e/run.sh), a long test started last would run alone at the
end. So the tests run longest first, by the durations of the previous run (E2E_DURATIONS, a
JSON file kept outside the clone by e2e/run.sh; node IDs are relative to the repository, so
every clone shares it), and a test not timed yet by its time_limit. A machine's first run,
which has no such file, takes the committed e2e/durations-seed.json instead (the tests of a
second or more, written by `scripts/e2e-cost.py --seed`): in collection order the longest
tests could come last and run alone. Every worker sorts the
same file the same way, as pytest-xdist requires. Only the order changes; every test runs.

Hand-out: pytest-xdist's own `--dist load` gives each worker a quarter of its share at
once, as consecutive runs of the list; sorted longest first, that put the longest quarter
of the suite on one worker and left the other idle at the end (a stage half as long again
as the same tests in file order). `LongestFirst` below hands out one test at a time instead,
to the worker that finishes first, so the two workers end within about one short test of
each other.

The node tier (tests/node/) shares the one node a machine can have, so its tests go as one
block to one worker, in their order (`NODE_TIER`): they sort by their sum, and the worker
that gets the first gets them all.
"""

import atexit
import json
import os
import signal

import pytest

try:
    from xdist.scheduler import LoadScheduling
except ImportError:  # without pytest-xdist e2e/run.sh runs serially
    LoadScheduling = object

from harness import Cluster
from harness.real_cluster import RealCluster, WarmSpare
from harness.fixtures import *  # noqa: F401,F403

TEST_TIMEOUT = float(os.environ.get("E2E_TEST_TIMEOUT", "60"))


class TestTimeout(Exception):
    pass


DURATIONS = os.environ.get("E2E_DURATIONS", "")
NODE_TIER = "e2e/tests/node/"


def in_node_tier(nodeid):
    return nodeid.startswith(NODE_TIER)


SEED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "durations-seed.json")


def _read_durations(path):
    try:
        with open(path, encoding="utf-8") as f:
            durations = json.load(f)
    except (OSError, ValueError):
        return None
    return durations if isinstance(durations, dict) else None


def _previous_durations():
    durations = _read_durations(DURATIONS)
    if durations is None:
        durations = _read_durations(SEED)
    return durations or {}


def pytest_collection_modifyitems(session, config, items):
    if not DURATIONS:
        return
    previous = _previous_durations()

    def expected(item):
        if isinstance(previous.get(item.nodeid), (int, float)):
            return float(previous[item.nodeid])
        marker = item.get_closest_marker("time_limit")
        # Not timed yet: a long scenario (its own limit) before the rest, which keep their order.
        return float(marker.args[0]) / 2 if marker else 0.0

    node_tier = sum(expected(item) for item in items if in_node_tier(item.nodeid))
    # sort is stable: equal estimates keep the collection order, and the node tier together.
    items.sort(key=lambda item: node_tier if in_node_tier(item.nodeid) else expected(item),
               reverse=True)


PROGRESS = os.environ.get("E2E_PROGRESS", "")


class LongestFirst(LoadScheduling):
    """`--dist load` in the collection's order, one test at a time: each worker holds the
    test it runs and the one after it (a worker starts a test only once it knows the next,
    for teardown), and gets the next pending test whenever one ends."""

    QUEUED = 2

    def schedule(self):
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(self.node2collection.values())[0]
        self.pending[:] = range(len(self.collection))
        for _ in range(self.QUEUED):  # round robin: the longest tests go one to a worker
            for node in self.nodes:
                self._send_tests(node, 1)
        if not self.pending:
            for node in self.nodes:
                node.shutdown()

    def check_schedule(self, node, duration=0):
        if node.shutting_down:
            return
        if self.pending:
            missing = self.QUEUED - len(self.node2pending[node])
            if missing > 0:
                self._send_tests(node, missing)
        else:
            node.shutdown()

    def _send_tests(self, node, num):
        """The next `num` tests, where the node tier counts as one: all of it goes."""
        chosen = []
        while self.pending and len(chosen) < num:
            if in_node_tier(self.collection[self.pending[0]]):
                chosen += [i for i in self.pending if in_node_tier(self.collection[i])]
            else:
                chosen.append(self.pending[0])
            self.pending[:] = [i for i in self.pending if i not in chosen]
        if chosen:
            self.node2pending[node].extend(chosen)
            node.send_runtest_some(chosen)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "load":
        return LongestFirst(config, log)
    return None


class _Durations:
    """Adds up setup, call and teardown of each test (in the controller under xdist, which
    receives every worker's reports) and saves them when the session ends. With
    E2E_PROGRESS set, also appends a line to that file whenever a test ends: how many of
    how many have run and how many failed (scripts/test.sh repeats the last line every
    20 s)."""

    def __init__(self):
        self.seen = {}
        self.total = 0
        self.done = 0
        self.failed = set()

    def pytest_collection_finish(self, session):
        self.total = len(session.items)  # a serial run; under xdist the controller has none

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        self.total = len(ids)

    def pytest_runtest_logreport(self, report):
        self.seen[report.nodeid] = self.seen.get(report.nodeid, 0.0) + report.duration
        if report.failed:
            self.failed.add(report.nodeid)
        if report.when == "teardown":
            self.done += 1
            self._progress()

    def _progress(self):
        if not PROGRESS:
            return
        try:
            with open(PROGRESS, "a", encoding="utf-8") as f:
                f.write(f"{self.done} of {self.total or '?'} tests run, "
                        f"{len(self.failed)} failed\n")
        except OSError:
            pass

    def pytest_sessionfinish(self, session, exitstatus):
        if not self.seen or not DURATIONS:
            return
        durations = _previous_durations()
        durations.update({k: round(v, 2) for k, v in self.seen.items()})
        try:
            os.makedirs(os.path.dirname(os.path.abspath(DURATIONS)), exist_ok=True)
            tmp = f"{DURATIONS}.{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(durations, f, indent=0, sort_keys=True)
            os.replace(tmp, DURATIONS)
        except OSError:
            pass  # The order is an optimisation: a read-only cache changes no result.


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "time_limit(seconds): this test's own limit, for scenarios long by nature")
    config.addinivalue_line(
        "markers", "backends(*names): run the test on each API server named (emulator, real)")
    # The controller (or a serial run) records; xdist workers have workerinput.
    if (DURATIONS or PROGRESS) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Durations(), "e2e-durations")


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


BACKENDS = {"emulator": Cluster, "real": RealCluster}


def pytest_generate_tests(metafunc):
    """A test (or module, by pytestmark) marked backends("emulator", "real") runs once on
    each named backend; unmarked tests keep the emulator."""
    marker = metafunc.definition.get_closest_marker("backends")
    if marker and "cluster" in metafunc.fixturenames:
        unknown = set(marker.args) - set(BACKENDS)
        if unknown:
            raise ValueError(f"unknown backends {sorted(unknown)}; known: {sorted(BACKENDS)}")
        metafunc.parametrize("cluster", marker.args, indirect=True)


SPARES = WarmSpare()  # this process's next real control plane, started ahead
atexit.register(SPARES.close)  # also when the session ends some other way


def pytest_sessionfinish(session, exitstatus):
    SPARES.close()


@pytest.fixture
def cluster(request):
    """A fresh API server for one test: the emulator, or with the backends marker the real
    kube-apiserver and etcd of scripts/kube-up.sh (harness/real_cluster.py), one started
    while the test before ran."""
    if getattr(request, "param", "emulator") == "real":
        c = SPARES.take()
        try:
            yield c
        finally:
            c.stop()
        return
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
