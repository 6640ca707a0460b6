"""The Lease taken from the leader by someone else (written into it by the test, as a replica
with a skewed view or an operator would), while certctl runs with --leader-elect.

certctl must notice at its next renewal, stop writing (the request log shows not one
successful write of any kind while the thief holds the Lease, even with a caBundle to repair),
become a follower (certctl_leader 0, not ready while the caBundle it may not repair is blank),
not take the Lease back while the thief renews it, take it over only once the thief's record
has not changed for the lease duration (15 s on certctl's own clock), and at once when the
thief releases it; then repair as the leader.
"""

import datetime
import time

import pytest

from harness.fault_scene import LEASE_PATH, USER
from harness.faults import metric, requests_of, sidecar_metrics, successful_writes

LEASE_DURATION = 15.0
RETRY_PERIOD = 2.0          # client-go's, as certctl uses them
CANDIDATE_WAIT = RETRY_PERIOD * 2.2   # a candidate retries every 2 s plus up to 120% jitter
THIEF = "thief"


def micro_time():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def write_lease(cluster, **spec_changes):
    """Reads the Lease, applies `spec_changes` (None removes a field), writes it back."""
    lease = cluster.api("GET", LEASE_PATH).json()
    spec = lease["spec"]
    for key, value in spec_changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    resp = cluster.api("PUT", LEASE_PATH, lease)
    assert resp.status == 200, resp
    return resp.json()


def steal(cluster):
    now = micro_time()
    transitions = cluster.api("GET", LEASE_PATH).json()["spec"].get("leaseTransitions", 0)
    return write_lease(cluster, holderIdentity=THIEF, leaseDurationSeconds=int(LEASE_DURATION),
                       acquireTime=now, renewTime=now, leaseTransitions=transitions + 1)


def holder(scene):
    return scene.get(LEASE_PATH)["spec"].get("holderIdentity")


def leading(sidecar):
    values = sidecar_metrics(sidecar)
    return values is not None and metric(values, "certctl_leader") == 1


@pytest.mark.time_limit(120)
def test_a_stolen_lease_stops_every_write_until_the_thief_expires_or_releases(scene, monitor):
    cluster = scene.cluster
    sidecar = scene.start("a", "--log-level", "debug", "--leader-elect", "--identity", "a")
    scene.wait_ready(sidecar)
    ca = scene.secret_data()["ca.crt"]
    before = scene.secret_data()
    assert holder(scene) == "a" and leading(sidecar)
    watching = monitor(sidecar)

    # 1. Stolen: noticed at the next renewal attempt; no write from then on.
    stolen_at = time.time()
    steal(cluster)
    scene.wait_for(lambda: not leading(sidecar), "certctl to stop leading", watch=[sidecar])
    noticed = time.time() - stolen_at
    print(f"stopped leading {noticed:.2f}s after the theft")
    assert noticed < RETRY_PERIOD + 2.0, noticed
    assert f"stopped leading; following {THIEF}" in sidecar.log()

    # 2. The thief renews while a caBundle is blank: certctl, a follower, must leave it and
    #    say it is not ready because of it.
    scene.blank(0)

    def unready_waiting_for_the_leader():
        status, body = sidecar.readyz()
        return status == 503 and "waiting for the leader" in body

    scene.wait_for(unready_waiting_for_the_leader, "/readyz 503 waiting for the leader",
                   watch=[sidecar])
    for _ in range(3):  # the thief's renewals, every retry period, for a few of them
        renew_until = time.monotonic() + RETRY_PERIOD
        while time.monotonic() < renew_until:
            assert sidecar.alive(), sidecar.describe()
            time.sleep(0.1)
        write_lease(cluster, renewTime=micro_time())
        assert holder(scene) == THIEF
    silent_at = time.time()  # the thief's last renewal: now it goes quiet
    assert not scene.holds(ca), "a follower repaired the caBundle"

    # 3. Expired: certctl takes over no sooner than a lease duration after the thief's last
    #    renewal, and not much later.
    scene.wait_for(lambda: holder(scene) == "a", "certctl to take the expired Lease",
                   bound=LEASE_DURATION + 3 * CANDIDATE_WAIT, watch=[sidecar])
    took_over = time.time() - silent_at
    print(f"took the expired Lease over {took_over:.2f}s after the thief's last renewal")
    # Not before: the lease duration runs from when certctl saw the last renewal, which is
    # after it was written. Not much after: it sees the renewal at its next attempt, and
    # takes over at its first attempt once the duration has passed (each up to 4.4 s away).
    assert LEASE_DURATION - 0.5 <= took_over <= LEASE_DURATION + 2 * CANDIDATE_WAIT + 1.0, \
        took_over
    while_stolen = requests_of(cluster, USER, since=stolen_at, until=silent_at)
    assert successful_writes(while_stolen, events=True) == [], while_stolen
    writes_before_takeover = [
        e for e in requests_of(cluster, USER, since=stolen_at)
        if e["verb"] in ("create", "update", "patch", "delete") and e["code"] < 300]
    first = writes_before_takeover[0] if writes_before_takeover else None
    assert first is not None and first["resource"] == "leases", writes_before_takeover[:3]
    scene.wait_repaired(ca, sidecar)
    scene.wait_ready(sidecar)
    assert leading(sidecar)

    # 4. Stolen again, then released by the thief (holder removed, as a replica that stops
    #    does): certctl takes over within a retry period or two, not a lease duration.
    steal(cluster)
    scene.wait_for(lambda: not leading(sidecar), "certctl to stop leading again",
                   watch=[sidecar])
    released_at = time.time()
    write_lease(cluster, holderIdentity=None, leaseDurationSeconds=1, renewTime=micro_time())
    scene.wait_for(lambda: holder(scene) == "a", "certctl to take the released Lease",
                   bound=LEASE_DURATION, watch=[sidecar])
    took_over = time.time() - released_at
    print(f"took the released Lease over {took_over:.2f}s after the release")
    assert took_over <= CANDIDATE_WAIT + 1.0, took_over
    scene.wait_for(lambda: leading(sidecar), "certctl_leader 1", watch=[sidecar])
    scene.blank(1)
    assert scene.wait_repaired(ca, sidecar) < 2.0

    watching.stop()
    samples = watching.check()
    assert any(s.readyz == 503 for s in samples) and samples[-1].readyz == 200
    assert any(s.leader == 0 for s in samples) and samples[-1].leader == 1, \
        (samples[-8:], sidecar.log())
    assert scene.secret_data() == before
    scene.assert_converged(ca, sidecar)
    log = sidecar.log()
    assert log.count("became the leader (a)") == 3, log
