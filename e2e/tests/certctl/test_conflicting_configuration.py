"""Two `certctl run` instances on one Secret with different settings (cluster domain, key type,
CA name): the one started later issues once, the one started earlier leaves that certificate as
it is and objects once, and from then on neither writes; both report conflicting-configuration
naming the other on /readyz?verbose, in a Warning Event, a metric and `certctl check`. When one
stops, the other goes on alone. Instances whose settings agree (different --service) still
converge on one certificate."""
import base64
import json
import signal

import pytest
from cryptography import x509

from harness.certctl import run_certctl, webhook_configuration
from harness.rbac import emulator_rules
from harness.sidecar import Sidecar, stop_all
from harness.waiting import wait_for

NS = "demo"
SECRET = "webhook-server-cert"
EARLY = f"system:serviceaccount:{NS}:certctl-early"
LATE = f"system:serviceaccount:{NS}:certctl-late"
OTHER_SETTINGS = ["--cluster-domain", "corp.local", "--key-type", "rsa-2048",
                  "--ca-name", "other-ca"]
CHECKER_RULES = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]


def setup_cluster(cluster, webhooks=(("a.example.com", "hook"),)):
    cluster.kubectl("create", "namespace", NS)
    configuration = webhook_configuration("ValidatingWebhookConfiguration", "hook",
                                          [name for name, _ in webhooks], service="hook",
                                          namespace=NS)
    for entry, (_, service) in zip(configuration["webhooks"], webhooks):
        entry["clientConfig"]["service"]["name"] = service
    cluster.kubectl("apply", "-f", "-", input=json.dumps(configuration))
    for user in (EARLY, LATE):
        cluster.add_user(user, emulator_rules("sidecar", SECRET, NS,
                                              {"validatingWebhooks": ["hook"]},
                                              {"leaderElection": False}))


def start(certctl_binary, cluster, tmp_path, name, user, args, service="hook"):
    process = Sidecar(certctl_binary, cluster, str(tmp_path), name, user,
                      ["--validating-webhook", "hook", *args], namespace=NS,
                      service=service).start()
    wait_for(lambda: process.readyz()[0] == 200, f"certctl run {name} ready", watch=[process])
    return process


def secret(cluster):
    return json.loads(cluster.kubectl("get", "secret", "-n", NS, SECRET, "-o", "json").stdout)


def annotations(cluster):
    return secret(cluster)["metadata"].get("annotations", {})


def conflict_line(process):
    status, body, _ = process.get("/readyz?verbose")
    lines = [line for line in body.splitlines() if line.startswith("conflict: ")]
    return status, (lines[0] if lines else None)


def passes(process):
    return process.metric("certctl_reconcile_total") or 0


def secret_writes(cluster, user):
    name = user.rsplit(":", 1)[1]
    return [w for w in cluster.writes()
            if w["resource"] == "secrets" and w["user"].endswith(name)]


def conflict_events(cluster):
    items = cluster.api("GET", f"/api/v1/namespaces/{NS}/events").json()["items"]
    return [e for e in items if e["reason"] == "ConflictingConfiguration"]


def reconcile_now(*processes):
    """A pass on each (SIGHUP), waited for on its reconcile counter."""
    before = [passes(p) for p in processes]
    for process in processes:
        process.send(signal.SIGHUP)
    for process, count in zip(processes, before):
        wait_for(lambda p=process, c=count: passes(p) > c, f"a pass of {process.name}",
                 watch=[process])


@pytest.fixture
def pair(cluster, certctl_binary, tmp_path):
    """The earlier instance with the defaults, then the later one with other settings, both
    ready, the conflict reported by both."""
    setup_cluster(cluster)
    early = start(certctl_binary, cluster, tmp_path, "early", EARLY, [])
    cluster.reset_request_log()
    late = start(certctl_binary, cluster, tmp_path, "late", LATE, OTHER_SETTINGS)
    try:
        wait_for(lambda: conflict_line(early)[1] and conflict_line(late)[1],
                 "both report the conflict", watch=[early, late])
        yield early, late
    finally:
        stop_all([early, late])


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_each_writes_at_most_once_and_both_name_the_other(cluster, certctl_binary, pair):
    early, late = pair
    reconcile_now(early, late)
    reconcile_now(early, late)
    # The later one re-issued for its settings once; the earlier one wrote its objection once.
    assert len(secret_writes(cluster, LATE)) == 1, secret_writes(cluster, LATE)
    assert len(secret_writes(cluster, EARLY)) == 1, secret_writes(cluster, EARLY)

    stored = annotations(cluster)
    late_name = stored["certctl.io/issued-by"]
    early_name = stored["certctl.io/objected-by"]
    assert late_name.startswith("certctl run ") and early_name.startswith("certctl run ")
    assert late_name != early_name

    # Both stay ready (the API server calls hook.demo.svc, which the certificate names) and
    # say who the other is and what differs.
    status, line = conflict_line(early)
    assert status == 200, line
    assert late_name in line
    for setting in ("key-type rsa-2048 (here: ecdsa-p256)",
                    "cluster-domain corp.local (here: cluster.local)",
                    "ca-name other-ca (here: default)"):
        assert setting in line, line
    assert "leaves that certificate as it is" in line
    status, line = conflict_line(late)
    assert status == 200, line
    assert early_name in line and "key-type ecdsa-p256 (here: rsa-2048)" in line, line

    labels = {"secret": f"{NS}/{SECRET}"}
    assert early.metric("certctl_conflicting_configuration", labels) == 1
    assert late.metric("certctl_conflicting_configuration", labels) == 1

    # One Warning Event each, on the Secret, with its uid.
    uid = secret(cluster)["metadata"]["uid"]
    wait_for(lambda: len(conflict_events(cluster)) == 2, "two ConflictingConfiguration Events",
             watch=[early, late])
    for event in conflict_events(cluster):
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "Secret"
        assert event["involvedObject"]["uid"] == uid
    messages = " ".join(e["message"] for e in conflict_events(cluster))
    assert late_name in messages and early_name in messages

    # `certctl check` finds it in the Secret alone.
    cluster.add_user("checker", CHECKER_RULES)
    result = run_certctl(certctl_binary, "check", "--secret", SECRET, "-n", NS, "-o", "json",
                         "--kubeconfig", cluster.kubeconfig("checker"))
    assert result.returncode == 1, result.stdout + result.stderr
    found = [f for f in json.loads(result.stdout)["findings"]
             if f["code"] == "conflicting-configuration"]
    assert len(found) == 1, result.stdout
    assert late_name in found[0]["message"] and early_name in found[0]["message"]
    assert "key-type" in found[0]["message"]


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_when_the_later_instance_stops_the_earlier_issues_for_itself(cluster, pair):
    early, late = pair
    late_name = annotations(cluster)["certctl.io/issued-by"]
    stop_all([late])
    wait_for(lambda: annotations(cluster).get("certctl.io/issued-by", late_name) != late_name,
             "the earlier instance issued for itself", watch=[early])
    wait_for(lambda: conflict_line(early)[1] is None, "the conflict cleared", watch=[early])
    stored = annotations(cluster)
    assert "certctl.io/objected-by" not in stored
    assert "cluster-domain=cluster.local" in stored["certctl.io/issued-with"]
    assert early.metric("certctl_conflicting_configuration", {"secret": f"{NS}/{SECRET}"}) == 0
    assert early.readyz()[0] == 200


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_when_the_earlier_instance_stops_its_objection_goes_with_it(cluster, pair):
    early, late = pair
    issued_by = annotations(cluster)["certctl.io/issued-by"]
    cluster.reset_request_log()
    stop_all([early])
    wait_for(lambda: "certctl.io/objected-by" not in annotations(cluster),
             "the objection withdrawn")
    wait_for(lambda: conflict_line(late)[1] is None, "the conflict cleared", watch=[late])
    assert annotations(cluster)["certctl.io/issued-by"] == issued_by
    reconcile_now(late)
    assert secret_writes(cluster, LATE) == []


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_instances_whose_names_merge_converge_without_a_conflict(cluster, certctl_binary,
                                                                tmp_path):
    """Different --service, the same settings: one certificate names both Services."""
    setup_cluster(cluster, webhooks=(("a.example.com", "hook"), ("b.example.com", "hook2")))
    first = Sidecar(certctl_binary, cluster, str(tmp_path), "first", EARLY,
                    ["--validating-webhook", "hook"], namespace=NS, service="hook").start()
    second = Sidecar(certctl_binary, cluster, str(tmp_path), "second", LATE,
                     ["--validating-webhook", "hook"], namespace=NS, service="hook2").start()
    try:
        wait_for(lambda: first.readyz()[0] == 200 and second.readyz()[0] == 200,
                 "both ready", watch=[first, second])
        reconcile_now(first, second)
        cluster.reset_request_log()
        reconcile_now(first, second)
        assert [w for w in cluster.writes() if w["resource"] == "secrets"] == []
        assert conflict_line(first)[1] is None and conflict_line(second)[1] is None
        leaf = x509.load_pem_x509_certificate(
            base64.b64decode(secret(cluster)["data"]["tls.crt"]))
        names = leaf.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
        assert {"hook.demo.svc", "hook2.demo.svc"} <= set(names), names
        assert "certctl.io/objected-by" not in annotations(cluster)
    finally:
        stop_all([first, second])
