"""The service-account token rotated under a running `certctl run`, the old one revoked at once.

The kubelet rewrites a projected token before the old one expires; here the old token is
revoked in the emulator's policy the moment the new one is on disk, which is the hardest
case: certctl's next request with its cached token gets 401, and it must re-read the token
file, retry with the new token and carry on, without a restart, a failed pass or a readiness
blip. Two rotations: the file replaced by a rename, then the kubelet's layout (`token` a link
into `..data`, which is swapped to a new folder).
"""

import os
import time

import pytest

from harness.fault_scene import RUN_RULES, SECRET_PATH, USER
from harness.faults import logged_at, metric, requests_of, sidecar_metrics

REPAIR_LIMIT = 2.0


def replace_file(path, content):
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(content)
    os.replace(tmp, path)


def kubelet_swap(sa_dir, token):
    """Publishes `token` the way the kubelet updates a projected volume: a new timestamped
    folder, `..data` renamed over to point at it, `token` a relative link into `..data`."""
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()) + str(time.monotonic_ns())
    os.mkdir(os.path.join(sa_dir, stamp))
    with open(os.path.join(sa_dir, stamp, "token"), "w", encoding="utf-8") as f:
        f.write(token)
    staging = os.path.join(sa_dir, "..data_tmp")
    os.symlink(stamp, staging)
    os.replace(staging, os.path.join(sa_dir, "..data"))
    link = os.path.join(sa_dir, "token")
    if not os.path.islink(link):
        os.symlink("..data/token", f"{link}.tmp")
        os.replace(f"{link}.tmp", link)


def revoke(cluster, token):
    policy = cluster._admin("GET", "/_emulator/policy")
    assert token in policy["users"], "the token to revoke is unknown"
    del policy["users"][token]
    cluster.set_policy(policy)


@pytest.mark.time_limit(60)
def test_a_rotated_and_revoked_token_is_reread_without_a_restart(scene, monitor):
    cluster = scene.cluster
    sidecar, ca = scene.ready_sidecar()
    pid = sidecar.proc.pid
    sa_dir = sidecar.env["CERTCTL_SERVICEACCOUNT_DIR"]
    failed_passes = metric(sidecar_metrics(sidecar), "certctl_reconcile_total", 0,
                           result="error")
    watching = monitor(sidecar)

    for round_, publish in enumerate((lambda t: replace_file(os.path.join(sa_dir, "token"), t),
                                      lambda t: kubelet_swap(sa_dir, t))):
        old = cluster.token(USER)
        new = cluster.add_user(USER, RUN_RULES)  # a second token of the same account
        publish(new)
        with open(os.path.join(sa_dir, "token"), encoding="utf-8") as f:
            assert f.read() == new
        revoke(cluster, old)
        assert cluster.api("GET", SECRET_PATH, token=old).status == 401
        assert cluster.api("GET", SECRET_PATH, token=new).status == 200
        cluster.reset_request_log()
        since = time.time()

        # The watches opened with the old token still stream (as on a real API server):
        # the blank is seen at once, and the pass's first request finds the token revoked.
        scene.blank(round_)
        took = scene.wait_repaired(ca, sidecar)
        print(f"rotation {round_ + 1}: repaired {took:.2f}s after the blank")
        assert took < REPAIR_LIMIT, took

        # Watches started again must authenticate with the new token too.
        dropped = time.time()
        cluster.drop_watches()
        scene.wait_watching(sidecar, since=dropped)

        log = requests_of(cluster, since=since)
        summary = [(round(logged_at(e) - since, 2), e["user"], e["verb"], e["resource"],
                    e["code"]) for e in log]
        print("\n".join(map(str, summary)))
        refused = [e for e in log if e["code"] == 401]
        # One refusal per request in flight when the token went stale, then never again.
        assert 1 <= len(refused) <= 3, summary
        last_refusal = max(logged_at(e) for e in refused)
        later = [e for e in log if logged_at(e) > last_refusal]
        assert later and all(e["user"] in (USER, "admin") and e["code"] < 400 for e in later), \
            summary
        assert sidecar.proc.pid == pid and sidecar.alive()

    watching.stop()
    watching.check(ready=True)
    assert metric(sidecar_metrics(sidecar), "certctl_reconcile_total", 0,
                  result="error") == failed_passes
    assert "reconcile failed" not in sidecar.log()
    scene.assert_converged(ca, sidecar)
