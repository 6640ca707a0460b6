"""`certctl run` beside the example webhook server (harness/webhook_server.py), driven the way
the API server drives a webhook: the test reads the ValidatingWebhookConfiguration with
kubectl, takes the Service, path and caBundle from it, and calls the webhook over TLS trusting
only that bundle and verifying `<service>.<namespace>.svc`.

Proves: the folder certctl keeps is served as it is (Python ssl and `openssl s_client` both
verify it against the injected bundle; another name or CA fails), the AdmissionReview answers
come back over that TLS; and when certctl re-issues the leaf (the Secret's tls.crt replaced
by a certificate its key does not match), the running server serves the new leaf within 2 s,
still trusted by the bundle in the configuration, while a client handshaking every 20 ms
throughout sees no failure. certctl runs with exactly the chart's RBAC (mode sidecar), and
its own check of the webhook's handshake (`--serving-addr`) must hold too, and readiness
follows the webhook: not ready before it serves, nor while it is down.
"""

import base64
import json
import os
import subprocess
import time
import uuid

import pytest

from harness.rbac import emulator_rules
from harness.sidecar import (Hammer, Sidecar, WebhookServer, admission_review, free_ports,
                             handshake, leaf_der, openssl_handshake, pem_serial, post_review)
from harness.waiting import wait_for

NS = "infra"
SERVICE = "hook"
VWC = "hook"
SECRET = "webhook-server-cert"
USER = f"system:serviceaccount:{NS}:certctl"
# The chart's RBAC for this Secret and this one target (mode sidecar, no leader election).
RULES = emulator_rules("sidecar", SECRET, NS, {"validatingWebhooks": [VWC]},
                       {"leaderElection": False})

BOUND = 20.0          # overall bound of a wait (a loaded 2-core machine)
REISSUE_LIMIT = 2.0   # from the Secret's change to the new leaf on the wire
HAMMER_INTERVAL = 0.02


def manifests():
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": SERVICE, "namespace": NS},
               "spec": {"ports": [{"port": 443, "targetPort": 9443}]}}
    vwc = {"apiVersion": "admissionregistration.k8s.io/v1",
           "kind": "ValidatingWebhookConfiguration", "metadata": {"name": VWC},
           "webhooks": [{
               "name": "validate.hook.example.com", "admissionReviewVersions": ["v1"],
               "sideEffects": "None", "failurePolicy": "Fail",
               "clientConfig": {"service": {"namespace": NS, "name": SERVICE,
                                            "path": "/validate", "port": 443}},
               "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                          "apiVersions": ["v1"], "resources": ["configmaps"]}]}]}
    return [service, vwc]



class Pod:
    """certctl run and the webhook server sharing a certificate folder, as in the pod."""

    def __init__(self, cluster, binary, workdir):
        self.port, = free_ports(1)
        args = ["--validating-webhook", VWC, "--serving-addr", f"127.0.0.1:{self.port}"]
        self.sidecar = Sidecar(binary, cluster, workdir, "certctl", USER, args,
                               namespace=NS, service=SERVICE)
        self.webhook = WebhookServer(self.sidecar.cert_dir, workdir,
                                     listen=f"127.0.0.1:{self.port}", ready_timeout=BOUND)

    def start(self, webhook=True):
        self.sidecar.start()
        if not webhook:
            return self
        self.webhook.start(bound=BOUND)  # it waits for the folder to hold a pair
        wait_for(lambda: self.sidecar.readyz()[0] == 200, "certctl run /readyz 200",
                 watch=[self.sidecar, self.webhook])
        return self

    def stop(self):
        return self.webhook.stop(), self.sidecar.stop()[0]


@pytest.fixture
def pod(cluster, certctl_binary, tmp_path):
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user(USER, RULES)
    for obj in manifests():
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
    pod = Pod(cluster, certctl_binary, str(tmp_path))
    try:
        yield pod.start()
    finally:
        pod.stop()


class ApiServerView:
    """What the API server knows of the webhook, read with kubectl: where to call it and
    which CA to trust."""

    def __init__(self, cluster, tmp_path, name="bundle.crt"):
        vwc = json.loads(cluster.kubectl("get", "validatingwebhookconfiguration", VWC,
                                         "-o", "json").stdout)
        client = vwc["webhooks"][0]["clientConfig"]
        service = client["service"]
        self.host = f"{service['name']}.{service['namespace']}.svc"
        self.path = f"{service['path']}?timeout=10s"
        self.bundle = base64.b64decode(client.get("caBundle", "")).decode()
        self.cafile = str(tmp_path / name)
        with open(self.cafile, "w", encoding="utf-8") as f:
            f.write(self.bundle)


def secret_data(cluster):
    secret = json.loads(cluster.kubectl("get", "secret", SECRET, "-n", NS, "-o", "json").stdout)
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def folder_leaf(pod):
    with open(os.path.join(pod.sidecar.cert_dir, "tls.crt"), encoding="utf-8") as f:
        return f.read()


def verified(pod, api, what):
    """Python ssl and openssl s_client both verify the served leaf against the bundle;
    returns the leaf (DER)."""
    leaf = handshake(pod.port, api.cafile, api.host)
    client = openssl_handshake(pod.port, api.cafile, api.host)
    assert client.returncode == 0, f"{what}: {client.stdout}{client.stderr}"
    assert "Verify return code: 0 (ok)" in client.stdout, f"{what}: {client.stdout}"
    return leaf


def test_the_api_server_calls_the_webhook_over_the_injected_bundle(pod, cluster, tmp_path):
    api = ApiServerView(cluster, tmp_path)
    assert api.host == f"{SERVICE}.{NS}.svc"
    data = secret_data(cluster)
    assert api.bundle == data["ca.crt"], "the caBundle is not the Secret's CA"
    assert os.path.islink(os.path.join(pod.sidecar.cert_dir, "..data"))

    # The handshake the API server makes: the folder's leaf, which is the Secret's.
    leaf = verified(pod, api, "the cold start")
    assert leaf == leaf_der(data["tls.crt"]) == leaf_der(folder_leaf(pod))
    serial = pem_serial(data["tls.crt"])
    assert f"loaded the certificate: serial={serial}" in pod.webhook.log(), pod.webhook.log()

    # Controls: the check is real (another name, another CA both fail).
    other_name = openssl_handshake(pod.port, api.cafile, f"other.{NS}.svc")
    assert other_name.returncode != 0 and "Verify return code: 0 (ok)" not in other_name.stdout
    other_ca = openssl_handshake(pod.port, cluster.ca_path, api.host)
    assert other_ca.returncode != 0 and "Verify return code: 0 (ok)" not in other_ca.stdout
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        handshake(pod.port, cluster.ca_path, api.host)

    # The call itself, at the path the configuration names.
    uid = str(uuid.uuid4())
    status, body = post_review(pod.port, api.cafile, api.host, admission_review(uid, namespace=NS),
                               path=api.path)
    assert status == 200, body
    assert body["response"] == {"uid": uid, "allowed": True}, body
    uid = str(uuid.uuid4())
    status, body = post_review(pod.port, api.cafile, api.host,
                               admission_review(uid, name="blocked", namespace=NS,
                                                labels={"certctl-example/deny": "true"}),
                               path=api.path)
    assert status == 200, body
    assert body["response"]["uid"] == uid and body["response"]["allowed"] is False, body
    assert "certctl-example/deny" in body["response"]["status"]["message"], body

    # Nothing went wrong on certctl's side under the chart's RBAC (a webhook not listening
    # yet at start-up is how it starts, not a warning).
    complaints = [line for line in pod.sidecar.log().splitlines()
                  if line.split()[1:2] in (["warning"], ["error"], ["critical"])]
    assert complaints == [], complaints
    status, text = pod.sidecar.get("/readyz?verbose")[:2]  # certctl's own view of it
    assert status == 200 and "[+]certificate ok" in text and "[+]serving ok" in text, text

    assert pod.stop() == (0, 0), (pod.webhook.log(), pod.sidecar.log())


def test_a_reissued_leaf_is_served_at_once_and_no_handshake_fails(pod, cluster, tmp_path):
    api = ApiServerView(cluster, tmp_path)
    before = secret_data(cluster)
    old_leaf = verified(pod, api, "before the re-issue")
    assert old_leaf == leaf_der(before["tls.crt"])
    old_set = os.readlink(os.path.join(pod.sidecar.cert_dir, "..data"))

    with Hammer(pod.port, api.cafile, api.host, interval=HAMMER_INTERVAL) as hammer:
        wait_for(lambda: hammer.successes >= 10, "the handshake loop to get going")
        # The stored leaf made invalid (the CA's certificate in its place: the key no longer
        # matches; a kubernetes.io/tls Secret cannot lose tls.crt): certctl re-issues it
        # from the stored CA.
        ca_b64 = base64.b64encode(before["ca.crt"].encode()).decode()
        cluster.kubectl("patch", "secret", SECRET, "-n", NS, "--type", "json", "-p",
                        json.dumps([{"op": "replace", "path": "/data/tls.crt", "value": ca_b64}]))
        patched = time.monotonic()

        def new_leaf():
            try:
                leaf = handshake(pod.port, api.cafile, api.host)
            except OSError:
                return None  # counted by the hammer, not here
            return leaf if leaf != old_leaf else None

        leaf = wait_for(new_leaf, "the webhook to serve a new leaf",
                        watch=[pod.sidecar, pod.webhook])
        took = time.monotonic() - patched
        time.sleep(0.5)  # the loop goes on over the new leaf for a while
    print(f"new leaf served {took:.3f}s after kubectl patch returned; "
          f"{hammer.successes} handshakes every {HAMMER_INTERVAL * 1000:g} ms, "
          f"{len(hammer.failures)} failed")
    assert hammer.failures == [], (hammer.failures[:5], pod.webhook.log())
    assert hammer.leaves == [old_leaf, leaf], "a leaf other than the old and the new one"
    assert took < REISSUE_LIMIT, (took, pod.sidecar.log())

    # The new leaf is the Secret's and the folder's, from the same CA.
    after = secret_data(cluster)
    assert after["ca.crt"] == before["ca.crt"]
    assert after["tls.crt"] != before["tls.crt"] and after["tls.key"] != before["tls.key"]
    assert leaf == leaf_der(after["tls.crt"]) == leaf_der(folder_leaf(pod))
    assert os.readlink(os.path.join(pod.sidecar.cert_dir, "..data")) != old_set
    serial = pem_serial(after["tls.crt"])
    reloads = [line for line in pod.webhook.log().splitlines() if "reloaded" in line]
    assert len(reloads) == 1 and f"serial={serial}" in reloads[0], pod.webhook.log()

    # The API server, reading the configuration again, still trusts what is served.
    again = ApiServerView(cluster, tmp_path, name="bundle-after.crt")
    assert again.bundle == api.bundle
    assert verified(pod, again, "after the re-issue") == leaf
    status, body = post_review(pod.port, again.cafile, again.host,
                               admission_review("after-reissue", namespace=NS), path=again.path)
    assert (status, body["response"]["allowed"]) == (200, True), body
    wait_for(lambda: pod.sidecar.readyz()[0] == 200, "certctl run ready again",
             watch=[pod.sidecar])
    assert pod.stop() == (0, 0), (pod.webhook.log(), pod.sidecar.log())


@pytest.fixture
def pod_without_webhook(cluster, certctl_binary, tmp_path):
    """The pod before its webhook container started: certctl alone."""
    cluster.kubectl("create", "namespace", NS)
    cluster.add_user(USER, RULES)
    for obj in manifests():
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
    pod = Pod(cluster, certctl_binary, str(tmp_path))
    try:
        yield pod.start(webhook=False)
    finally:
        pod.stop()


def test_readiness_follows_the_webhook_serving_a_trusted_certificate(pod_without_webhook,
                                                                      tmp_path):
    """--serving-addr: the certificate alone is not readiness. Before the webhook serves,
    /readyz is 503 naming the handshake, while /readyz?exclude=serving (a startup probe) and
    the ready file say the certificate is there; once the webhook serves the folder, 200;
    when it stops, 503 again within the 5 s re-check; back, 200."""
    pod = pod_without_webhook
    sidecar = pod.sidecar
    wait_for(lambda: sidecar.get("/readyz?exclude=serving")[0] == 200,
             "/readyz?exclude=serving 200", watch=[sidecar])
    assert os.path.exists(sidecar.ready_file)
    # The serving check's first verdict on this certificate follows it by one handshake.
    status, body = wait_for(sidecar.serving_verdict, "the first handshake's verdict",
                            watch=[sidecar])
    assert status == 503 and body.startswith("not ready: serving: cannot connect to 127.0.0.1:"), \
        body
    status, text = sidecar.get("/readyz?verbose")[:2]
    assert status == 503 and "[+]certificate ok" in text and "[-]serving failed: " in text, text

    pod.webhook.start(bound=BOUND)
    wait_for(lambda: sidecar.readyz() == (200, "ok\n"), "/readyz 200 once the webhook serves",
             watch=[sidecar, pod.webhook])
    assert pod.webhook.stop() == 0
    wait_for(lambda: sidecar.readyz()[0] == 503, "/readyz 503 with the webhook gone",
             bound=10, watch=[sidecar])
    assert os.path.exists(sidecar.ready_file)  # the certificate is still there
    warnings = [line for line in sidecar.log().splitlines() if line.split()[1:2] == ["warning"]]
    assert any("serving check: cannot connect" in line for line in warnings), warnings

    pod.webhook = WebhookServer(sidecar.cert_dir, str(tmp_path), name="webhook-again",
                                listen=f"127.0.0.1:{pod.port}", ready_timeout=BOUND)
    pod.webhook.start(bound=BOUND)
    wait_for(lambda: sidecar.readyz()[0] == 200, "/readyz 200 with the webhook back",
             watch=[sidecar, pod.webhook])


def test_a_deleted_secret_is_recreated_and_the_webhook_serves_the_new_pair(pod, cluster,
                                                                          tmp_path):
    """The Secret deleted: a new CA and leaf, the folder swapped, the bundle updated, and the
    webhook, having reloaded, verifies against the configuration's new caBundle."""
    before = ApiServerView(cluster, tmp_path, "before.crt")
    old_leaf = verified(pod, before, "before the deletion")
    cluster.kubectl("delete", "secret", SECRET, "-n", NS)

    def new_bundle():
        view = ApiServerView(cluster, tmp_path, "after.crt")
        return view if view.bundle and view.bundle != before.bundle else None

    after = wait_for(new_bundle, "a new caBundle in the configuration",
                     watch=[pod.sidecar, pod.webhook])

    def serves_new_pair():
        try:
            return handshake(pod.port, after.cafile, after.host) != old_leaf
        except OSError:
            return False  # the webhook has not reloaded yet

    wait_for(serves_new_pair, "the webhook to serve the new pair",
             watch=[pod.sidecar, pod.webhook])
    leaf = verified(pod, after, "after the deletion")
    assert leaf == leaf_der(secret_data(cluster)["tls.crt"]) == leaf_der(folder_leaf(pod))
    status, body = post_review(pod.port, after.cafile, after.host,
                               admission_review(str(uuid.uuid4()), name="after", namespace=NS),
                               path=after.path)
    assert status == 200 and body["response"]["allowed"] is True, body


def test_not_ready_while_the_webhook_serves_an_untrusted_certificate(pod_without_webhook,
                                                                     certctl_binary, tmp_path):
    """--serving-addr: a webhook serving a pair of its own (another CA) keeps certctl not
    ready, naming the verification failure; once it reloads certctl's pair, ready."""
    pod = pod_without_webhook
    sidecar = pod.sidecar
    wait_for(lambda: sidecar.get("/readyz?exclude=serving")[0] == 200,
             "the certificate ready", watch=[sidecar])
    own = tmp_path / "own-pair"
    subprocess.run([certctl_binary, "generate", "--service", SERVICE, "-n", NS,
                    "--out-dir", str(own)], check=True, capture_output=True, timeout=20)
    pod.webhook = WebhookServer(str(own), str(tmp_path), name="webhook-own",
                                listen=f"127.0.0.1:{pod.port}", ready_timeout=BOUND)
    pod.webhook.start(bound=BOUND)

    def refused_as_untrusted():
        status, body = sidecar.readyz()
        return status == 503 and "does not verify against the caBundle" in body

    wait_for(refused_as_untrusted, "/readyz 503 naming the untrusted certificate",
             watch=[sidecar, pod.webhook])

    # The webhook reloads certctl's pair (its folder rewritten in place, file by file
    # renamed over).
    for name in ("tls.key", "tls.crt"):
        with open(os.path.join(sidecar.cert_dir, name), encoding="utf-8") as source:
            content = source.read()
        staged = own / f".{name}.new"
        staged.write_text(content)
        os.replace(staged, own / name)
    wait_for(lambda: sidecar.readyz() == (200, "ok\n"), "/readyz 200 once the webhook reloaded",
             watch=[sidecar, pod.webhook])
