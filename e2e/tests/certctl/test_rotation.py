"""The rotation invariant: while the CA is replaced, no call the API server makes to the webhook
fails. An `ApiServerProbe` plays the API server throughout: every ~20 ms it reads the caBundle
of each target (a ValidatingWebhookConfiguration and a MutatingWebhookConfiguration) and makes a
TLS handshake to every webhook server, trusting only that bundle and verifying
hook.infra.svc, then posts an AdmissionReview over it. The webhook servers are the example
server (harness/webhook_server.py) on the folder `certctl run` keeps, as in a pod.

Scenarios: `certctl rotate --ca --wait` with the controller running; the controller SIGKILLed
between step 1 and step 2 (its target writes fail until then) and started again, a second
`rotate --ca --wait` given meanwhile joining the rotation under way; two replicas
under leader election with the leader killed in the same place; a leaf-only renewal
(`certctl rotate --wait`). Each ends with zero failed calls and, after the overlap
(--ca-overlap of a few seconds), every bundle holding the new CA alone. The control: the naive
rotation of harness/naive_rotation.py (CA, leaf and bundles replaced at once, the pod's files
following a second later) run against the same probe fails, so the probe is known to see the
problem it guards against.

Tampered rotation state: the Secret edited under a running controller (a stray `trusting`
phase, an unknown phase, the leaf appended or prepended to ca.crt, previous-ca-until in the
year 9999 during an overlap) is met without a failed call, readiness kept, one warning per
bad value, and the Secret ends as certctl keeps it.
"""

import base64
import concurrent.futures
import json
import signal

import pytest

from harness.api_server import bundle_fingerprints, probe_for as backend_probe, served_serials
from harness.certctl import run_certctl, split_issuer_record
from harness.naive_rotation import naive_rotation
from harness.rbac import emulator_rules
from harness.sidecar import Sidecar, WebhookServer, free_ports
from harness.waiting import wait_for

NS = "infra"
SERVICE = "hook"
SECRET = "webhook-server-cert"
VWC, MWC = "hook", "hook-mutating"
HOST = f"{SERVICE}.{NS}.svc"
USER = f"system:serviceaccount:{NS}:certctl"
TARGET_PATHS = [f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{VWC}",
                f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{MWC}"]
SECRET_PATH = f"/api/v1/namespaces/{NS}/secrets/{SECRET}"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{SECRET}-certctl"
PHASE = "certctl.io/rotation-phase"
UNTIL = "certctl.io/previous-ca-until"
FOREVER = "9999-12-31T23:59:59Z"
BOUND = 20.0
LEASE_DURATION = 15.0
MIN_CALLS = 100  # a rotation probed fewer times than this proves little


def rules(leader_election):
    return emulator_rules("sidecar", SECRET, NS,
                          {"validatingWebhooks": [VWC], "mutatingWebhooks": [MWC]},
                          {"leaderElection": leader_election})


def manifests():
    def webhook(kind, name):
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                "metadata": {"name": name},
                "webhooks": [{
                    "name": f"{name}.hook.example.com", "admissionReviewVersions": ["v1"],
                    "sideEffects": "None", "failurePolicy": "Fail",
                    "clientConfig": {"service": {"namespace": NS, "name": SERVICE,
                                                 "path": "/validate", "port": 443}},
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                               "apiVersions": ["v1"], "resources": ["configmaps"]}]}]}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": SERVICE, "namespace": NS},
               "spec": {"ports": [{"port": 443, "targetPort": 9443}]}}
    return [service, webhook("ValidatingWebhookConfiguration", VWC),
            webhook("MutatingWebhookConfiguration", MWC)]



def endpoint_slice(name, address, port):
    """The EndpointSlice of one pod of the Service: on the real backend the API server
    sends its calls to the addresses these list."""
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{SERVICE}-{name}", "namespace": NS,
                         "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"port": port, "protocol": "TCP"}]}


class Replica:
    """One pod: `certctl run` and the example webhook server sharing a folder. On the real
    backend the server listens on node-ip, where the API server's calls arrive."""

    def __init__(self, cluster, binary, workdir, name, user, *args):
        self.port, = free_ports(1)
        host = cluster.node_ip if cluster.backend == "real" else "127.0.0.1"
        self.sidecar = Sidecar(binary, cluster, workdir, name, user,
                               ["--validating-webhook", VWC, "--mutating-webhook", MWC,
                                "--serving-addr", f"{host}:{self.port}", *args],
                               namespace=NS, service=SERVICE)
        self.webhook = WebhookServer(self.sidecar.cert_dir, workdir, name=f"{name}-webhook",
                                     listen=f"{host}:{self.port}", ready_timeout=BOUND)
        cluster.kubectl("apply", "-f", "-",
                        input=json.dumps(endpoint_slice(name, cluster.node_ip, self.port)))

    def start(self):
        self.sidecar.start()
        self.webhook.start(bound=BOUND)
        return self

    def wait_ready(self):
        wait_for(lambda: self.sidecar.readyz()[0] == 200, f"{self.sidecar.name} /readyz 200",
                 watch=[self.sidecar, self.webhook])
        return self

    def restart_sidecar(self):
        self.sidecar.start()
        return self

    def kill_sidecar(self):
        self.sidecar.proc.send_signal(signal.SIGKILL)
        self.sidecar.proc.wait()

    def stop(self):
        self.webhook.stop()
        self.sidecar.stop()

    def log(self):
        return self.sidecar.log()


@pytest.fixture
def pods(cluster, certctl_binary, tmp_path):
    cluster.kubectl("create", "namespace", NS)
    for obj in manifests():
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
    made = []

    def make(name, *args, leader_election=False):
        user = f"{USER}-{name}"
        cluster.add_user(user, rules(leader_election))
        replica = Replica(cluster, certctl_binary, str(tmp_path), name, user, *args)
        made.append(replica)
        return replica.start()

    try:
        yield make
    finally:
        for replica in made:
            replica.stop()


def rotate(cluster, binary, *args):
    return run_certctl(binary, "rotate", "-n", NS, "--secret", SECRET, *args,
                       env={"KUBECONFIG": cluster.kubeconfig()}, timeout=120)


def secret(cluster):
    return cluster.api("GET", SECRET_PATH).json()


def secret_cas(cluster):
    return bundle_fingerprints(base64.b64decode(secret(cluster)["data"]["ca.crt"]).decode())


def phase(cluster):
    return (secret(cluster)["metadata"].get("annotations") or {}).get(PHASE)


def target_cas(cluster):
    """The CA fingerprints each target's caBundles hold (one list per distinct bundle)."""
    held = []
    for path in TARGET_PATHS:
        for webhook in cluster.api("GET", path).json()["webhooks"]:
            pem = base64.b64decode(webhook["clientConfig"].get("caBundle", "")).decode()
            held.append(bundle_fingerprints(pem))
    return held


def only(cluster, ca):
    """Every target and the Secret trust `ca` alone."""
    return secret_cas(cluster) == [ca] and all(cas == [ca] for cas in target_cas(cluster))


def events(cluster):
    return json.loads(cluster.kubectl("get", "events", "-n", NS, "-o", "json").stdout)["items"]


def event_reasons(cluster):
    return [e.get("reason") for e in events(cluster)]


def tamper(cluster, edit):
    """Applies `edit` to the Secret as read and writes it back, as a hand edit would."""
    obj = secret(cluster)
    edit(obj)
    resp = cluster.api("PUT", SECRET_PATH, body=obj)
    assert resp.status == 200, resp.json()


def annotated(key, value):
    return lambda obj: obj["metadata"].setdefault("annotations", {}).update({key: value})


def with_ca_crt(pem):
    return lambda obj: obj["data"].update({"ca.crt": base64.b64encode(pem.encode()).decode()})


def at_rest(cluster, ca, leaf):
    """The Secret as certctl keeps it at rest: `ca` alone in ca.crt, the same leaf, none of
    certctl's annotations but the record of who issued the pair."""
    obj = secret(cluster)
    _, notes = split_issuer_record(obj["metadata"].get("annotations"))
    return (bundle_fingerprints(base64.b64decode(obj["data"]["ca.crt"]).decode()) == [ca]
            and obj["data"]["tls.crt"] == leaf
            and not any(key.startswith("certctl.io/") for key in notes))


def assert_no_failed_call(probe):
    assert probe.failures == [], probe.report()
    assert probe.calls >= MIN_CALLS, probe.report()


def probe_for(cluster, *replicas):
    return backend_probe(cluster, TARGET_PATHS, HOST, NS,
                         ports=lambda: [r.port for r in replicas],
                         served=lambda: served_serials(*(r.webhook.log() for r in replicas)))


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_rotate_ca_with_the_controller_running(cluster, certctl_binary, pods):
    pod = pods("a", "--ca-overlap", "4s").wait_ready()
    old, = secret_cas(cluster)
    with probe_for(cluster, pod) as probe:
        probe.wait_rounds(10)
        done = rotate(cluster, certctl_binary, "--ca", "--wait", "--timeout", "60s")
        assert done.returncode == 0, done.stdout + done.stderr + pod.log()
        for text in ("step 1 of 3", "step 2 of 3", "done: the server certificate is issued by "
                     "the new CA"):
            assert text in done.stdout, done.stdout
        new, previous = secret_cas(cluster)
        assert previous == old and new != old
        assert phase(cluster) == "overlapping"
        # Step 3 after the overlap: the new CA alone, everywhere.
        wait_for(lambda: only(cluster, new), "the previous CA to leave every bundle",
                 watch=[pod.sidecar])
        probe.wait_rounds(10)
    assert_no_failed_call(probe)
    # The probe saw every stage: the old CA, both together, the new one alone; two leaves.
    assert probe.bundles_seen[0] == [old] and [new, old] in probe.bundles_seen, probe.report()
    assert probe.bundles_seen[-1] == [new] and len(probe.leaves_seen) == 2, probe.report()
    log = pod.log()
    for text in ("ca-rotation-started", "leaf-moved-to-new-ca", "previous-ca-retired"):
        assert text in log, log
    reasons = event_reasons(cluster)
    for reason in ("CARotationStarted", "CARotationLeafMoved", "CARotationFinished"):
        assert reason in reasons, reasons
    metrics, _ = pod.sidecar.metrics()
    assert 'certctl_rotations_total{kind="ca"} 1' in metrics, metrics
    assert f'certctl_ca_rotation_phase{{secret="{NS}/{SECRET}"}} 0' in metrics, metrics


@pytest.mark.time_limit(90)
def test_a_controller_killed_between_steps_continues_where_it_stopped(cluster, certctl_binary,
                                                                       pods):
    pod = pods("a", "--ca-overlap", "4s").wait_ready()
    old, = secret_cas(cluster)
    with probe_for(cluster, pod) as probe:
        probe.wait_rounds(10)
        # Target writes fail: the controller stores step 1 and cannot go on.
        cluster.inject_fault(method="PATCH", path="webhookconfigurations", status=503,
                             count=1000000)
        asked = rotate(cluster, certctl_binary, "--ca")
        assert asked.returncode == 0, asked.stdout + asked.stderr
        assert "a controller took the request" in asked.stdout, asked.stdout
        wait_for(lambda: phase(cluster) == "trusting", "step 1", watch=[pod.sidecar])
        probe.wait_rounds(10)
        pod.kill_sidecar()
        cluster.clear_faults()
        # Nothing moved while it was down: the leaf is still the old CA's, trusted everywhere.
        assert phase(cluster) == "trusting"
        assert all(cas == [old] for cas in target_cas(cluster)), target_cas(cluster)
        probe.wait_rounds(10)
        # A second `rotate --ca` while the controller is down joins the rotation under way and
        # follows it to step 2 once the controller is back.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            joined = pool.submit(rotate, cluster, certctl_binary, "--ca", "--wait",
                                 "--controller-timeout", "60s", "--timeout", "60s")
            wait_for(lambda: joined.done() or
                     (secret(cluster)["metadata"].get("annotations") or {}).get(
                         "certctl.io/rotate") == "ca", "the second request")
            assert phase(cluster) == "trusting"
            pod.restart_sidecar()
            wait_for(lambda: phase(cluster) in ("overlapping", None) and
                     secret_cas(cluster)[0] != old,
                     "the restarted controller to move the leaf", watch=[pod.sidecar])
            followed = joined.result(timeout=BOUND)
        assert followed.returncode == 0, followed.stdout + followed.stderr
        for text in ("is already under way (step 1 stored)", "step 2 of 3",
                     "done: the server certificate is issued by the new CA"):
            assert text in followed.stdout, followed.stdout
        new = secret_cas(cluster)[0]
        wait_for(lambda: only(cluster, new), "the previous CA to leave every bundle",
                 watch=[pod.sidecar])
        probe.wait_rounds(10)
    assert_no_failed_call(probe)
    assert [new, old] in probe.bundles_seen and len(probe.leaves_seen) == 2, probe.report()
    # One CA was made for this rotation: the restart continued it, it did not start over.
    assert secret_cas(cluster) == [new]
    assert "leaf-moved-to-new-ca" in pod.log() and "ca-rotation-started" not in pod.log()


@pytest.mark.time_limit(120)
def test_the_leader_killed_mid_rotation_is_succeeded_without_a_failed_call(cluster,
                                                                          certctl_binary, pods):
    replicas = {name: pods(name, "--leader-elect", "--identity", name, "--ca-overlap", "8s",
                           leader_election=True)
                for name in ("a", "b")}
    for replica in replicas.values():
        replica.wait_ready()
    leader = cluster.api("GET", LEASE_PATH).json()["spec"]["holderIdentity"]
    follower = "b" if leader == "a" else "a"
    old, = secret_cas(cluster)
    with probe_for(cluster, *replicas.values()) as probe:
        probe.wait_rounds(10)
        cluster.inject_fault(method="PATCH", path="webhookconfigurations", status=503,
                             count=1000000)
        asked = rotate(cluster, certctl_binary, "--ca")
        assert asked.returncode == 0, asked.stdout + asked.stderr
        wait_for(lambda: phase(cluster) == "trusting", "step 1",
                 watch=[r.sidecar for r in replicas.values()])
        probe.wait_rounds(10)
        replicas[leader].kill_sidecar()
        cluster.clear_faults()
        # The follower takes the lease once it runs out, and continues the rotation.
        wait_for(lambda: phase(cluster) == "overlapping", "the new leader to move the leaf",
                 bound=LEASE_DURATION + BOUND, watch=[replicas[follower].sidecar])
        assert f"became the leader ({follower})" in replicas[follower].log()
        # The killed pod's container restarts, as the kubelet would restart it.
        replicas[leader].restart_sidecar()
        new = secret_cas(cluster)[0]
        wait_for(lambda: only(cluster, new), "the previous CA to leave every bundle",
                 watch=[r.sidecar for r in replicas.values()])
        for replica in replicas.values():
            replica.wait_ready()
        probe.wait_rounds(10)
    assert_no_failed_call(probe)
    assert [new, old] in probe.bundles_seen, probe.report()
    assert "leaf-moved-to-new-ca" in replicas[follower].log()

@pytest.mark.backends("real")
def test_a_leaf_renewal_changes_no_bundle_and_fails_no_call(cluster, certctl_binary, pods):
    pod = pods("a").wait_ready()
    old, = secret_cas(cluster)
    leaf_before = secret(cluster)["data"]["tls.crt"]
    with probe_for(cluster, pod) as probe:
        probe.wait_rounds(30)  # a renewal is over in milliseconds: probe around it longer
        done = rotate(cluster, certctl_binary, "--wait", "--timeout", "60s")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "done: the server certificate was re-issued" in done.stdout, done.stdout
        assert secret(cluster)["data"]["tls.crt"] != leaf_before
        wait_for(lambda: len(probe.leaves_seen) == 2, "the webhook to serve the new leaf",
                 watch=[pod.sidecar])
        probe.wait_rounds(30)
    assert_no_failed_call(probe)
    assert probe.bundles_seen == [[old]], probe.report()
    assert 'certctl_rotations_total{kind="leaf"} 1' in pod.sidecar.metrics()[0]

@pytest.mark.backends("real")
def test_the_naive_rotation_fails_calls_so_the_probe_can_see_it(cluster, certctl_binary, pods):
    pod = pods("a").wait_ready()
    pod.sidecar.stop()  # the naive tool replaces certctl: nothing repairs what it does
    with probe_for(cluster, pod) as probe:
        probe.wait_rounds(10)
        naive_rotation(cluster, certctl_binary, NS, SERVICE, SECRET, TARGET_PATHS,
                       pod.sidecar.cert_dir, propagation=1.0)
        wait_for(lambda: len(probe.leaves_seen) == 2, "the webhook to serve the new leaf",
                 watch=[pod.webhook])
        probe.wait_rounds(10)
    assert probe.failures, f"the naive rotation failed no call:\n{probe.report()}"
    # The API server's own handshake failed, in Go's words.
    verify_failed = "x509: certificate signed by unknown authority"
    assert all(verify_failed in f[-1] for f in probe.failures), probe.report()
    print(f"naive rotation: {len(probe.failures)} failed calls of "
          f"{len(probe.failures) + probe.calls}")


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_rotate_waits_for_the_next_leader_when_the_leader_died(cluster, certctl_binary, pods):
    """`rotate` right after the leader died without giving up its Lease: the follower takes
    the request once the Lease runs out, and rotate waits for it instead of failing."""
    lease = ("--lease-duration", "6s", "--lease-renew-deadline", "4s",
             "--lease-retry-period", "1s")
    replicas = {name: pods(name, "--leader-elect", "--identity", name, *lease,
                           leader_election=True)
                for name in ("a", "b")}
    for replica in replicas.values():
        replica.wait_ready()
    leader = cluster.api("GET", LEASE_PATH).json()["spec"]["holderIdentity"]
    follower = "b" if leader == "a" else "a"
    old, = secret_cas(cluster)
    replicas[leader].kill_sidecar()
    # Asked within a second of the death, the Lease still names the dead leader 3 s later
    # (it runs out 5 to 6 s after the death). The wait for the next leader is the Lease's
    # duration and the controller timeout again: 3 s leave the new leader time to act on a
    # busy machine, where 1 s was missed once.
    asked = rotate(cluster, certctl_binary, "--ca", "--wait", "--controller-timeout", "3s")
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert (f"certctl rotate: lease/{NS}/{SECRET}-certctl names the leader {leader}, which "
            "has not taken the request") in asked.stdout, asked.stdout
    assert "rotating here" not in asked.stdout, asked.stdout
    assert f"became the leader ({follower})" in replicas[follower].log()
    assert secret_cas(cluster)[1:] == [old] and phase(cluster) == "overlapping"


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_tampered_rotation_state_is_repaired_without_a_failed_call(cluster, certctl_binary,
                                                                   pods):
    pod = pods("a", "--ca-overlap", "1h").wait_ready()
    ca, = secret_cas(cluster)
    stored = secret(cluster)["data"]
    leaf, leaf_pem = stored["tls.crt"], base64.b64decode(stored["tls.crt"]).decode()
    ca_pem = base64.b64decode(stored["ca.crt"]).decode()
    log_start = len(pod.log())
    tampered = [("a stray trusting phase", annotated(PHASE, "trusting")),
                ("an unknown phase", annotated(PHASE, "stage-7")),
                ("the leaf appended to ca.crt", with_ca_crt(ca_pem + leaf_pem)),
                ("the leaf prepended to ca.crt", with_ca_crt(leaf_pem + ca_pem))]
    with probe_for(cluster, pod) as probe:
        probe.wait_rounds(10)
        for what, edit in tampered:
            tamper(cluster, edit)
            wait_for(lambda: at_rest(cluster, ca, leaf), f"certctl to repair {what}",
                     watch=[pod.sidecar])
            probe.wait_rounds(10)
        # During an overlap, the previous CA kept for its whole life.
        done = rotate(cluster, certctl_binary, "--ca", "--wait", "--timeout", "60s")
        assert done.returncode == 0, done.stdout + done.stderr + pod.log()
        until = secret(cluster)["metadata"]["annotations"][UNTIL]
        tamper(cluster, annotated(UNTIL, FOREVER))
        wait_for(lambda: secret(cluster)["metadata"]["annotations"].get(UNTIL) == until,
                 "certctl to clamp previous-ca-until", watch=[pod.sidecar])
        assert phase(cluster) == "overlapping" and len(secret_cas(cluster)) == 2
        probe.wait_rounds(10)
    assert_no_failed_call(probe)
    log = pod.log()[log_start:]
    assert "not ready" not in log, log
    for annotation, value in ((PHASE, '"trusting"'), (PHASE, '"stage-7"'), (UNTIL, "clamped")):
        warned = [line for line in log.splitlines()
                  if " warning " in line and annotation in line and value in line]
        assert len(warned) == 1, log
    reasons = event_reasons(cluster)
    assert "CAReplaced" not in reasons, reasons
    # Five repairs: each logged, and told as one Event series (repeats of a reason fold into
    # the first Event's count; the first repeat at once, the rest within the minute).
    assert len([line for line in log.splitlines() if " repaired: secret/" in line]) == 5, log
    repaired = [e for e in events(cluster) if e.get("reason") == "Repaired"]
    assert len(repaired) == 1 and repaired[0]["count"] >= 2, repaired
