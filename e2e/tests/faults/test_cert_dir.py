"""The certificate folder turned read-only (a volume remounted read-only, a full or broken
disk) while certctl has a new pair to put there, then writable again.

While it is read-only: not ready, with an error naming the folder (/readyz, certctl_ready,
the ready file agree), /healthz still 200, the process up, the webhook's current files and
`..data` untouched. The new pair is the leaf re-issue the test asked for (`certctl.io/rotate:
leaf`); it changes neither the CA nor any caBundle. Once writable: the new pair lands in the
folder as a set, ready again, and nothing else was written — but the re-issue, like every
write, is logged, counted and told as an Event.
"""

import os
import time

import pytest

from harness.fault_scene import NS, SECRET, USER
from harness.faults import (metric, read_only_folder, requests_of, sidecar_metrics,
                            successful_writes)

READ_ONLY = 6.0   # seconds the folder stays read-only once certctl has failed on it


def set_folders(cert_dir):
    return sorted(n for n in os.listdir(cert_dir) if n.startswith("..") and n[2:3].isdigit())


@pytest.mark.time_limit(90)
def test_read_only_folder_is_not_ready_naming_it_then_recovers(scene, monitor):
    cluster = scene.cluster
    sidecar, ca = scene.ready_sidecar()
    before = scene.secret_data()
    served = scene.folder(sidecar)
    data_link = os.readlink(os.path.join(sidecar.cert_dir, "..data"))
    sets = set_folders(sidecar.cert_dir)
    watching = monitor(sidecar)
    cluster.reset_request_log()
    since = time.time()

    with read_only_folder(sidecar.cert_dir):
        scene.patch_secret({"metadata": {"annotations": {"certctl.io/rotate": "leaf"}}})

        def unready_naming_the_folder():
            status, body = sidecar.readyz()
            return status == 503 and sidecar.cert_dir in body and body

        body = scene.wait_for(unready_naming_the_folder, "/readyz 503 naming the folder",
                              watch=[sidecar])
        print(f"while read-only: {body.strip()}")
        assert not os.path.exists(sidecar.ready_file)
        assert metric(sidecar_metrics(sidecar), "certctl_ready") == 0
        # The Secret got its new leaf (what the test asked for), from the same CA.
        reissued = scene.secret_data()
        assert reissued["ca.crt"] == ca and reissued["ca.key"] == before["ca.key"]
        assert reissued["tls.crt"] != before["tls.crt"]
        end = time.monotonic() + READ_ONLY
        while time.monotonic() < end:  # the fault's duration; the monitor keeps sampling
            assert sidecar.alive(), sidecar.describe()
            assert sidecar.healthz() == (200, "ok\n")
            # The webhook's files are untouched, and no half-made set was left behind.
            assert scene.folder(sidecar) == served
            assert os.readlink(os.path.join(sidecar.cert_dir, "..data")) == data_link
            assert set_folders(sidecar.cert_dir) == sets
            time.sleep(0.2)
        assert sidecar.readyz()[0] == 503
    writable_at = time.monotonic()

    wanted = {k: reissued[k] for k in ("tls.crt", "tls.key", "ca.crt")}
    scene.wait_for(lambda: scene.folder(sidecar) == wanted, "the new pair in the folder",
                   bound=70, watch=[sidecar])
    scene.wait_ready(sidecar)
    print(f"ready {time.monotonic() - writable_at:.1f}s after the folder became writable")
    assert os.readlink(os.path.join(sidecar.cert_dir, "..data")) != data_link
    scene.wait_for(lambda: len(set_folders(sidecar.cert_dir)) == 1,
                   "the replaced set removed", watch=[sidecar])

    watching.stop()
    samples = watching.check()
    assert any(s.readyz == 503 for s in samples) and samples[-1].readyz == 200
    assert scene.secret_data() == reissued
    scene.assert_converged(ca, sidecar)

    # Nothing else touched: one write of the Secret (the re-issue), no caBundle written.
    writes = successful_writes(requests_of(cluster, USER, since=since))
    assert writes == [("update", "secrets", SECRET, 200)], writes
    # ... and that write is accounted for like any other: a log line, the counters, an Event.
    log = sidecar.log()
    values = sidecar_metrics(sidecar)
    events = scene.get(f"/api/v1/namespaces/{NS}/events")["items"]
    accounted = {
        "log line": f"leaf-reissued: secret/{NS}/{SECRET}" in log,
        "certctl_rotations_total{kind=leaf}": metric(values, "certctl_rotations_total", 0,
                                                     kind="leaf"),
        "certctl_writes_total{kind=secret}": metric(values, "certctl_writes_total", 0,
                                                    kind="secret"),
        "Secret events": sorted(e["reason"] for e in events
                                if e["involvedObject"].get("kind") == "Secret"),
    }
    assert accounted == {"log line": True, "certctl_rotations_total{kind=leaf}": 1,
                         "certctl_writes_total{kind=secret}": 2,   # created, re-issued
                         "Secret events": ["Created", "LeafReissued"]}, (accounted, log)
