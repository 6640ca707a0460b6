"""Another writer fighting certctl over what it keeps (a caBundle, the failurePolicy it set
once ready, a key of its Secret): a single change is repaired at once; a writer that keeps
resetting the field is met with repairs ever further apart (at most 12 a minute per object),
one Warning series naming its field manager, a metric, and Events folded per interval
instead of one per write."""
import base64
import contextlib
import json
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.certctl import run_certctl, service_with_endpoints, webhook_configuration
from harness.rbac import emulator_rules
from harness.sidecar import Sidecar, stop_all
from harness.waiting import wait_for

NS = "demo"
SECRET = "webhook-server-cert"
USER = f"system:serviceaccount:{NS}:certctl"
VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/hook"
TARGET = "validatingwebhookconfiguration/hook"
FOREIGN = base64.b64encode(b"not the bundle certctl injects").decode()

FIGHT = 60.0          # seconds the other writer keeps resetting the field
FIGHT_INTERVAL = 0.1  # ... every 100 ms
MAX_REPAIRS = 24      # "a few dozen" at most, for the whole fight
MAX_EVENTS = 8        # Events certctl records about the target meanwhile
HOLD_CAP = 60.0       # the longest a repair is held back


@pytest.fixture
def sidecar(cluster, certctl_binary, tmp_path):
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        webhook_configuration("ValidatingWebhookConfiguration", "hook", ["a.example.com"],
                              service="hook", namespace=NS)))
    cluster.add_user(USER, emulator_rules("sidecar", SECRET, NS,
                                          {"validatingWebhooks": ["hook"]},
                                          {"leaderElection": False}))
    process = Sidecar(certctl_binary, cluster, str(tmp_path), "a", USER,
                      ["--validating-webhook", "hook"], namespace=NS).start()
    try:
        wait_for(lambda: process.readyz()[0] == 200, "certctl run ready", watch=[process])
        yield process
    finally:
        stop_all([process])


def bundle(cluster):
    return cluster.api("GET", VWC_PATH).json()["webhooks"][0]["clientConfig"].get("caBundle", "")


def reset_bundle(cluster, manager="fighter"):
    patch = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": FOREIGN}]
    resp = cluster.api("PATCH", f"{VWC_PATH}?fieldManager={manager}", patch,
                       content_type="application/json-patch+json")
    assert resp.status == 200, resp.body


@contextlib.contextmanager
def fighting(*undos):
    """Runs each of `undos` every FIGHT_INTERVAL, each in a thread of its own, until the block
    ends; yields the Event that stops them, for the block to wait on."""
    stop = threading.Event()

    def fight(undo):
        while not stop.is_set():
            undo()
            stop.wait(FIGHT_INTERVAL)

    fighters = [threading.Thread(target=fight, args=(undo,), daemon=True) for undo in undos]
    for fighter in fighters:
        fighter.start()
    try:
        yield stop
    finally:
        stop.set()
        for fighter in fighters:
            fighter.join()


def certctl_requests(cluster, verb, resource):
    return [e for e in cluster.request_log()["requests"]
            if e["user"] == USER and e["verb"] == verb and e["resource"] == resource]


def target_events(cluster, reason=None):
    items = cluster.api("GET", "/api/v1/namespaces/default/events").json()["items"]
    return [e for e in items if e["involvedObject"].get("name") == "hook"
            and (reason is None or e["reason"] == reason)]


def overwrites(sidecar, obj=TARGET, field="caBundle"):
    for family in text_string_to_metric_families(sidecar.metrics()[0]):
        for sample in family.samples:
            if (sample.name == "certctl_overwrites_total"
                    and sample.labels == {"object": obj, "field": field}):
                return sample.value
    return 0.0


@pytest.mark.backends("real")
def test_a_single_change_is_repaired_at_once_without_a_warning(cluster, sidecar):
    injected = bundle(cluster)
    reset_bundle(cluster, manager="kubectl-edit")
    wait_for(lambda: bundle(cluster) == injected, "the caBundle repaired", bound=5,
             watch=[sidecar], poll=0.02)
    wait_for(lambda: overwrites(sidecar) == 1, "one overwrite counted", watch=[sidecar])
    assert target_events(cluster, "CABundleOverwritten") == []
    assert "keeps changing" not in sidecar.log()


@pytest.mark.backends("real")
@pytest.mark.time_limit(90)
def test_after_a_fight_another_writers_single_change_is_repaired_at_once(cluster, sidecar):
    """The damping is one writer's: once the fight is over, a `helm upgrade` (another field
    manager) writing the configuration again is repaired at once, not held for what the
    fighter did, and is no fight of its own."""
    injected = bundle(cluster)
    with fighting(lambda: reset_bundle(cluster)):
        wait_for(lambda: "keeps changing" in sidecar.log(), "the fight damped", bound=20,
                 watch=[sidecar])
    wait_for(lambda: bundle(cluster) == injected, "the last repair of the fight",
             bound=HOLD_CAP + 10, watch=[sidecar])

    helm_bundle = base64.b64encode(b"what the chart renders").decode()
    patch = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": helm_bundle}]
    resp = cluster.api("PATCH", f"{VWC_PATH}?fieldManager=helm", patch,
                       content_type="application/json-patch+json")
    assert resp.status == 200, resp.body
    written = time.monotonic()
    wait_for(lambda: bundle(cluster) == injected, "helm's change repaired", bound=10,
             watch=[sidecar], poll=0.02)
    assert time.monotonic() - written < 2, time.monotonic() - written
    assert 'field manager "helm"' not in sidecar.log()


@pytest.mark.time_limit(180)
def test_a_fighting_writer_is_damped_named_and_told_once_per_interval(cluster, sidecar):
    injected = bundle(cluster)
    cluster.reset_request_log()
    writes = []

    def fight():
        reset_bundle(cluster)
        writes.append(time.monotonic())

    with fighting(fight) as stop:
        stop.wait(FIGHT)
        assert sidecar.alive(), sidecar.log()
    repairs = certctl_requests(cluster, "patch", "validatingwebhookconfigurations")
    recorded = certctl_requests(cluster, "create", "events")
    assert len(writes) > FIGHT / FIGHT_INTERVAL / 4, len(writes)  # the fight was real
    assert 3 <= len(repairs) <= MAX_REPAIRS, len(repairs)
    assert len(recorded) <= MAX_EVENTS, recorded

    warnings = target_events(cluster, "CABundleOverwritten")
    assert warnings and all(e["type"] == "Warning" for e in warnings), warnings
    assert 'field manager "fighter"' in warnings[0]["message"], warnings[0]
    assert "keeps changing the caBundle of " + TARGET in warnings[0]["message"]
    log_lines = [line for line in sidecar.log().splitlines() if "keeps changing" in line]
    assert log_lines and 'field manager "fighter"' in log_lines[0], log_lines
    assert overwrites(sidecar) >= 3

    # The other writer gave up: the field is repaired once the hold ends, and stays.
    wait_for(lambda: bundle(cluster) == injected, "the caBundle repaired after the fight",
             bound=HOLD_CAP + 10, watch=[sidecar])
    wait_for(lambda: sidecar.readyz()[0] == 200, "ready again", watch=[sidecar])


@pytest.mark.time_limit(120)
def test_a_ca_rotation_after_a_fight_does_not_wait_out_its_damping(cluster, sidecar,
                                                                    certctl_binary):
    """The memory of a fight spaces out repairs only: a target still holding certctl's own
    bundle takes the next one (a CA rotation's first step) at once."""
    injected = bundle(cluster)
    with fighting(lambda: reset_bundle(cluster)) as stop:
        stop.wait(8.0)  # three free repairs, then holds of 1, 2 and 4 s: the next one is 8 s
    wait_for(lambda: bundle(cluster) == injected, "the caBundle repaired after the fight",
             bound=HOLD_CAP + 10, watch=[sidecar])
    # The damper now holds the next repair for twice as long; a rotation is no repair.
    rotated = run_certctl(certctl_binary, "rotate", "--ca", "-n", NS, "--service", "hook",
                          "--kubeconfig", cluster.kubeconfig())
    assert rotated.returncode == 0, rotated.stderr
    asked = time.monotonic()
    wait_for(lambda: base64.b64decode(bundle(cluster)).count(b"BEGIN CERTIFICATE") == 2,
             "both CAs in the caBundle (rotation step 1)", bound=5, watch=[sidecar], poll=0.02)
    print(f"step 1 reached the fought target {time.monotonic() - asked:.2f}s after the request")


# --- every field certctl keeps, fought over at once -----------------------------------------

GARBAGE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\ngarbage\n").decode()
SECRET_FIGHT = 30.0
MAX_PER_MINUTE = 12


class Fight:
    """One sidecar in a namespace of its own, and the writer that undoes one of its fields."""

    def __init__(self, cluster, certctl_binary, workdir, name, field, args=()):
        self.cluster, self.name, self.field = cluster, name, field
        self.ns = f"fight-{name}"
        self.user = f"system:serviceaccount:{self.ns}:certctl"
        cluster.kubectl("create", "namespace", self.ns)
        vwc = webhook_configuration("ValidatingWebhookConfiguration", self.ns, ["a.example.com"],
                                    service="hook", namespace=self.ns)
        vwc["webhooks"][0]["failurePolicy"] = "Ignore"
        cluster.kubectl("apply", "-f", "-", input=json.dumps(vwc))
        top = None
        if "--failure-policy-once-ready" in args:
            # Fail goes only to an entry the API server can call: a Service with a ready
            # endpoint, which certctl may read.
            for obj in service_with_endpoints("hook", self.ns):
                cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
            top = {"failurePolicyOnceReady": "Fail", "webhook": {"service": "hook"}}
        cluster.add_user(self.user, emulator_rules("sidecar", SECRET, self.ns,
                                                   {"validatingWebhooks": [self.ns]},
                                                   {"leaderElection": False}, top))
        self.sidecar = Sidecar(certctl_binary, cluster, workdir, name, self.user,
                               ["--validating-webhook", self.ns, *args], namespace=self.ns)
        self.vwc_path = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{self.ns}"
        self.secret_path = f"/api/v1/namespaces/{self.ns}/secrets/{SECRET}"
        self.writes = 0

    @property
    def object(self):
        return (f"secret/{self.ns}/{SECRET}" if "." in self.field
                else f"validatingwebhookconfiguration/{self.ns}")

    def undo(self):
        if self.field == "failurePolicy":
            path, op = self.vwc_path, {"op": "replace", "path": "/webhooks/0/failurePolicy",
                                       "value": "Ignore"}
        else:
            path, op = self.secret_path, {"op": "replace",
                                          "path": "/data/" + self.field.replace("/", "~1"),
                                          "value": GARBAGE}
        resp = self.cluster.api("PATCH", f"{path}?fieldManager=fighter", [op],
                                content_type="application/json-patch+json")
        assert resp.status == 200, resp.body
        self.writes += 1

    def certctl_writes(self, log, resource, name):
        return [e for e in log if e["user"] == self.user and e["verb"] in ("patch", "update")
                and e["resource"] == resource and e["name"] == name]

    def warnings(self):
        ns = self.ns if "." in self.field else "default"
        name = SECRET if "." in self.field else self.ns
        items = self.cluster.api("GET", f"/api/v1/namespaces/{ns}/events").json()["items"]
        return [e for e in items if e["involvedObject"].get("name") == name
                and e["reason"].endswith("Overwritten")]

    def secret(self):
        return self.cluster.api("GET", self.secret_path).json()["data"]

    def vwc(self):
        return self.cluster.api("GET", self.vwc_path).json()


@pytest.mark.backends("real")
@pytest.mark.time_limit(150)
def test_each_field_fought_over_gets_at_most_12_repairs_a_minute_and_one_warning(
        cluster, certctl_binary, tmp_path):
    """Three fights at once, each on a sidecar of its own: failurePolicy set back to Ignore,
    tls.crt and ca.crt set to garbage, every 100 ms for 30 s. Each object gets at most 12
    certctl writes a minute and one Warning series naming the writer; ca.crt garbage never
    makes a new CA while ca.key's own CA certificate is in the targets."""
    fights = [Fight(cluster, certctl_binary, str(tmp_path), "fp", "failurePolicy",
                    ["--failure-policy-once-ready", "Fail"]),
              Fight(cluster, certctl_binary, str(tmp_path), "crt", "tls.crt"),
              Fight(cluster, certctl_binary, str(tmp_path), "ca", "ca.crt")]
    try:
        for fight in fights:
            fight.sidecar.start()
        for fight in fights:
            wait_for(lambda: fight.sidecar.readyz()[0] == 200, f"{fight.name} ready",
                     watch=[fight.sidecar])
        fp = fights[0]
        wait_for(lambda: fp.vwc()["webhooks"][0]["failurePolicy"] == "Fail",
                 "failurePolicy Fail once ready", watch=[fp.sidecar])
        before = {fight.name: (fight.secret(), fight.vwc()) for fight in fights}
        cluster.reset_request_log()
        with fighting(*(fight.undo for fight in fights)) as stop:
            stop.wait(SECRET_FIGHT)
        log = cluster.request_log()["requests"]
        for fight in fights:
            assert fight.sidecar.alive(), fight.sidecar.log()
            assert fight.writes > SECRET_FIGHT / FIGHT_INTERVAL / 4, (fight.name, fight.writes)
            secret_writes = fight.certctl_writes(log, "secrets", SECRET)
            vwc_writes = fight.certctl_writes(log, "validatingwebhookconfigurations", fight.ns)
            fought = vwc_writes if fight.field == "failurePolicy" else secret_writes
            print(f"{fight.field}: {fight.writes} writes by the other writer, "
                  f"{len(fought)} repairs by certctl")
            assert 3 <= len(fought) <= MAX_PER_MINUTE * SECRET_FIGHT / 60 + 3, (fight.field,
                                                                                 fought)
            # Nothing else moved: no caBundle write (no new CA), no Secret write for a
            # failurePolicy.
            assert (secret_writes if fight.field == "failurePolicy" else vwc_writes) == [], \
                fight.field
            warnings = fight.warnings()
            assert len(warnings) == 1, (fight.field, warnings)  # one series, one Event
            assert warnings[0]["type"] == "Warning", warnings[0]
            assert warnings[0]["count"] >= 2, warnings[0]  # the repeats counted on it
            # One Event object per reason about the fought object: for tls.crt the leaf
            # re-issued at every repair is one LeafReissued Event, not one a repair.
            created = [e for e in log if e["user"] == fight.user and e["verb"] == "create"
                       and e["resource"] == "events"]
            assert len(created) <= 2, (fight.field, created)
            assert 'field manager "fighter"' in warnings[0]["message"], warnings[0]
            assert (f"keeps changing the {fight.field} of {fight.object}"
                    in warnings[0]["message"]), warnings[0]
            assert overwrites(fight.sidecar, fight.object, fight.field) >= 3

        # The fight is over: each field is repaired once its hold ends, and the CA is the one
        # the targets always trusted.
        for fight in fights:
            secret, vwc = before[fight.name]
            if fight.field == "failurePolicy":
                wait_for(lambda: fight.vwc()["webhooks"][0]["failurePolicy"] == "Fail",
                         "failurePolicy Fail again", bound=HOLD_CAP + 10, watch=[fight.sidecar])
            else:
                wait_for(lambda: fight.sidecar.readyz()[0] == 200, f"{fight.name} ready again",
                         bound=HOLD_CAP + 10, watch=[fight.sidecar])
                after = fight.secret()
                assert after["ca.crt"] == secret["ca.crt"], fight.field
                assert after["ca.key"] == secret["ca.key"], fight.field
            assert (fight.vwc()["webhooks"][0]["clientConfig"]["caBundle"]
                    == vwc["webhooks"][0]["clientConfig"]["caBundle"]), fight.field
    finally:
        stop_all([fight.sidecar for fight in fights])
