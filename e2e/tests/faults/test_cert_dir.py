"""The certificate folder turned read-only (a volume remounted read-only, a full or broken
disk) while certctl has a new pair to put there, then writable again.

The new pair is the leaf re-issue the test asked for (`certctl.io/rotate: leaf`); it changes
neither the CA nor any caBundle, so the set the folder still holds goes on serving: while the
folder is read-only certctl stays ready (/readyz, certctl_ready and the ready file agree;
leaving the Service would fail calls the webhook answers rightly) and warns, naming the
folder; /healthz stays 200, the webhook's current files and `..data` are untouched. Once
writable: the new pair lands in the folder as a set, and nothing else was written — but the
re-issue, like every write, is logged, counted and told as an Event. (A set the Secret's CA
bundle no longer trusts, or one that expired, makes it not ready: tests/unit/loop.)
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
def test_read_only_folder_keeps_serving_its_set_warns_naming_it_then_recovers(scene, monitor):
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

        def warning_naming_the_folder():
            lines = [line for line in sidecar.log().splitlines()
                     if "warning" in line and sidecar.cert_dir in line]
            return lines and lines[0]

        line = scene.wait_for(warning_naming_the_folder, "a warning naming the folder",
                              watch=[sidecar])
        print(f"while read-only: {line.strip()}")
        assert "goes on serving the set the folder holds" in line, line
        assert sidecar.readyz()[0] == 200
        assert os.path.exists(sidecar.ready_file)
        assert metric(sidecar_metrics(sidecar), "certctl_ready") == 1
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
        assert sidecar.readyz()[0] == 200
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
    watching.check(ready=True)  # ready in every sample, the read-only time included
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
