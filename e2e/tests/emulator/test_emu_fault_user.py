"""Faults restricted to one user (`"user"` in POST /_emulator/faults): only requests
authenticated as that user are slowed or failed, everyone else's pass untouched, and the
fault's uses are spent on that user's requests alone. The fault suite (tests/faults/) needs
this to break certctl's requests while the test itself keeps reading and writing."""

import time

import pytest

from harness import EmulatorError

SECRETS = "/api/v1/namespaces/default/secrets"
OTHER = "system:serviceaccount:default:other"
ALL_SECRETS = [{"verbs": ["*"], "apiGroups": [""], "resources": ["secrets"]}]


def fault(cluster, **spec):
    return cluster._admin("POST", "/_emulator/faults", spec)


def pending(cluster):
    return cluster._admin("GET", "/_emulator/faults")["faults"]


def secret(name):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "stringData": {"k": "v"}}


def test_a_fault_for_one_user_spares_the_others(cluster):
    cluster.add_user(OTHER, ALL_SECRETS)
    assert cluster.api("POST", SECRETS, secret("s")).status == 201
    made = fault(cluster, method="*", path="/secrets", status=503, count=2, user=OTHER)
    assert made["user"] == OTHER and made["count"] == 2

    # The admin's requests are not matched and do not spend the fault.
    assert [cluster.api("GET", SECRETS + "/s").status for _ in range(3)] == [200] * 3
    assert cluster.api("PATCH", SECRETS + "/s", {"metadata": {"labels": {"a": "b"}}},
                       content_type="application/merge-patch+json").status == 200
    assert [f["count"] for f in pending(cluster)] == [2]

    # The user's are, until the count is spent.
    statuses = [cluster.api("GET", SECRETS + "/s", user=OTHER).status for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert pending(cluster) == []
    log = [(e["user"], e["code"]) for e in cluster.request_log()["requests"]
           if e["name"] == "s" and e["verb"] == "get"]
    assert log[-3:] == [(OTHER, 503), (OTHER, 503), (OTHER, 200)], log


def test_latency_and_watch_faults_for_one_user(cluster):
    cluster.add_user(OTHER, ALL_SECRETS)
    fault(cluster, method="GET", path="/secrets", latency=0.6, count=10, user=OTHER)
    started = time.monotonic()
    assert cluster.api("GET", SECRETS).status == 200
    assert time.monotonic() - started < 0.5  # the admin is not slowed
    started = time.monotonic()
    assert cluster.api("GET", SECRETS, user=OTHER).status == 200
    assert time.monotonic() - started >= 0.6
    cluster.clear_faults()

    # A watch-only 410 for the user: the admin's watch streams normally, the user's gets
    # the ERROR event.
    fault(cluster, watch=True, status=410, user=OTHER)
    rv = cluster.resource_version()
    with cluster.watch(SECRETS, resourceVersion=str(rv), timeoutSeconds=1) as w:
        assert list(w) == []
    with cluster.watch(SECRETS, user=OTHER, resourceVersion=str(rv), timeoutSeconds=1) as w:
        events = list(w)
    assert [(e["type"], e["object"]["code"]) for e in events] == [("ERROR", 410)]


def test_a_user_that_is_not_a_name_is_refused(cluster):
    with pytest.raises(EmulatorError, match="400"):
        fault(cluster, status=503, user=["a"])
    assert pending(cluster) == []
