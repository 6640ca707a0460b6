"""An API server that answers 500, 503 or 429 (with and without Retry-After) to every request
of certctl for 15 s, or answers everything 2 s late.

`certctl run` must stay up, stay ready (an unreachable API changes neither the files served
nor the bundles trusted), back off instead of hammering the API (the requests of the outage
are counted and timed: no two of a kind back to back, no more than backoff allows, and with
a Retry-After none sooner than it asks), and converge once the API is back: a caBundle
blanked during the outage, which it could not even see, is repaired after it.
`certctl job` started in the middle of an outage keeps trying within its deadline and
succeeds once the API answers again.

The faults hit certctl's requests only (the emulator's per-user faults), so the test's own
writes and reads go through meanwhile.
"""

import time

import pytest

from harness.fault_scene import HOST, JOB_USER, USER
from harness.faults import (logged_at, metric, pair_problems, pending_faults, requests_of,
                            sidecar_metrics, successful_writes, user_fault)

OUTAGE = 15.0       # seconds every request of certctl fails
JOB_OUTAGE = 10.0
AFTER = 60.0        # bound on converging once the API is back (backoff is capped at 60 s)
LATENCY = 2.0


def ride_out(sidecar, seconds):
    """The fault's own duration; the process must be up all along (the monitor samples it
    too)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert sidecar.alive(), sidecar.describe()
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))


def smallest_gaps(entries):
    """{(verb, resource): the smallest time between two consecutive requests of that kind}
    (request-log entries with "_at"); a kind seen once is left out."""
    times = {}
    for e in entries:
        times.setdefault((e["verb"], e["resource"]), []).append(e["_at"])
    return {kind: round(min(b - a for a, b in zip(sorted(ts), sorted(ts)[1:])), 3)
            for kind, ts in times.items() if len(ts) > 1}


def with_times(entries):
    for e in entries:
        e["_at"] = logged_at(e)
    return entries


@pytest.mark.time_limit(110)
@pytest.mark.parametrize("status, retry_after", [(500, None), (503, None), (429, None),
                                                 (429, 3)],
                         ids=["500", "503", "429", "429-retry-after-3"])
def test_run_rides_out_15s_of_errors_and_repairs_what_changed(scene, monitor, status,
                                                             retry_after):
    cluster = scene.cluster
    sidecar, ca = scene.ready_sidecar()
    before = scene.secret_data()
    watching = monitor(sidecar)

    cluster.reset_request_log()
    started = time.time()
    user_fault(cluster, USER, status=status, retry_after=retry_after, count=10**6)
    cluster.drop_watches()  # the watches must come back through the outage as well
    scene.blank(0)          # unseen by certctl: its watches are down, its reads refused
    ride_out(sidecar, OUTAGE - (time.time() - started))
    ended = time.time()  # before the faults go (see below)
    cluster.clear_faults()

    took = scene.wait_repaired(ca, sidecar, bound=AFTER)
    print(f"HTTP {status} retry-after={retry_after}: repaired {took:.1f}s after the outage")
    scene.wait_ready(sidecar)
    watching.stop()
    samples = watching.check(ready=True)
    print(f"{len(samples)} samples, /readyz 200 in each")

    # During the outage: every request refused, and few of them.
    during = with_times(requests_of(cluster, USER, since=started, until=ended))
    codes = {e["code"] for e in during}
    assert codes == {status}, sorted((e["verb"], e["resource"], e["code"]) for e in during)
    print(f"{len(during)} requests in {ended - started:.1f}s:")
    for e in during:
        print(f"  {e['_at'] - started:6.2f} {e['verb']:6} {e['resource']}")
    gaps = smallest_gaps(during)
    print(f"smallest gap between two requests of the same kind: {gaps}")
    if retry_after is None:
        # Three loops (passes, two watches), each request tried three times at least 250 ms
        # and 500 ms apart, the loops pausing at least 0.5 s doubling (watches) and 0.25 s
        # doubling (passes): at most 5 + 5 + 6 bursts of 3 in 15 s, 48 requests. Loops that
        # kept their first pause would send over a hundred; a hot loop, thousands.
        assert len(during) <= 54, len(during)
        assert min(gaps.values()) >= 0.15, gaps
    else:
        # Every retry waits the Retry-After, and a watch never resumes sooner than that.
        assert len(during) <= 3.5 * OUTAGE / retry_after + 9, len(during)
        assert all(gap >= retry_after - 0.1 for kind, gap in gaps.items()
                   if kind[0] == "watch"), gaps
        log = sidecar.log()
        assert f"Retry-After {retry_after}s" in log, log[-3000:]
    assert sidecar.alive()

    # Nothing but the repair was written; the pair and the CA are the ones from before.
    assert scene.secret_writes(since=started) == []
    assert scene.secret_data() == before
    values = sidecar_metrics(sidecar)
    assert metric(values, "certctl_api_requests_total", 0, method="GET",
                  code=str(status)) >= len(during)
    scene.assert_converged(ca, sidecar)

    # Once the watches are back, a new blank is repaired as fast as ever.
    scene.wait_watching(sidecar, since=ended)
    scene.blank(1)
    assert scene.wait_repaired(ca, sidecar) < 2.0


@pytest.mark.time_limit(90)
@pytest.mark.parametrize("status, retry_after", [(503, None), (429, 2)],
                         ids=["503", "429-retry-after-2"])
def test_job_started_during_an_outage_succeeds_after_it(scene, status, retry_after):
    """A fresh install whose hook runs while the API refuses it: the job keeps trying
    (within --wait-for-targets) and creates exactly one Secret once the API is back."""
    cluster = scene.cluster
    cluster.reset_request_log()
    started = time.time()
    user_fault(cluster, JOB_USER, status=status, retry_after=retry_after, count=10**6)
    job = scene.job_process("--wait-for-targets", "2m")
    try:
        end = time.monotonic() + JOB_OUTAGE
        while time.monotonic() < end:
            assert job.poll() is None, f"the job gave up during the outage: {job.communicate()}"
            time.sleep(0.2)
        # Taken before the faults go: a request answered after clear_faults() but before a
        # later timestamp would count as one of the outage's.
        ended = time.time()
        cluster.clear_faults()
        _, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    finished = time.time()
    print(f"job exit {job.returncode} {finished - ended:.1f}s after the outage\n{err}")
    assert job.returncode == 0, err

    during = requests_of(cluster, JOB_USER, since=started, until=ended)
    assert {e["code"] for e in during} == {status}, during
    print(f"{len(during)} requests during {ended - started:.1f}s of HTTP {status}")
    # One request at a time, 250 ms doubling to 5 s (or the Retry-After) between tries.
    bound = JOB_OUTAGE / retry_after + 2 if retry_after else 12
    assert len(during) <= bound, [(e["verb"], e["resource"]) for e in during]
    writes = successful_writes(requests_of(cluster, JOB_USER))
    assert [w for w in writes if w[1] == "secrets"] == [("create", "secrets", "", 201)], writes
    data = scene.secret_data()
    assert pair_problems(data, HOST) == []
    scene.assert_converged(data["ca.crt"])
    if retry_after:
        assert f"Retry-After {retry_after}s" in err, err


@pytest.mark.time_limit(90)
def test_run_converges_with_every_request_2s_late(scene, monitor):
    cluster = scene.cluster
    sidecar, ca = scene.ready_sidecar()
    before = scene.secret_data()
    watching = monitor(sidecar)
    cluster.reset_request_log()
    started = time.monotonic()
    since = time.time()
    user_fault(cluster, USER, latency=LATENCY, count=10**6)
    cluster.drop_watches()  # the re-watches are late too
    scene.blank(1)
    took = scene.wait_repaired(ca, sidecar, bound=40)
    print(f"repaired {took:.1f}s after the blank, every request {LATENCY:g}s late")
    # Resuming the watch, reading the Secret and the target, patching: each 2 s late.
    assert took < 8 * LATENCY, took
    assert pending_faults(cluster), "the latency ended early"
    ride_out(sidecar, 15.0 - (time.monotonic() - started))
    cluster.clear_faults()
    watching.stop()
    watching.check(ready=True)

    during = requests_of(cluster, USER, since=since)
    assert all(e["code"] < 400 for e in during), [(e["verb"], e["code"]) for e in during]
    assert "reconcile failed" not in sidecar.log()
    assert scene.secret_writes(since=since) == []
    assert scene.secret_data() == before
    scene.assert_converged(ca, sidecar)


@pytest.mark.time_limit(90)
def test_job_succeeds_with_every_request_2s_late(scene):
    cluster = scene.cluster
    user_fault(cluster, JOB_USER, latency=LATENCY, count=10**6)
    started = time.monotonic()
    result = scene.job("--wait-for-targets", "2m", timeout=80)
    took = time.monotonic() - started
    print(f"job exit {result.returncode} after {took:.1f}s\n{result.stderr}")
    assert result.returncode == 0, result.stderr
    requests = requests_of(cluster, JOB_USER)
    assert took >= LATENCY * len(requests) * 0.9, (took, len(requests))
    # Nothing failed: the one 404 is the Secret that did not exist yet.
    failed = [(e["verb"], e["resource"], e["code"]) for e in requests if e["code"] >= 400]
    assert failed == [("get", "secrets", 404)], failed
    writes = successful_writes(requests)
    assert [w for w in writes if w[1] == "secrets"] == [("create", "secrets", "", 201)], writes
    scene.assert_converged(scene.secret_data()["ca.crt"])
