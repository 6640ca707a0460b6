"""The example webhook server (harness/webhook_server.py) on its own: pairs made by
`certctl generate`, laid out as `certctl run` keeps its folder (a set folder per pair, the
link `..data` swapped by rename, tls.crt/tls.key/ca.crt as links through it), then swapped
under the running server.

Proves: it waits for a pair before listening and gives up after --ready-timeout; it serves
the pair, /healthz and AdmissionReviews (allowed, denied by the label, malformed); a new set
is served within 1 s without a restart; a half-written or mismatched set is ignored (the old
pair keeps serving, the failure is logged once) until a good one follows; a plain folder
rewritten in place is picked up too; a client handshaking back to back through 20 swaps,
trusting the CAs and verifying the name, never fails; SIGTERM exits 0.
"""

import os
import shutil
import signal
import socket
import sys
import time
import uuid

import pytest

from harness.certctl import run_certctl
from harness.waiting import wait_for
from harness.sidecar import (Hammer, WebhookServer, admission_review, handshake, leaf_der,
                             pem_serial, post_review)

SERVICE, NS = "hook", "infra"
HOST = f"{SERVICE}.{NS}.svc"
RELOAD_LIMIT = 1.0   # a new set is served within this (the server looks every 100 ms)
POLL = 0.02


def interpreters():
    """The Debian python3 the suite runs under, and the first python3 on PATH if another."""
    found = {os.path.realpath(sys.executable): sys.executable}
    other = shutil.which("python3")
    if other and os.path.realpath(other) not in found:
        found[os.path.realpath(other)] = other
    return list(found.values())


@pytest.fixture
def pairs(certctl_binary, tmp_path):
    """pairs(n): n pairs from `certctl generate`, each {name: bytes} with its own CA."""
    def make(count):
        out = []
        for i in range(count):
            where = tmp_path / f"pair-{len(os.listdir(tmp_path))}-{i}"
            result = run_certctl(certctl_binary, "generate", "--service", SERVICE, "-n", NS,
                                 "--out-dir", str(where))
            assert result.returncode == 0, result.stderr
            out.append({name: (where / name).read_bytes()
                        for name in ("tls.crt", "tls.key", "ca.crt")})
        return out
    return make


class Folder:
    """A certificate folder written as certctl run (and the kubelet) write it."""

    def __init__(self, path):
        self.path = str(path)
        os.makedirs(self.path, exist_ok=True)
        self.sets = 0

    def publish(self, files, remove_old=True):
        """A new set folder with `files` ({name: bytes}), then ..data renamed over to it,
        then the links by name; the old set is removed at once (the harshest timing)."""
        self.sets += 1
        name = f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{self.sets:04d}"
        folder = os.path.join(self.path, name)
        os.mkdir(folder)
        for file, content in files.items():
            with open(os.path.join(folder, file), "wb") as f:
                f.write(content)
        data = os.path.join(self.path, "..data")
        old = os.readlink(data) if os.path.islink(data) else None
        tmp = os.path.join(self.path, "..data_tmp")
        os.symlink(name, tmp)
        os.rename(tmp, data)
        for file in ("tls.crt", "tls.key", "ca.crt"):
            if not os.path.lexists(os.path.join(self.path, file)):
                os.symlink(f"..data/{file}", os.path.join(self.path, file))
        if old and remove_old:
            shutil.rmtree(os.path.join(self.path, old))
        return name


@pytest.fixture
def servers(tmp_path):
    """start(cert_dir, **kw) starts the server and waits for LISTENING; all are stopped."""
    started = []

    def start(cert_dir, wait=True, **kwargs):
        server = WebhookServer(str(cert_dir), str(tmp_path), name=f"webhook{len(started)}",
                               **kwargs)
        started.append(server)
        return server.start() if wait else server.spawn()

    yield start
    for server in started:
        server.stop()


def bundle_of(tmp_path, *pairs_):
    """A caBundle file holding the CA of each pair."""
    path = tmp_path / f"bundle-{uuid.uuid4().hex[:8]}.crt"
    path.write_bytes(b"".join(p["ca.crt"] for p in pairs_))
    return str(path)


def wait_served(server, cafile, pair, bound=5.0):
    """Seconds until a verified handshake gets `pair`'s leaf (fails after `bound`)."""
    wanted = leaf_der(pair["tls.crt"])
    started = time.monotonic()
    last = None
    while time.monotonic() - started < bound:
        try:
            if handshake(server.port, cafile, HOST) == wanted:
                return time.monotonic() - started
            last = "an older leaf"
        except OSError as e:
            last = f"{type(e).__name__}: {e}"
        assert server.alive(), server.log()
        time.sleep(POLL)
    pytest.fail(f"the new leaf was not served within {bound}s (last: {last})\n{server.log()}")


def log_lines(server, text):
    return [line for line in server.log().splitlines() if text in line]


@pytest.mark.parametrize("python", interpreters())
def test_serves_the_pair_healthz_and_admission_reviews(pairs, tmp_path, servers, python):
    pair, = pairs(1)
    folder = Folder(tmp_path / "certs")
    folder.publish(pair)
    server = servers(folder.path, python=python)
    ca = bundle_of(tmp_path, pair)

    assert handshake(server.port, ca, HOST) == leaf_der(pair["tls.crt"])
    assert log_lines(server, "loaded the certificate: serial=") == \
        log_lines(server, f"serial={pem_serial(pair['tls.crt'].decode())}"), server.log()
    assert server.get("/healthz", ca, HOST) == (200, "ok\n")
    assert server.get("/nothing", ca, HOST)[0] == 404

    # Allowed: the uid echoed, the API version kept.
    uid = str(uuid.uuid4())
    status, body = post_review(server.port, ca, HOST, admission_review(uid))
    assert status == 200, body
    assert body == {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": uid, "allowed": True}}
    # Denied by the label, with a status message.
    uid = str(uuid.uuid4())
    status, body = post_review(server.port, ca, HOST, admission_review(
        uid, name="blocked", labels={"certctl-example/deny": "yes"}))
    assert status == 200, body
    response = body["response"]
    assert response["uid"] == uid and response["allowed"] is False, body
    assert response["status"]["code"] == 403
    assert "ConfigMap blocked" in response["status"]["message"]
    assert "certctl-example/deny" in response["status"]["message"]
    # A DELETE carries the old object only: judged on it.
    review = admission_review("u-delete", labels={"certctl-example/deny": ""},
                              operation="DELETE")
    review["request"]["oldObject"], review["request"]["object"] = \
        review["request"]["object"], None
    assert post_review(server.port, ca, HOST, review)[1]["response"]["allowed"] is False
    # Not an AdmissionReview: 400, and the server goes on.
    for bad in ({"kind": "AdmissionReview"}, {"request": {"uid": ""}}, [1, 2]):
        status, body = post_review(server.port, ca, HOST, bad)
        assert status == 400, (bad, body)
    assert post_review(server.port, ca, HOST, admission_review("again"))[0] == 200

    # Controls: the handshake is really verified (another CA, another name both fail).
    other, = pairs(1)
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        handshake(server.port, bundle_of(tmp_path, other), HOST)
    with pytest.raises(OSError, match="Hostname mismatch|CERTIFICATE_VERIFY_FAILED"):
        handshake(server.port, ca, f"other.{NS}.svc")
    assert server.alive()
    assert server.stop() == 0, server.log()


def catches(pid, signum):
    """True when process `pid` has a handler for `signum` (SigCgt in /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(caught & (1 << (signum - 1)))


def test_waits_for_a_pair_then_listens_and_gives_up_after_the_ready_timeout(
        pairs, tmp_path, servers):
    pair, = pairs(1)
    folder = tmp_path / "late"  # does not even exist yet
    server = servers(folder, wait=False, ready_timeout=20)
    time.sleep(0.5)
    assert server.alive(), server.log()
    assert not server.log(), server.log()  # nothing to say, nothing listening
    Folder(folder).publish(pair)
    server.start(bound=5)
    assert handshake(server.port, bundle_of(tmp_path, pair), HOST) == leaf_der(pair["tls.crt"])

    # No pair within --ready-timeout: exit 1, naming the folder and the last reason.
    broken = Folder(tmp_path / "broken")
    broken.publish({"tls.crt": pair["tls.crt"]})  # no key
    started = time.monotonic()
    quitter = servers(broken.path, wait=False, ready_timeout=1)
    assert quitter.proc.wait(10) == 1
    assert time.monotonic() - started < 5
    assert quitter.wait_listening(1) == ""
    log = quitter.log()
    assert f"no certificate pair in {broken.path} after 1s" in log, log
    assert "tls.key" in log, log

    # SIGTERM while waiting: exit 0. Sent once the server handles it (a loaded machine may
    # take longer than any fixed pause to start Python).
    waiting = servers(tmp_path / "never", wait=False, ready_timeout=30)
    wait_for(lambda: catches(waiting.proc.pid, signal.SIGTERM), "the server to handle SIGTERM")
    assert waiting.stop() == 0


def test_a_new_set_is_served_within_1s_without_a_restart(pairs, tmp_path, servers):
    first, second, third = pairs(3)
    folder = Folder(tmp_path / "certs")
    folder.publish(first)
    server = servers(folder.path)
    ca = bundle_of(tmp_path, first, second, third)
    pid = server.proc.pid
    assert handshake(server.port, ca, HOST) == leaf_der(first["tls.crt"])
    for pair in (second, third):
        folder.publish(pair)
        took = wait_served(server, ca, pair)
        print(f"new leaf served {took:.3f}s after the swap")
        assert took < RELOAD_LIMIT, took
        serial = pem_serial(pair["tls.crt"].decode())
        assert len(log_lines(server, f"reloaded the certificate: serial={serial}")) == 1, \
            server.log()
    assert server.proc.pid == pid and server.alive()
    assert len(log_lines(server, "reloaded the certificate")) == 2, server.log()


def test_half_written_and_mismatched_sets_are_ignored(pairs, tmp_path, servers):
    good, new = pairs(2)
    folder = Folder(tmp_path / "certs")
    folder.publish(good)
    server = servers(folder.path)
    ca = bundle_of(tmp_path, good, new)
    served = leaf_der(good["tls.crt"])
    old_serial = pem_serial(good["tls.crt"].decode())

    bad_sets = {
        "half-written: no key yet": {"tls.crt": new["tls.crt"], "ca.crt": new["ca.crt"]},
        "half-written: the key cut short": {"tls.crt": new["tls.crt"],
                                            "tls.key": new["tls.key"][:40],
                                            "ca.crt": new["ca.crt"]},
        "mismatched: the new certificate, the old key": {"tls.crt": new["tls.crt"],
                                                         "tls.key": good["tls.key"],
                                                         "ca.crt": new["ca.crt"]},
        "empty certificate": {"tls.crt": b"", "tls.key": new["tls.key"]},
    }
    for what, files in bad_sets.items():
        name = folder.publish(files)
        end = time.monotonic() + 0.6  # six looks at the folder
        while time.monotonic() < end:
            assert handshake(server.port, ca, HOST) == served, what
            time.sleep(0.05)
        refusals = log_lines(server, f"not loading the pair in {os.path.join(folder.path, name)}")
        assert len(refusals) == 1, (what, server.log())  # logged once, retried quietly
        assert f"still serving serial={old_serial}" in refusals[0], refusals
    assert "KEY_VALUES_MISMATCH" in server.log() or "key values mismatch" in server.log()

    # A good set after all that is served as fast as ever.
    folder.publish(new)
    assert wait_served(server, ca, new) < RELOAD_LIMIT
    assert len(log_lines(server, "reloaded the certificate")) == 1, server.log()


def test_a_plain_folder_rewritten_in_place_is_picked_up(certctl_binary, tmp_path, servers):
    """`certctl generate --out-dir` (no ..data): each file renamed into place on its own;
    the server waits until key and certificate match again."""
    where = tmp_path / "plain"
    assert run_certctl(certctl_binary, "generate", "--service", SERVICE, "-n", NS,
                       "--out-dir", str(where)).returncode == 0
    first = {name: (where / name).read_bytes() for name in ("tls.crt", "ca.crt")}
    server = servers(where)
    assert handshake(server.port, str(where / "ca.crt"), HOST) == leaf_der(first["tls.crt"])
    ca = tmp_path / "both.crt"
    ca.write_bytes(first["ca.crt"])
    assert run_certctl(certctl_binary, "generate", "--service", SERVICE, "-n", NS,
                       "--out-dir", str(where), "--force").returncode == 0
    second = (where / "tls.crt").read_bytes()
    ca.write_bytes(first["ca.crt"] + (where / "ca.crt").read_bytes())
    assert wait_served(server, str(ca), {"tls.crt": second}) < RELOAD_LIMIT
    assert len(log_lines(server, "reloaded the certificate")) == 1, server.log()


def test_no_handshake_fails_while_the_set_is_swapped_20_times(pairs, tmp_path, servers):
    generated = pairs(4)
    folder = Folder(tmp_path / "certs")
    folder.publish(generated[0])
    server = servers(folder.path)
    # Four CAs in one bundle, as a caBundle holds the old and the new CA in a rotation.
    ca = bundle_of(tmp_path, *generated)
    wait_served(server, ca, generated[0])

    swaps = []
    with Hammer(server.port, ca, HOST) as hammer:
        for i in range(1, 21):
            pair = generated[i % len(generated)]
            folder.publish(pair)
            swaps.append(wait_served(server, ca, pair))
        time.sleep(0.1)
    print(f"{hammer.successes} handshakes, {len(hammer.failures)} failures; "
          f"slowest reload {max(swaps):.3f}s")
    assert hammer.failures == [], hammer.failures[:5]
    assert hammer.successes >= 100, hammer.successes  # it really hammered
    assert {leaf_der(p["tls.crt"]) for p in generated} <= set(hammer.leaves)
    assert max(swaps) < RELOAD_LIMIT, swaps
    assert len(log_lines(server, "reloaded the certificate")) == 20, server.log()
    assert "TLS handshake with" not in server.log(), server.log()  # none failed on its side
    assert server.stop() == 0


def test_sigterm_and_sigint_exit_0_with_connections_open(pairs, tmp_path, servers):
    pair, = pairs(1)
    folder = Folder(tmp_path / "certs")
    folder.publish(pair)
    ca = bundle_of(tmp_path, pair)
    for sig in (signal.SIGTERM, signal.SIGINT):
        server = servers(folder.path)
        # A kept-alive connection and one that never starts its handshake stay open.
        idle = socket.create_connection(("127.0.0.1", server.port))
        hammer = Hammer(server.port, ca, HOST, interval=0.01).start()
        time.sleep(0.2)
        started = time.monotonic()
        code = server.stop(sig)
        hammer.stop()
        idle.close()
        assert code == 0, server.log()
        assert time.monotonic() - started < 3
        assert hammer.successes > 0
        assert server.log().rstrip().endswith("stopping"), server.log()
