"""The Secret edited by someone else while certctl is writing it.

certctl's update of the Secret is held for 2 s in the emulator (a latency fault on its PUT),
and in that window the test writes the Secret itself: once a harmless edit (a label and an
annotation), once a breaking one (tls.key emptied). certctl's held update carries the
resourceVersion it read, so it must be refused (409) and certctl must start over from a
fresh read. Every version of the Secret the server stored is recorded through a watch:
each is a valid pair issued by the one CA, or the test's own write; the CA is never
replaced; the test's harmless edit survives certctl's next write.
"""

import subprocess
import time

import pytest

from harness.fault_scene import HOST, JOB_USER, NS, SECRET, SECRET_PATH, USER
from harness.faults import (SecretRecorder, decoded, metric, pair_problems, pending_faults,
                            requests_of, sidecar_metrics, user_fault)

HOLD = 2.0   # seconds certctl's PUT of the Secret is held before the server handles it
ROTATE = "certctl.io/rotate"


def hold_next_secret_put(cluster, user):
    user_fault(cluster, user, method="PUT", path=f"/secrets/{SECRET}$", latency=HOLD)


def wait_held(scene, what, watch=()):
    """Until the held PUT has been received (the fault is used up): it is now waiting."""
    scene.wait_for(lambda: pending_faults(scene.cluster) == [], what, watch=watch)


def check_versions(recorder, ca, ca_key, own):
    """Every stored version: the test's own write (resourceVersion in `own`) or a valid pair
    from the CA `ca`; never another CA. Returns the resourceVersions certctl stored."""
    theirs = []
    for rv, kind, obj in recorder.versions:
        data = decoded(obj)
        assert kind in ("ADDED", "MODIFIED"), (rv, kind)
        assert data.get("ca.crt") == ca, f"version {rv}: another CA"
        assert data.get("ca.key") == ca_key, f"version {rv}: another CA key"
        if rv in own:
            continue
        problems = pair_problems(data, HOST)
        assert problems == [], f"version {rv} stored by certctl is not a valid pair: {problems}"
        theirs.append(rv)
    return theirs


@pytest.mark.time_limit(90)
def test_run_rewrites_from_a_fresh_read_when_the_secret_changes_under_it(scene, monitor):
    cluster = scene.cluster
    sidecar, ca = scene.ready_sidecar()
    first = scene.get(SECRET_PATH)
    ca_key = decoded(first)["ca.key"]
    recorder = SecretRecorder(cluster, NS, SECRET, first["metadata"]["resourceVersion"])
    watching = monitor(sidecar)
    cluster.reset_request_log()
    since = time.time()
    own = set()

    # 1. A leaf rotation is asked for; certctl's write is held; the test adds a label and an
    #    annotation meanwhile.
    leaf_before = decoded(first)["tls.crt"]
    hold_next_secret_put(cluster, USER)
    own.add(int(scene.patch_secret({"metadata": {"annotations": {ROTATE: "leaf"}}})
                ["metadata"]["resourceVersion"]))
    wait_held(scene, "certctl's update of the Secret (round 1)", [sidecar])
    edited = scene.patch_secret({"metadata": {"labels": {"team": "payments"},
                                              "annotations": {"example.com/owner": "test"}}})
    own.add(int(edited["metadata"]["resourceVersion"]))

    def rotated():
        secret = scene.get(SECRET_PATH)
        annotations = secret["metadata"].get("annotations", {})
        return (ROTATE not in annotations and decoded(secret)["tls.crt"] != leaf_before
                and secret)

    after_one = scene.wait_for(rotated, "the leaf re-issued after the conflict",
                               watch=[sidecar])
    assert after_one["metadata"]["labels"]["team"] == "payments", after_one["metadata"]
    assert after_one["metadata"]["annotations"]["example.com/owner"] == "test"

    # 2. Again, but the test's write breaks the pair: tls.key emptied (a kubernetes.io/tls
    #    Secret cannot lose the key itself). certctl must re-issue
    #    the leaf from the CA it has, not start a new CA.
    leaf_before = decoded(after_one)["tls.crt"]
    hold_next_secret_put(cluster, USER)
    own.add(int(scene.patch_secret({"metadata": {"annotations": {ROTATE: "leaf"}}})
                ["metadata"]["resourceVersion"]))
    wait_held(scene, "certctl's update of the Secret (round 2)", [sidecar])
    own.add(int(scene.patch_secret({"data": {"tls.key": ""}})["metadata"]["resourceVersion"]))

    def repaired():
        secret = rotated()
        return secret if secret and decoded(secret).get("tls.key") else None

    after_two = scene.wait_for(repaired, "the pair repaired after the breaking write",
                               watch=[sidecar])
    assert after_two["metadata"]["labels"]["team"] == "payments"

    data = scene.assert_converged(ca, sidecar)
    recorder.wait_for(int(scene.get(SECRET_PATH)["metadata"]["resourceVersion"]))
    recorder.stop()
    theirs = check_versions(recorder, ca, ca_key, own)
    print(f"versions: {[(v[0], 'test' if v[0] in own else 'certctl') for v in recorder.versions]}")

    # The request log agrees: certctl's updates that succeeded are the versions it stored,
    # and each round cost it at least one 409.
    puts = [(e["code"]) for e in requests_of(cluster, USER, since=since, verb="update",
                                             resource="secrets")]
    print(f"certctl's updates of the Secret: {puts}")
    assert puts.count(409) >= 2, puts
    assert puts.count(200) == len(theirs) >= 2, (puts, theirs)
    assert data["ca.crt"] == ca and data["ca.key"] == ca_key
    watching.stop()
    samples = watching.check()
    assert samples[-1].readyz == 200
    values = sidecar_metrics(sidecar)
    assert metric(values, "certctl_rotations_total", 0, kind="ca") == 0
    assert metric(values, "certctl_rotations_total", 0, kind="leaf") == len(theirs)


@pytest.mark.time_limit(60)
def test_job_rewrites_from_a_fresh_read_when_the_secret_changes_under_it(scene):
    cluster = scene.cluster
    manifest = subprocess.run([scene.binary, "generate", "--service", "hook", "-n", NS,
                               "--cert-validity", "20d", "-o", "secret-json"],
                              capture_output=True, text=True, check=True, timeout=20).stdout
    cluster.kubectl("apply", "-f", "-", input=manifest)  # its leaf is due for renewal
    first = scene.get(SECRET_PATH)
    data = decoded(first)
    recorder = SecretRecorder(cluster, NS, SECRET, first["metadata"]["resourceVersion"])
    cluster.reset_request_log()
    hold_next_secret_put(cluster, JOB_USER)
    job = scene.job_process("--wait-for-targets", "30s")
    try:
        wait_held(scene, "the job's update of the Secret")
        edited = scene.patch_secret({"metadata": {"labels": {"team": "payments"}}})
        out, err = job.communicate(timeout=40)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    print(err)
    assert job.returncode == 0, err
    final = scene.get(SECRET_PATH)
    recorder.wait_for(int(final["metadata"]["resourceVersion"]))
    recorder.stop()
    theirs = check_versions(recorder, data["ca.crt"], data["ca.key"],
                            {int(edited["metadata"]["resourceVersion"])})
    puts = [e["code"] for e in requests_of(cluster, JOB_USER, verb="update",
                                           resource="secrets")]
    assert puts == [409, 200], puts
    assert len(theirs) == 1
    assert final["metadata"]["labels"]["team"] == "payments"
    assert decoded(final)["tls.crt"] != data["tls.crt"]
    scene.assert_converged(data["ca.crt"])
