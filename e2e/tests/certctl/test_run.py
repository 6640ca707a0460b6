"""`certctl run`, the sidecar controller, against the emulator: cold start (Secret, certificate
folder, caBundle, readiness, a real TLS handshake), repairs driven by watches, a deleted
Secret, the steady state, SIGHUP, SIGTERM/SIGINT, leader election among three replicas and a
takeover, an unavailable API, /metrics, and a target that appears late.

Every wait polls (/readyz, the API or the request log, every 50 ms) under a generous bound;
the few time limits the controller promises (a repair within 2 s, an exit within 5 s, a
takeover within the lease duration) are measured and asserted on their own.
"""

import base64
import copy
import datetime
import json
import os
import signal
import subprocess
import time
import urllib.parse

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from prometheus_client.parser import text_string_to_metric_families

from harness.badpki import Authority
from harness.certctl import assert_contains, webhook_configuration
from harness.faults import metric, sidecar_metrics
from harness.rbac import emulator_rules
from harness.sidecar import Sidecar, free_ports, stop_all
from harness.waiting import wait_for

NS = "infra"
SECRET = "webhook-server-cert"
LEASE = f"{SECRET}-certctl"
VWC = "ValidatingWebhookConfiguration"
USER = "system:serviceaccount:infra:certctl"
HOST = f"hook.{NS}.svc"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}

VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/hook"
SECRET_PATH = f"/api/v1/namespaces/{NS}/secrets/{SECRET}"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}"

POLL = 0.05          # seconds between two looks
BOUND = 20.0         # overall bound of a wait (a loaded 2-core machine)
REPAIR_LIMIT = 2.0   # what the controller promises for a repair
STOP_LIMIT = 5.0     # ... for SIGTERM/SIGINT to exit
LEASE_DURATION = 15.0

# Exactly the chart's RBAC for this Secret and target (mode sidecar), with the leases that
# leader election needs: every scenario also proves those grants suffice.
RULES = emulator_rules("sidecar", SECRET, NS, {"validatingWebhooks": ["hook"]},
                       {"leaderElection": True})


# --- the process helper: harness/sidecar.py -----------------------------------------------

@pytest.fixture
def sidecars(cluster, certctl_binary, tmp_path):
    """start(name, *args, user=USER, targets=...) starts a `certctl run`; every process
    started is stopped (SIGTERM, then SIGKILL after 5 s) when the test ends."""
    started = []

    def start(name="a", *args, user=USER, targets=("--validating-webhook", "hook"),
              service="hook"):
        sidecar = Sidecar(certctl_binary, cluster, str(tmp_path), name, user,
                          [*targets, *args], service=service)
        started.append(sidecar)
        return sidecar.start()

    yield start
    stop_all(started)


@pytest.fixture
def infra(cluster):
    """The namespace and the sidecar's service account; no target yet."""
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user(USER, RULES)
    return cluster


def hook_manifest():
    return webhook_configuration(VWC, "hook", ["a.hook.io", "b.hook.io"])


@pytest.fixture
def hook(infra):
    """infra plus ValidatingWebhookConfiguration `hook` (two webhooks, no caBundle)."""
    infra.kubectl("apply", "-f", "-", input=json.dumps(hook_manifest()))
    return infra


# --- polling and reading ------------------------------------------------------------------


def wait_ready(*sidecars, bound=BOUND):
    for sidecar in sidecars:
        wait_for(lambda: sidecar.readyz()[0] == 200, f"/readyz 200 from {sidecar.name}",
                 bound=bound, watch=sidecars)


def api_get(cluster, path):
    """The object at path (admin, raw HTTPS: faster than kubectl for polling), or None."""
    resp = cluster.api("GET", path)
    if resp.status == 404:
        return None
    assert resp.status == 200, resp
    return resp.json()


def decode(value):
    return base64.b64decode(value).decode()


def secret_data(cluster):
    secret = api_get(cluster, SECRET_PATH)
    return None if secret is None else {k: decode(v) for k, v in secret["data"].items()}


def bundles(cluster):
    """caBundle of each webhook of VWC hook, decoded ('' when blank, None when absent)."""
    vwc = api_get(cluster, VWC_PATH)
    if vwc is None:
        return None
    return [decode(w["clientConfig"]["caBundle"]) if "caBundle" in w["clientConfig"] else None
            for w in vwc["webhooks"]]


def holds(cluster, ca):
    return bundles(cluster) == [ca, ca]


def folder(sidecar):
    out = {}
    for name in ("tls.crt", "tls.key", "ca.crt"):
        try:
            with open(os.path.join(sidecar.cert_dir, name), encoding="utf-8") as f:
                out[name] = f.read()
        except FileNotFoundError:
            out[name] = None
    return out


def data_target(sidecar):
    return os.readlink(os.path.join(sidecar.cert_dir, "..data"))


def requests_by(cluster, user, verb=None, resource=None):
    return [e for e in cluster.request_log()["requests"] if e["user"] == user
            and (verb is None or e["verb"] == verb)
            and (resource is None or e["resource"] == resource)]


def writes_by(cluster, user):
    return [(e["verb"], e["resource"], e["name"], e["code"])
            for e in requests_by(cluster, user) if e["verb"] in WRITE_VERBS]


def logged_at(entry):
    """The emulator's time of a request-log entry (when it answered), in unix seconds."""
    return datetime.datetime.strptime(entry["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def wait_quiet(cluster, user, quiet=1.0, bound=BOUND):
    """Waits until `user` has sent no request for `quiet` seconds (the passes that follow
    start-up have settled)."""
    last, since = None, time.monotonic()
    deadline = since + bound
    while time.monotonic() < deadline:
        count = len(requests_by(cluster, user))
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(POLL)
    pytest.fail(f"{user} never went quiet for {quiet}s")


def blank_bundle(cluster, index=0):
    cluster.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json", "-p",
                    json.dumps([{"op": "replace",
                                 "path": f"/webhooks/{index}/clientConfig/caBundle",
                                 "value": ""}]))


def measure_repair(cluster, ca, user=USER, watch=()):
    """After a write that broke a caBundle (the request log was reset just before it):
    waits for the repair and returns (seconds from the breaking write to certctl's patch as
    the API server logged them, seconds from now until the repair was seen)."""
    seen_from = time.monotonic()
    wait_for(lambda: holds(cluster, ca), "the caBundle repaired", watch=watch)
    seen = time.monotonic() - seen_from
    log = cluster.request_log()["requests"]
    broke = [e for e in log if e["user"] == "admin" and e["resource"] ==
             "validatingwebhookconfigurations" and e["verb"] in WRITE_VERBS and e["code"] < 300]
    assert broke, log
    repairs = [e for e in log if e["user"] == user and e["verb"] == "patch" and e["code"] < 300
               and e["resource"] == "validatingwebhookconfigurations"
               and logged_at(e) >= logged_at(broke[-1])]
    assert repairs, f"the caBundle came back without a patch by {user}: {log}"
    logged = logged_at(repairs[0]) - logged_at(broke[-1])
    print(f"repair: {logged:.3f}s between the writes, seen {seen:.3f}s after the command")
    return logged, seen


def without_bundles(vwc):
    """The configuration minus caBundle and the metadata the server changes on a write."""
    out = copy.deepcopy(vwc)
    for webhook in out["webhooks"]:
        webhook["clientConfig"].pop("caBundle", None)
    for key in ("resourceVersion", "generation", "managedFields"):
        out["metadata"].pop(key, None)
    return out


def openssl_not_after(pem):
    out = subprocess.run(["openssl", "x509", "-noout", "-enddate"], input=pem,
                         capture_output=True, text=True, check=True).stdout.strip()
    text = " ".join(out.split("=", 1)[1].split())  # "Nov 25 02:56:51 2036 GMT"
    return datetime.datetime.strptime(text, "%b %d %H:%M:%S %Y GMT").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def samples(metrics_text):
    """{(sample name, frozenset(labels)): value} and {family name: type}."""
    values, types = {}, {}
    for family in text_string_to_metric_families(metrics_text):
        types[family.name] = family.type
        for sample in family.samples:
            values[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return values, types


def sample(values, name, **labels):
    key = (name, frozenset(labels.items()))
    assert key in values, f"no sample {name}{labels}: {sorted(values)}"
    return values[key]


# --- scenarios ----------------------------------------------------------------------------

@pytest.mark.backends("real")
def test_cold_start_secret_folder_bundle_readiness_and_tls(hook, sidecars, tmp_path):
    sidecar = sidecars()
    wait_ready(sidecar)

    secret = api_get(hook, SECRET_PATH)
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "certctl"
    data = {k: decode(v) for k, v in secret["data"].items()}
    assert {"ca.crt", "tls.crt", "tls.key"} <= set(data)

    # The folder: ..data -> a timestamped set folder beside it, relative links into ..data.
    target = data_target(sidecar)
    assert not os.path.isabs(target) and target.startswith("..") and "/" not in target, target
    assert os.path.isdir(os.path.join(sidecar.cert_dir, target))
    for name in ("tls.crt", "tls.key", "ca.crt"):
        assert os.readlink(os.path.join(sidecar.cert_dir, name)) == f"..data/{name}"
    key_mode = os.stat(os.path.join(sidecar.cert_dir, "tls.key")).st_mode & 0o777
    assert key_mode == 0o600, oct(key_mode)
    assert folder(sidecar) == {name: data[name] for name in ("tls.crt", "tls.key", "ca.crt")}

    assert bundles(hook) == [data["ca.crt"], data["ca.crt"]]
    assert sidecar.readyz() == (200, "ok\n")
    assert sidecar.healthz() == (200, "ok\n")
    assert os.path.exists(sidecar.ready_file)
    log = sidecar.log()
    assert f"created: secret/{NS}/{SECRET} (it did not exist)" in log, log
    assert "injected the CA bundle into validatingwebhookconfiguration/hook" in log, log
    assert any(line.endswith(" ready") for line in log.splitlines()), log
    # Nothing went wrong on the way (a denied request, a failed write, ...).
    warnings = [line for line in log.splitlines()
                if line.split()[1:2] in (["warning"], ["error"], ["critical"])]
    assert warnings == [], warnings

    # TLS for real: serve the folder's pair, trust only the bundle the VWC carries.
    bundle = tmp_path / "bundle.crt"
    bundle.write_text(decode(api_get(hook, VWC_PATH)["webhooks"][0]["clientConfig"]["caBundle"]))
    port, = free_ports(1)
    server_out = tmp_path / "s_server.out"
    with open(server_out, "wb") as out:
        server = subprocess.Popen(
            ["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-www",
             "-cert", os.path.join(sidecar.cert_dir, "tls.crt"),
             "-key", os.path.join(sidecar.cert_dir, "tls.key")],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "ACCEPT" in server_out.read_text(errors="replace") or server.poll(),
                 "openssl s_server to listen")
        assert server.poll() is None, server_out.read_text(errors="replace")

        def client(ca_file, host=HOST):
            return subprocess.run(
                ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", host,
                 "-verify_return_error", "-verify_hostname", host, "-CAfile", str(ca_file)],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20)

        good = client(bundle)
        assert good.returncode == 0, good.stdout + good.stderr
        assert "Verify return code: 0 (ok)" in good.stdout, good.stdout
        # Controls: the handshake is really checked (another CA, another name both fail).
        for ca_file, host in ((hook.ca_path, HOST), (bundle, f"other.{NS}.svc")):
            bad = client(ca_file, host)
            assert bad.returncode != 0, bad.stdout
            assert "Verify return code: 0 (ok)" not in bad.stdout
    finally:
        server.kill()
        server.wait()


@pytest.mark.backends("real")
def test_blanked_and_reapplied_bundles_are_repaired_within_2s(hook, sidecars):
    sidecar = sidecars()
    wait_ready(sidecar)
    ca = secret_data(hook)["ca.crt"]
    manifest = hook_manifest()

    # 1. A JSON patch blanks one caBundle.
    before = api_get(hook, VWC_PATH)
    hook.reset_request_log()
    blank_bundle(hook, 1)
    logged, seen = measure_repair(hook, ca, watch=[sidecar])
    assert logged < REPAIR_LIMIT and seen < REPAIR_LIMIT, (logged, seen)
    assert without_bundles(api_get(hook, VWC_PATH)) == without_bundles(before)

    # 2. `kubectl apply` of the manifest as written (no caBundle): its three-way merge keeps
    #    fields the manifest never set, so the bundles survive and there is nothing to repair.
    applied = json.loads(hook.kubectl("apply", "-f", "-", "-o", "json",
                                      input=json.dumps(manifest)).stdout)
    assert bundles(hook) == [ca, ca]
    assert_contains(applied, manifest)

    # 3. `kubectl apply` of a manifest that renders caBundle: "" (a chart's placeholder, as
    #    helm upgrade applies it): both bundles blanked at once (an empty []byte, which the
    #    API server leaves out), repaired, nothing else moved.
    blanking = copy.deepcopy(manifest)
    for webhook in blanking["webhooks"]:
        webhook["clientConfig"]["caBundle"] = ""
    hook.reset_request_log()
    applied = json.loads(hook.kubectl("apply", "-f", "-", "-o", "json",
                                      input=json.dumps(blanking)).stdout)
    assert [w["clientConfig"].get("caBundle") for w in applied["webhooks"]] == [None, None], \
        applied
    logged, seen = measure_repair(hook, ca, watch=[sidecar])
    assert logged < REPAIR_LIMIT and seen < REPAIR_LIMIT, (logged, seen)
    repaired = api_get(hook, VWC_PATH)
    assert without_bundles(repaired) == without_bundles(applied)
    assert_contains(without_bundles(repaired), without_bundles(blanking))

    # 4. The whole configuration replaced without caBundle (helm upgrade --force, kubectl
    #    replace): the fields are gone, then restored; nothing else moved.
    hook.reset_request_log()
    replaced = json.loads(hook.kubectl("replace", "-f", "-", "-o", "json",
                                       input=json.dumps(manifest)).stdout)
    assert all("caBundle" not in w["clientConfig"] for w in replaced["webhooks"]), replaced
    logged, seen = measure_repair(hook, ca, watch=[sidecar])
    assert logged < REPAIR_LIMIT and seen < REPAIR_LIMIT, (logged, seen)
    repaired = api_get(hook, VWC_PATH)
    assert without_bundles(repaired) == without_bundles(replaced)
    assert_contains(repaired, manifest)
    assert secret_data(hook)["ca.crt"] == ca
    assert sidecar.readyz() == (200, "ok\n")


@pytest.mark.backends("real")
def test_deleted_secret_is_recreated_and_everything_follows(hook, sidecars):
    sidecar = sidecars()
    wait_ready(sidecar)
    old = secret_data(hook)
    old_set = data_target(sidecar)
    hook.reset_request_log()
    hook.kubectl("delete", "secret", SECRET, "-n", NS)

    def recreated():
        data = secret_data(hook)
        return data if data and data["ca.crt"] != old["ca.crt"] else None

    new = wait_for(recreated, "a new Secret with a new CA", watch=[sidecar])
    assert new["tls.crt"] != old["tls.crt"] and new["tls.key"] != old["tls.key"]
    wanted = {name: new[name] for name in ("tls.crt", "tls.key", "ca.crt")}
    wait_for(lambda: folder(sidecar) == wanted, "the folder swapped to the new pair",
             watch=[sidecar])
    assert data_target(sidecar) != old_set
    wait_for(lambda: holds(hook, new["ca.crt"]), "the bundles updated to the new CA",
             watch=[sidecar])
    wait_ready(sidecar)
    assert [w[:3] for w in writes_by(hook, USER) if w[1] == "secrets"] == \
        [("create", "secrets", "")], writes_by(hook, USER)
    assert sidecar.log().count(f"created: secret/{NS}/{SECRET} (it did not exist)") == 2


def damaged_ca_crt(damage, data):
    """ca.crt as another writer damaged it: text that is no certificate, the server
    certificate twice, or a CA of another key with our CA's own name."""
    if damage == "garbage":
        return "not a certificate\n"
    if damage == "two-leaves":
        return data["tls.crt"] * 2
    name = x509.load_pem_x509_certificate(data["ca.crt"].encode()).subject.get_attributes_for_oid(
        NameOID.COMMON_NAME)[0].value
    return Authority(name).cert_pem


@pytest.mark.backends("real")
@pytest.mark.parametrize("damage", ["garbage", "two-leaves", "same-name-ca"])
def test_a_damaged_ca_crt_is_rebuilt_from_the_targets_without_a_new_ca(hook, sidecars, damage):
    """ca.key still matches the CA every target trusts: ca.crt is rebuilt from it, the CA,
    key and server certificate kept, and no caBundle is written."""
    sidecar = sidecars()
    wait_ready(sidecar)
    old = secret_data(hook)
    wait_quiet(hook, USER)
    hook.reset_request_log()
    patch = {"data": {"ca.crt": base64.b64encode(damaged_ca_crt(damage, old).encode()).decode()}}
    hook.kubectl("patch", "secret", SECRET, "-n", NS, "-p", json.dumps(patch))
    wait_for(lambda: secret_data(hook) == old, "the Secret as it was", watch=[sidecar])
    wait_quiet(hook, USER)
    assert secret_data(hook) == old
    assert holds(hook, old["ca.crt"])
    # One write of the Secret, none of the targets (an Event says what happened).
    assert [w[:2] for w in writes_by(hook, USER) if w[1] != "events"] == \
        [("update", "secrets")], writes_by(hook, USER)
    assert "rebuilt from validatingwebhookconfiguration/hook's caBundle, the CA kept" in \
        sidecar.log(), sidecar.log()[-3000:]
    wait_ready(sidecar)


STEADY_RESYNC = 2.0   # the steady-state test's --resync: its window is counted in passes
STEADY_PASSES = 5


def passes(entries, gap=0.5):
    """The start times of the bursts of requests in `entries` (request-log entries): a
    request more than `gap` seconds after the one before starts a new burst."""
    starts, last = [], None
    for at in sorted(logged_at(e) for e in entries):
        if last is None or at - last > gap:
            starts.append(at)
        last = at
    return starts


def test_steady_state_writes_nothing(hook, sidecars):
    """Steady state, counted in resyncs rather than minutes: over STEADY_PASSES forced
    resyncs certctl reads and writes nothing, and sends nothing between them (no polling
    loop; with the default --resync of 1 h that is an hour of silence)."""
    sidecar = sidecars("a", "--resync", f"{STEADY_RESYNC:g}s")
    wait_ready(sidecar)
    wait_quiet(hook, USER, quiet=0.5)
    hook.reset_request_log()
    secret_reads = lambda: requests_by(hook, USER, "get", "secrets")  # noqa: E731
    wait_for(lambda: len(passes(secret_reads())) >= STEADY_PASSES,
             f"{STEADY_PASSES} resync passes", bound=STEADY_PASSES * STEADY_RESYNC * 1.2 + 10,
             watch=[sidecar])
    requests = requests_by(hook, USER)
    assert writes_by(hook, USER) == [], requests
    # Every request belongs to a pass, and passes are a resync apart (jittered by 10 %):
    # nothing polls in between.
    starts = passes(requests)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert gaps and all(g >= STEADY_RESYNC * 0.85 for g in gaps), (gaps, requests)
    assert sidecar.readyz() == (200, "ok\n")


def test_sighup_reconciles_at_once_and_keeps_running(hook, sidecars):
    sidecar = sidecars()
    wait_ready(sidecar)
    wait_quiet(hook, USER)
    for round_ in (1, 2):
        hook.reset_request_log()
        sidecar.send(signal.SIGHUP)
        wait_for(lambda: requests_by(hook, USER, "get", "secrets"),
                 f"a GET of the Secret after SIGHUP #{round_}", watch=[sidecar])
        wait_for(lambda: requests_by(hook, USER, "get", "validatingwebhookconfigurations"),
                 f"a GET of the target after SIGHUP #{round_}", watch=[sidecar])
        assert sidecar.alive()
        assert writes_by(hook, USER) == []
    assert sidecar.log().count("SIGHUP: reconciling now") == 2, sidecar.log()
    assert sidecar.readyz() == (200, "ok\n")


@pytest.mark.backends("real")
@pytest.mark.parametrize("sig, leader_elect", [(signal.SIGTERM, False),
                                               (signal.SIGTERM, True),
                                               (signal.SIGINT, True)],
                         ids=["sigterm", "sigterm-leader-elect", "sigint-leader-elect"])
def test_stop_signal_exits_0_within_5s_and_releases(hook, sidecars, sig, leader_elect):
    args = ["--leader-elect", "--identity", "solo"] if leader_elect else []
    sidecar = sidecars("a", *args)
    wait_ready(sidecar)
    assert os.path.exists(sidecar.ready_file)
    if leader_elect:
        lease = api_get(hook, LEASE_PATH)
        assert lease["spec"]["holderIdentity"] == "solo", lease
    code, took = sidecar.stop(sig)
    print(f"exit {code} {took:.3f}s after the signal")
    assert code == 0, sidecar.describe()
    assert took < STOP_LIMIT, took
    assert not os.path.exists(sidecar.ready_file)
    log = sidecar.log()
    assert log.rstrip().endswith("stopped"), log
    assert sidecar.readyz()[0] is None  # the health server is gone with the process
    if leader_elect:
        spec = api_get(hook, LEASE_PATH)["spec"]
        assert "holderIdentity" not in spec, spec
        assert spec["leaseDurationSeconds"] == 1, spec
        assert "released the lease" in log, log


@pytest.mark.backends("real")
def test_three_replicas_elect_one_writer_then_fail_over(infra, sidecars):
    names = ["r0", "r1", "r2"]
    users = {name: f"system:serviceaccount:{NS}:certctl-{name}" for name in names}
    for user in users.values():
        infra.add_user(user, RULES)
    infra.kubectl("apply", "-f", "-", input=json.dumps(hook_manifest()))
    infra.reset_request_log()
    replicas = {name: sidecars(name, "--leader-elect", "--identity", name, user=users[name])
                for name in names}
    wait_ready(*replicas.values())

    lease = api_get(infra, LEASE_PATH)
    leader = lease["spec"]["holderIdentity"]
    assert leader in names, lease
    log = infra.request_log()["requests"]
    creates = [e for e in log if e["verb"] == "create" and e["resource"] == "secrets"]
    assert [e["code"] for e in creates] == [201], creates
    assert creates[0]["user"] == users[leader]
    for name in names:  # followers wrote nothing that succeeded, not even the Lease
        if name != leader:
            succeeded = [w for w in writes_by(infra, users[name]) if w[3] < 300]
            assert succeeded == [], (name, succeeded)
    data = secret_data(infra)
    wanted = {name: data[name] for name in ("tls.crt", "tls.key", "ca.crt")}
    for replica in replicas.values():
        assert folder(replica) == wanted, replica.name
        values, _ = samples(replica.metrics()[0])
        assert sample(values, "certctl_leader") == (1 if replica.name == leader else 0)
        assert sample(values, "certctl_ready") == 1
    assert holds(infra, data["ca.crt"])
    assert f"became the leader ({leader})" in replicas[leader].log()

    # The leader dies without releasing: another replica takes over within the lease.
    replicas[leader].proc.kill()
    replicas[leader].proc.wait()
    killed_at = time.monotonic()
    survivors = [r for name, r in replicas.items() if name != leader]

    def new_holder():
        holder = api_get(infra, LEASE_PATH)["spec"].get("holderIdentity")
        return holder if holder not in (None, leader) else None

    successor = wait_for(new_holder, "another replica to take the lease",
                         bound=LEASE_DURATION + 10, watch=survivors)
    took = time.monotonic() - killed_at
    print(f"takeover by {successor} {took:.1f}s after the leader {leader} was killed")
    assert successor in names and successor != leader
    assert took < LEASE_DURATION + 7, took  # lease duration + a candidate's retry period
    wait_for(lambda: f"became the leader ({successor})" in replicas[successor].log(),
             "the successor's log", watch=survivors)

    # The new leader repairs.
    infra.reset_request_log()
    blank_bundle(infra, 0)
    logged, seen = measure_repair(infra, data["ca.crt"], user=users[successor], watch=survivors)
    assert logged < REPAIR_LIMIT, (logged, seen)
    assert secret_data(infra) == data
    wait_ready(*survivors)
    values, _ = samples(replicas[successor].metrics()[0])
    assert sample(values, "certctl_leader") == 1


@pytest.mark.backends("real")
def test_shorter_lease_times_are_written_to_the_lease_and_hand_over_sooner(infra, sidecars):
    names = ["s0", "s1"]
    users = {name: f"system:serviceaccount:{NS}:certctl-{name}" for name in names}
    for user in users.values():
        infra.add_user(user, RULES)
    infra.kubectl("apply", "-f", "-", input=json.dumps(hook_manifest()))
    times = ["--lease-duration", "3s", "--lease-renew-deadline", "2s", "--lease-retry-period", "1s"]
    replicas = {name: sidecars(name, "--leader-elect", "--identity", name, *times,
                               user=users[name]) for name in names}
    wait_ready(*replicas.values())
    spec = api_get(infra, LEASE_PATH)["spec"]
    assert spec["leaseDurationSeconds"] == 3, spec
    leader = spec["holderIdentity"]
    (survivor,) = [r for name, r in replicas.items() if name != leader]

    replicas[leader].proc.kill()
    replicas[leader].proc.wait()
    killed_at = time.monotonic()
    wait_for(lambda: api_get(infra, LEASE_PATH)["spec"].get("holderIdentity") == survivor.name,
             "the survivor to take the lease", bound=LEASE_DURATION, watch=[survivor])
    took = time.monotonic() - killed_at
    print(f"takeover {took:.1f}s after the leader was killed (lease 3s, retry 1s)")
    assert took < 3 + 2.2 + 2, took  # the lease, a candidate's longest wait, and slack
    assert api_get(infra, LEASE_PATH)["spec"]["leaseDurationSeconds"] == 3


def leaf_dns_names(hook):
    leaf = x509.load_pem_x509_certificate(secret_data(hook)["tls.crt"].encode())
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return names.get_values_for_type(x509.DNSName)


@pytest.mark.backends("real")
def test_a_rolling_update_that_adds_a_name_completes(hook, sidecars):
    """The chart's rolling update after `certificate.extraDnsNames` changed: the old replica
    leads and issues for its own flags. The new one asks for the name in the Secret and
    waits; the old leader issues it beside its own, from the same CA; the new one becomes
    ready serving it, so the old one can go, and the new leader has nothing to issue."""
    old = sidecars("old", "--leader-elect", "--identity", "old")
    wait_ready(old)
    ca = secret_data(hook)["ca.crt"]
    started = time.monotonic()
    new = sidecars("new", "--leader-elect", "--identity", "new", "--dns-name", "hook.example.com")
    wait_ready(new)
    took = time.monotonic() - started
    assert api_get(hook, LEASE_PATH)["spec"]["holderIdentity"] == "old"
    annotations = api_get(hook, SECRET_PATH)["metadata"]["annotations"]
    assert annotations["certctl.io/requested-names"] == "hook.example.com", annotations
    assert "names-requested-at" in " ".join(annotations), annotations
    assert "hook.example.com" in leaf_dns_names(hook)
    assert leaf_dns_names(hook)[0] == HOST, "the leader's own name first"
    assert folder(new)["tls.crt"] == secret_data(hook)["tls.crt"]
    assert "the leader has not issued them" not in new.log()
    assert took < 30, f"ready {took:.1f}s after it started: the request was not answered"
    assert secret_data(hook)["ca.crt"] == ca and holds(hook, ca)
    issued = secret_data(hook)["tls.crt"]

    assert old.stop(signal.SIGTERM)[0] == 0  # the old pod goes: it releases the Lease
    wait_for(lambda: api_get(hook, LEASE_PATH)["spec"].get("holderIdentity") == "new",
             "the new replica to lead", bound=BOUND, watch=[new])
    wait_ready(new)
    assert secret_data(hook)["tls.crt"] == issued, "the new leader had nothing to issue"
    assert new.readyz()[0] == 200


@pytest.mark.backends("real")
def test_a_rename_without_leader_election_keeps_the_called_name_and_does_not_fight(hook,
                                                                                   sidecars):
    """The chart's rolling update of one replica (no leader election) after webhook.service
    was renamed: the new pod leads with --service renamed while the old one still runs and
    the target calls hook. The new leaf names renamed and keeps every form of hook, which
    the target calls, so the old pod finds its names covered and writes nothing: no fight,
    and every call still verifies."""
    old = sidecars("old")
    wait_ready(old)
    ca = secret_data(hook)["ca.crt"]
    new = sidecars("new", service="renamed")
    wait_ready(new)
    names = leaf_dns_names(hook)
    assert names[0] == f"renamed.{NS}.svc", names
    assert {HOST, "hook", f"hook.{NS}", f"hook.{NS}.svc.cluster.local"} <= set(names), names
    assert secret_data(hook)["ca.crt"] == ca and holds(hook, ca)
    wait_for(lambda: folder(old)["tls.crt"] == secret_data(hook)["tls.crt"],
             "the old pod to serve the new leaf", bound=BOUND, watch=[old])
    wait_ready(old)
    for sidecar, writes in ((old, 1), (new, 1)):  # the old one created it, the new re-issued
        values, _ = samples(sidecar.metrics()[0])
        assert sample(values, "certctl_writes_total", kind="secret") == writes, sidecar.name


def test_a_leaf_that_drops_a_name_another_webhook_calls_is_warned_of_once(hook, sidecars):
    """A controller for hook-b takes over the Secret made for hook, which demo-webhook (no
    target) still calls trusting the Secret's CA: it re-issues the leaf all the same (a
    controller must not wedge) and warns once, naming demo-webhook."""
    first = sidecars("first")
    wait_ready(first)
    first.stop()
    hook.kubectl("apply", "-f", "-", input=json.dumps(webhook_configuration(
        VWC, "demo-webhook", ["v.demo.io"], ca_bundle=secret_data(hook)["ca.crt"])))
    hook.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json", "-p",
                 json.dumps([{"op": "replace", "path": f"/webhooks/{i}/clientConfig/service/name",
                              "value": "hook-b"} for i in range(2)]))
    lister = "system:serviceaccount:infra:lister"
    hook.add_user(lister, [*RULES, {"apiGroups": ["admissionregistration.k8s.io"],
                                    "resources": ["validatingwebhookconfigurations",
                                                  "mutatingwebhookconfigurations"],
                                    "verbs": ["list"]}])
    second = sidecars("second", user=lister, service="hook-b")
    wait_ready(second)
    assert leaf_dns_names(hook)[0] == f"hook-b.{NS}.svc"
    wait_quiet(hook, lister)

    warnings = [line for line in second.log().splitlines()
                if "warning" in line and "validatingwebhookconfiguration/demo-webhook" in line]
    assert len(warnings) == 1, second.log()
    assert f"no longer names {HOST}, which validatingwebhookconfiguration/demo-webhook " \
           "webhooks[0] (v.demo.io) calls with this Secret's CA" in warnings[0], warnings


@pytest.mark.backends("real")
@pytest.mark.backends("real")
def test_revoked_rbac_shows_the_target_checks_unknown_and_its_return_is_noticed_soon(hook,
                                                                                     sidecars):
    """While every read is refused, /readyz?verbose does not go on saying the caBundles are
    injected (a foreign CA went into one meanwhile): the target checks are unknown. A 403
    costs the API server little, so retries stay at most 10 s apart (jittered up to 15 s):
    bindings put back are noticed and the caBundle repaired within 20 s, not a minute."""
    sidecar = sidecars()
    wait_ready(sidecar)
    ca = secret_data(hook)["ca.crt"]

    hook.revoke_user(USER)
    # The write that wakes certctl: its watch, opened while it was allowed, goes on.
    foreign = Authority("someone-else").cert_pem
    hook.kubectl("patch", "validatingwebhookconfiguration", "hook", "--type", "json", "-p",
                 json.dumps([{"op": "replace", "path": "/webhooks/1/clientConfig/caBundle",
                              "value": base64.b64encode(foreign.encode()).decode()}]))

    def verbose():
        return sidecar.get("/readyz?verbose")[:2]

    wait_for(lambda: "[-]injected unknown: " in (verbose()[1] or ""),
             "/readyz?verbose saying injected is unknown", bound=BOUND, watch=[sidecar])
    status, body = verbose()
    assert status == 503, body
    assert "[-]certificate failed: " in body and "forbidden" in body, body
    assert "[-]callable unknown: " in body and "[+]injected ok" not in body, body
    assert bundles(hook) == [ca, foreign]

    # Seven refused passes: 0.5 + 1 + 2 + 4 + 8 s of back-off and then the cap, where an
    # uncapped back-off would wait 32 s (16 to 48 s jittered) before the next one.
    def refused_passes():
        values = sidecar_metrics(sidecar) or {}
        return metric(values, "certctl_reconcile_total", 0, result="error")

    wait_for(lambda: refused_passes() >= 7, "seven refused passes", bound=60,
             watch=[sidecar], poll=0.5)

    hook.add_user(USER, RULES)
    restored = time.monotonic()
    wait_for(lambda: holds(hook, ca), "the caBundle repaired once the bindings are back",
             bound=30, watch=[sidecar])
    assert time.monotonic() - restored < 20, time.monotonic() - restored
    wait_ready(sidecar)
    assert "[+]injected ok" in verbose()[1]


def test_the_commands_the_docs_give_list_certctls_events(hook, sidecars):
    """`kubectl events --for` (docs/troubleshooting.md#events) lists certctl's Events: those
    about the Secret in its namespace, those about a cluster-scoped target in `default`.
    `kubectl describe secret` has no Events section for a Secret."""
    wait_ready(sidecars())

    def listed(namespace, about):
        return hook.kubectl("events", "-n", namespace, "--for", about).stdout

    wait_for(lambda: "Created" in listed(NS, f"secret/{SECRET}"), "the Secret's Event",
             bound=BOUND)
    wait_for(lambda: "CABundleInjected" in listed("default", "validatingwebhookconfiguration/hook"),
             "the configuration's Event in default", bound=BOUND)
    described = hook.kubectl("describe", "secret", SECRET, "-n", NS).stdout
    assert "Created" not in described and "Events:" not in described, described


def test_api_faults_are_ridden_out_without_replacing_the_secret(hook, sidecars):
    sidecar = sidecars()
    wait_ready(sidecar)
    before = secret_data(hook)
    old_set = data_target(sidecar)
    wait_quiet(hook, USER)  # the faults are for what follows, not the start-up's last passes
    hook.reset_request_log()

    # Every read, list and watch fails for a few seconds (the watches, ended by the drop,
    # back off between attempts); the history is compacted, so a re-watch from before it
    # gets 410 and lists again; a caBundle is blanked meanwhile and its first repairs fail.
    hook.inject_fault(method="GET", path=".", status=503, count=6)
    hook.drop_watches()
    compacted = hook.compact()
    resp = hook.api("PATCH", VWC_PATH, [{"op": "replace", "path": "/webhooks/0/clientConfig/"
                                         "caBundle", "value": ""}],
                    content_type="application/json-patch+json")
    assert resp.status == 200, resp
    hook.inject_fault(method="PATCH", path="/validatingwebhookconfigurations/hook$", status=503,
                      count=2)

    # Nobody else sends GETs or PATCHes meanwhile (the admin API is not faulted).
    wait_for(lambda: hook._admin("GET", "/_emulator/faults")["faults"] == [],
             "certctl to run into every injected 503", watch=[sidecar])
    wait_for(lambda: holds(hook, before["ca.crt"]), "the caBundle repaired", watch=[sidecar])
    wait_ready(sidecar)

    # Both watches are back, from a revision the compaction kept (the 503s leave each in its
    # own backoff: the repair above may have come from the other one's list).
    def watching(resource):
        return any(e["code"] == 200 and int(urllib.parse.parse_qs(e["query"])
                                            ["resourceVersion"][0]) >= compacted
                   for e in requests_by(hook, USER, "watch", resource))

    wait_for(lambda: watching("secrets") and watching("validatingwebhookconfigurations"),
             "both watches re-established", watch=[sidecar])
    log = requests_by(hook, USER)
    summary = [(e["verb"], e["resource"], e["code"]) for e in log]
    assert sum(e["code"] == 503 for e in log) == 8, summary
    assert ("list", "secrets", 200) in summary, summary  # its watch got 410: listed again
    assert ("patch", "validatingwebhookconfigurations", 200) in summary, summary
    assert [w for w in writes_by(hook, USER) if w[1] == "secrets"] == []
    assert secret_data(hook) == before
    assert data_target(sidecar) == old_set
    assert sidecar.alive()

    # The watches are back: a new blank is repaired as fast as ever.
    hook.reset_request_log()
    blank_bundle(hook, 1)
    logged, seen = measure_repair(hook, before["ca.crt"], watch=[sidecar])
    assert logged < REPAIR_LIMIT and seen < REPAIR_LIMIT, (logged, seen, sidecar.log())


def test_metrics(hook, sidecars):
    sidecar = sidecars()
    wait_ready(sidecar)
    text, headers = sidecar.metrics()
    assert headers.get("Content-Type", "").startswith("text/plain"), headers
    values, types = samples(text)
    # The parser names counter families without _total.
    expected = {
        "certctl_certificate_expiration_timestamp_seconds": "gauge",
        "certctl_reconcile": "counter",
        "certctl_reconcile_duration_seconds": "histogram",
        "certctl_writes": "counter",
        "certctl_ready": "gauge",
        "certctl_leader": "gauge",
        "certctl_last_successful_reconcile_timestamp_seconds": "gauge",
    }
    assert {name: types.get(name) for name in expected} == expected, types
    assert sample(values, "certctl_ready") == 1
    assert sample(values, "certctl_leader") == 1

    data = secret_data(hook)
    secret = f"{NS}/{SECRET}"
    leaf = sample(values, "certctl_certificate_expiration_timestamp_seconds",
                  secret=secret, role="leaf")
    assert abs(leaf - openssl_not_after(data["tls.crt"])) <= 1, leaf
    ca = sample(values, "certctl_certificate_expiration_timestamp_seconds",
                secret=secret, role="ca")
    assert abs(ca - openssl_not_after(data["ca.crt"])) <= 1, ca

    assert sample(values, "certctl_writes_total", kind="secret") == 1
    assert sample(values, "certctl_writes_total", kind="validatingwebhookconfiguration") == 1
    ready_passes = sample(values, "certctl_reconcile_total", result="ready")
    assert ready_passes >= 1
    passes = sum(v for (name, _), v in values.items() if name == "certctl_reconcile_total")
    count = sum(v for (name, _), v in values.items()
                if name == "certctl_reconcile_duration_seconds_count")
    assert count == passes, (count, passes)
    buckets = sorted(((float(dict(labels)["le"]), v) for (name, labels), v in values.items()
                      if name == "certctl_reconcile_duration_seconds_bucket"
                      and dict(labels)["result"] == "ready"))
    assert buckets and buckets[-1] == (float("inf"), ready_passes), buckets
    assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), buckets
    assert 0 < sample(values, "certctl_reconcile_duration_seconds_sum", result="ready") < 30
    last = sample(values, "certctl_last_successful_reconcile_timestamp_seconds")
    assert sidecar.started_at - 1 <= last <= time.time() + 1, (last, sidecar.started_at)

    # The counters move: a repair is one more write of the target, none of the Secret.
    blank_bundle(hook, 0)
    wait_for(lambda: holds(hook, data["ca.crt"]), "the caBundle repaired", watch=[sidecar])

    def vwc_writes():
        values, _ = samples(sidecar.metrics()[0])
        return sample(values, "certctl_writes_total", kind="validatingwebhookconfiguration")

    wait_for(lambda: vwc_writes() == 2, "certctl_writes_total to count the repair",
             watch=[sidecar])
    values, _ = samples(sidecar.metrics()[0])
    assert sample(values, "certctl_writes_total", kind="secret") == 1
    assert sample(values, "certctl_reconcile_total", result="ready") > ready_passes


def test_missing_target_keeps_it_unready_until_created(infra, sidecars):
    sidecar = sidecars()

    def unready_naming_target():
        status, body = sidecar.readyz()
        return status == 503 and "validatingwebhookconfiguration/hook" in body

    wait_for(unready_naming_target, "/readyz 503 naming the missing target", watch=[sidecar])
    status, body = sidecar.readyz()
    assert body.startswith("not ready: "), body
    assert sidecar.healthz() == (200, "ok\n")
    assert not os.path.exists(sidecar.ready_file)
    values, _ = samples(sidecar.metrics()[0])
    assert sample(values, "certctl_ready") == 0
    # The Secret and the folder do not wait for the target.
    data = secret_data(infra)
    assert data is not None
    assert folder(sidecar) == {name: data[name] for name in ("tls.crt", "tls.key", "ca.crt")}

    infra.reset_request_log()
    infra.kubectl("apply", "-f", "-", input=json.dumps(hook_manifest()))
    created = time.monotonic()
    wait_for(lambda: holds(infra, data["ca.crt"]) and sidecar.readyz()[0] == 200,
             "the new target injected and /readyz 200", watch=[sidecar])
    took = time.monotonic() - created
    print(f"target injected and ready {took:.3f}s after kubectl apply returned")
    assert took < REPAIR_LIMIT, took
    log = infra.request_log()["requests"]
    made = [e for e in log if e["user"] == "admin" and e["verb"] == "create"]
    patched = [e for e in log if e["user"] == USER and e["verb"] == "patch" and e["code"] == 200]
    assert made and patched, log
    assert logged_at(patched[0]) - logged_at(made[0]) < REPAIR_LIMIT
    assert os.path.exists(sidecar.ready_file)
    assert sidecar.readyz() == (200, "ok\n")


@pytest.mark.backends("real")
def test_a_leaf_due_for_renewal_is_reissued_and_the_ca_kept(hook, sidecars, certctl_binary):
    """A Secret whose leaf has 20 days left (--renew-before is 30d): the leaf is re-issued
    from the stored CA; ca.crt and ca.key stay, so the caBundle needs no change."""
    manifest = subprocess.run([certctl_binary, "generate", "--service", "hook", "-n", NS,
                               "--cert-validity", "20d", "-o", "secret-json"],
                              capture_output=True, text=True, check=True, timeout=20).stdout
    hook.kubectl("apply", "-f", "-", input=manifest)
    before = secret_data(hook)
    sidecar = sidecars()
    wait_ready(sidecar)
    after = secret_data(hook)
    assert after["ca.crt"] == before["ca.crt"] and after["ca.key"] == before["ca.key"]
    assert after["tls.crt"] != before["tls.crt"]
    assert openssl_not_after(after["tls.crt"]) > time.time() + 300 * 86400
    assert folder(sidecar) == {name: after[name] for name in ("tls.crt", "tls.key", "ca.crt")}
    assert holds(hook, before["ca.crt"])
    assert f"leaf-reissued: secret/{NS}/{SECRET}" in sidecar.log(), sidecar.log()


SELECTOR = "certctl.example.com/inject=hook"


@pytest.mark.backends("real")
def test_a_new_configuration_matching_the_selector_is_injected_within_2s(infra, sidecars):
    user = f"system:serviceaccount:{NS}:certctl-selector"
    infra.add_user(user, emulator_rules("sidecar", SECRET, NS, {"webhookSelector": SELECTOR},
                                        {"leaderElection": False}))
    labels = {"certctl.example.com/inject": "hook"}
    infra.kubectl("apply", "-f", "-", input=json.dumps(
        webhook_configuration(VWC, "first", ["a.hook.io"], labels=labels)))
    infra.kubectl("apply", "-f", "-", input=json.dumps(
        webhook_configuration(VWC, "unrelated", ["u.hook.io"])))
    sidecar = sidecars("s", user=user, targets=("--webhook-selector", SELECTOR))
    wait_ready(sidecar)
    ca = secret_data(infra)["ca.crt"]

    def bundle_of(name):
        vwc = api_get(infra, f"/apis/admissionregistration.k8s.io/v1/"
                             f"validatingwebhookconfigurations/{name}")
        config = vwc["webhooks"][0]["clientConfig"]
        return decode(config["caBundle"]) if config.get("caBundle") else None

    assert bundle_of("first") == ca
    started = time.monotonic()
    infra.kubectl("apply", "-f", "-", input=json.dumps(
        webhook_configuration(VWC, "second", ["b.hook.io"], labels=labels)))
    wait_for(lambda: bundle_of("second") == ca, "the new configuration injected",
             watch=[sidecar])
    took = time.monotonic() - started
    print(f"a new matching configuration injected {took:.3f}s after kubectl apply started")
    assert took < REPAIR_LIMIT, took
    assert bundle_of("unrelated") is None
    assert [w for w in writes_by(infra, user) if w[2] == "unrelated"] == []


@pytest.mark.time_limit(180)
def test_thirty_seconds_of_503s_dropped_watches_and_compaction_are_ridden_out(hook, sidecars):
    """Every API request fails with 503 for 30 s while the watches are dropped every 3 s and
    the history compacted; a caBundle was blanked just before. certctl keeps running, never
    writes the Secret, and converges once the API is back."""
    sidecar = sidecars()
    wait_ready(sidecar)
    before = secret_data(hook)
    wait_quiet(hook, USER)
    hook.reset_request_log()
    blank_bundle(hook, 0)
    hook.inject_fault(method="*", path="^/(api|apis)/", status=503, count=1_000_000)
    outage_end = time.monotonic() + 30
    compacted = False
    while time.monotonic() < outage_end:
        assert sidecar.alive(), sidecar.describe()
        hook.drop_watches()
        if not compacted and time.monotonic() > outage_end - 15:
            hook.compact()
            compacted = True
        time.sleep(3)
    hook.clear_faults()
    refused = sum(e["code"] == 503 for e in requests_by(hook, USER))
    # Backoff is capped at 60 s (jittered): after a 30 s outage the next try is at most
    # about 50 s away.
    wait_for(lambda: holds(hook, before["ca.crt"]), "the caBundle repaired after the outage",
             bound=90, watch=[sidecar])
    wait_ready(sidecar)
    assert refused > 5, refused
    assert [w for w in writes_by(hook, USER) if w[1] == "secrets"] == []
    assert secret_data(hook) == before
    assert sidecar.alive()
