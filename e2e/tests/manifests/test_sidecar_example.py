"""The plain-YAML sidecar example (manifests/examples/sidecar): a webhook Deployment with
`certctl run` as a native sidecar (native/), and the variant for clusters without native
sidecars (without-native-sidecar/, where the webhook container starts through
`certctl wait`).

Offline, `kubectl kustomize` renders both: the sidecar's shape, probes, shared folder,
token and security context; the variant's containers and command; the namespace changed in
one place. Against the emulator: the rendered objects apply, and the certctl container of
two of the Deployment's pods, run as local processes with exactly the RBAC the example
stored (harness.kubelet.pod_container), elect one leader, become ready and inject the CA
into the example's webhook configuration without a single refusal. That the example's RBAC
is the permission table's for its flags is checked in e2e/tests/certctl/test_rbac_table.py.
"""

import base64
import json
import os
import shutil
import time

import pytest

from harness.kubelet import free_ports, pod_container, rewrite_flags
from harness.kustomize import TEST_IMAGE, certctl_images, kustomize, name_image

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
EXAMPLE = os.path.join(REPO, "manifests", "examples", "sidecar")
NATIVE = os.path.join(EXAMPLE, "native")
WITHOUT_NATIVE = os.path.join(EXAMPLE, "without-native-sidecar")
NS = "example-system"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
KINDS = ["ClusterRole", "ClusterRoleBinding", "Deployment", "Role", "Role", "RoleBinding",
         "RoleBinding", "Service", "ServiceAccount", "ValidatingWebhookConfiguration"]


def one(objects, kind):
    found = [obj for obj in objects if obj["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}"
    return found[0]


def pod_of(objects):
    return one(objects, "Deployment")["spec"]["template"]["spec"]


def named(items, name):
    [item] = [i for i in items if i["name"] == name]
    return item


def args_of(args, flag):
    return [value for name, value in zip(args, args[1:]) if name == flag]


def test_top_folder_is_the_native_variant():
    assert kustomize(EXAMPLE)[0] == kustomize(NATIVE)[0]


def test_native_sidecar_example_shape():
    _, objects = kustomize(NATIVE)
    assert sorted(obj["kind"] for obj in objects) == KINDS
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "example-webhook"
        if obj["kind"] in ("Role", "RoleBinding"):
            assert obj["metadata"]["namespace"] in (NS, "default")
        elif obj["kind"] not in ("ClusterRole", "ClusterRoleBinding",
                                 "ValidatingWebhookConfiguration"):
            assert obj["metadata"]["namespace"] == NS, obj["metadata"]
    default_roles = [obj for obj in objects if obj["kind"] in ("Role", "RoleBinding")
                     and obj["metadata"]["namespace"] == "default"]
    assert len(default_roles) == 2, "Events about cluster-scoped objects go to default"
    for binding in [obj for obj in objects if obj["kind"].endswith("Binding")]:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "example-webhook",
                                        "namespace": NS}]

    deployment, pod = one(objects, "Deployment"), pod_of(objects)
    assert certctl_images(objects) == [("Deployment", "example-webhook", TEST_IMAGE)]
    assert deployment["spec"]["replicas"] == 2
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    [certctl] = pod["initContainers"]
    [webhook] = pod["containers"]
    assert certctl["name"] == "certctl" and certctl["restartPolicy"] == "Always"
    args = certctl["args"]
    assert args[0] == "run" and "-n" not in args  # the namespace comes from POD_NAMESPACE
    assert "--leader-elect" in args  # two replicas
    assert {"name": "POD_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in certctl["env"]
    assert {"name": "POD_NAME",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in certctl["env"]
    assert args_of(args, "--health-addr") == [":8081"]
    assert args_of(args, "--metrics-addr") == [":8080"]
    assert named(certctl["ports"], "health")["containerPort"] == 8081
    assert named(certctl["ports"], "metrics")["containerPort"] == 8080
    # A target entry calling a name the certificate lacks holds the start back, but does not
    # take a running webhook out of its Service (readinessProbe without `callable`).
    # The serving check: readiness waits for a verified handshake with the webhook
    # container, which the startupProbe holds back, so that one leaves it out.
    assert args_of(args, "--serving-addr") == ["127.0.0.1:9443"]
    assert named(webhook["ports"], "https")["containerPort"] == 9443
    assert webhook["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "https",
                                                    "scheme": "HTTPS"}
    for probe, path in (("startupProbe", "/readyz?exclude=serving"),
                        ("readinessProbe", "/readyz?exclude=callable&exclude=injected"),
                        ("livenessProbe", "/healthz")):
        assert certctl[probe]["httpGet"] == {"path": path, "port": "health"}, probe

    [cert_dir] = args_of(args, "--cert-dir")
    certs = named(pod["volumes"], "certs")
    assert certs["emptyDir"]["medium"] == "Memory"
    assert named(certctl["volumeMounts"], "certs") == {"name": "certs", "mountPath": cert_dir}
    assert named(webhook["volumeMounts"], "certs") == {"name": "certs", "mountPath": cert_dir,
                                                       "readOnly": True}
    assert pod["automountServiceAccountToken"] is False
    assert named(certctl["volumeMounts"], "certctl-token")["mountPath"] == TOKEN_PATH
    assert all(m["mountPath"] != TOKEN_PATH for m in webhook["volumeMounts"])

    sc = certctl["securityContext"]
    assert (sc["runAsNonRoot"], sc["runAsUser"], sc["readOnlyRootFilesystem"],
            sc["allowPrivilegeEscalation"], sc["capabilities"], sc["seccompProfile"]) == \
        (True, 65532, True, False, {"drop": ["ALL"]}, {"type": "RuntimeDefault"})
    assert pod["securityContext"]["runAsUser"] == sc["runAsUser"]  # tls.key is 0600

    service = one(objects, "Service")
    assert service["spec"]["selector"].items() <= \
        deployment["spec"]["template"]["metadata"]["labels"].items()
    assert named(service["spec"]["ports"], "https")["targetPort"] == "https"
    assert named(webhook["ports"], "https")
    vwc = one(objects, "ValidatingWebhookConfiguration")
    assert args_of(args, "--validating-webhook") == [vwc["metadata"]["name"]]
    assert args_of(args, "--service") == [service["metadata"]["name"]]
    for entry in vwc["webhooks"]:
        assert entry["clientConfig"]["service"]["name"] == service["metadata"]["name"]
        assert entry["clientConfig"]["service"]["namespace"] == NS
        assert "caBundle" not in entry["clientConfig"]  # certctl's to fill in


def test_variant_without_native_sidecars_starts_the_server_through_certctl_wait():
    _, native = kustomize(NATIVE)
    _, objects = kustomize(WITHOUT_NATIVE)
    pod, native_pod = pod_of(objects), pod_of(native)
    assert "initContainers" not in pod
    assert [c["name"] for c in pod["containers"]] == ["webhook", "certctl"]
    webhook, certctl = pod["containers"]
    [native_certctl], [native_webhook] = native_pod["initContainers"], native_pod["containers"]
    # certctl: an ordinary container now, the rest unchanged.
    assert "restartPolicy" not in certctl and "startupProbe" not in certctl
    assert {k: v for k, v in native_certctl.items()
            if k not in ("restartPolicy", "startupProbe")} == certctl
    # The webhook server starts once the folder holds a valid pair.
    [cert_dir] = args_of(certctl["args"], "--cert-dir")
    assert webhook["command"][:7] == ["/usr/local/bin/certctl", "wait", "--cert-dir", cert_dir,
                                      "--timeout", "2m", "--"]
    assert webhook["command"][7:] == native_webhook["command"]
    assert webhook["args"] == native_webhook["args"]
    # Everything else is the native variant's.
    rest = [obj for obj in objects if obj["kind"] != "Deployment"]
    assert rest == [obj for obj in native if obj["kind"] != "Deployment"]


def test_namespace_changes_in_one_place(tmp_path):
    copy_dir = tmp_path / "sidecar"
    shutil.copytree(EXAMPLE, copy_dir)
    assert name_image(copy_dir) == 1
    kustomization = copy_dir / "native" / "kustomization.yaml"
    text = kustomization.read_text(encoding="utf-8")
    assert text.count(f"namespace: {NS}") == 1
    kustomization.write_text(text.replace(f"namespace: {NS}", "namespace: team-x"),
                             encoding="utf-8")
    for folder in ("native", "without-native-sidecar"):
        stream, objects = kustomize(str(copy_dir / folder))
        assert NS not in stream
        for binding in [obj for obj in objects if obj["kind"].endswith("Binding")]:
            assert binding["subjects"][0]["namespace"] == "team-x"
        vwc = one(objects, "ValidatingWebhookConfiguration")
        assert vwc["webhooks"][0]["clientConfig"]["service"]["namespace"] == "team-x"
        assert {obj["metadata"].get("namespace") for obj in objects} == \
            {"team-x", "default", None}


@pytest.mark.backends("real")
def test_example_applies_and_its_sidecars_work_with_exactly_its_rbac(cluster, certctl_binary,
                                                                     tmp_path):
    stream, objects = kustomize(NATIVE)
    cluster.kubectl("create", "namespace", NS)
    cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=stream)
    cluster.kubectl("apply", "-f", "-", input=stream)
    pod = json.loads(cluster.kubectl("get", "deployment", "example-webhook", "-n", NS, "-o",
                                     "json").stdout)["spec"]["template"]["spec"]
    user = f"system:serviceaccount:{NS}:example-webhook"

    pods = []
    try:
        for name in ("example-webhook-5c7b9-aaaaa", "example-webhook-5c7b9-bbbbb"):
            health, metrics, https = free_ports(3)
            local = {"--cert-dir": str(tmp_path / name / "tls"),
                     "--health-addr": f"127.0.0.1:{health}",
                     "--metrics-addr": f"127.0.0.1:{metrics}",
                     "--serving-addr": f"127.0.0.1:{https}"}
            process = pod_container(cluster, pod, "certctl", NS, {"certctl": certctl_binary},
                                    str(tmp_path / name), pod_name=name,
                                    args=lambda args, local=local: rewrite_flags(args, local))
            assert process.user == user
            pods.append((process.start(), health))
        # The startupProbe's path: no process plays the webhook containers here (the
        # chart, component and chart-dependency tests run one and follow readiness).
        startup = named(pod["initContainers"], "certctl")["startupProbe"]["httpGet"]["path"]
        deadline = time.monotonic() + 20
        while not all(p.get(startup, port)[0] == 200 for p, port in pods):
            assert time.monotonic() < deadline, [p.log()[-2000:] for p, _ in pods]
            time.sleep(0.05)
    finally:
        for process, _ in pods:
            process.stop()

    secret = json.loads(cluster.kubectl("get", "secret", "webhook-server-cert", "-n", NS,
                                        "-o", "json").stdout)
    ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
    vwc = json.loads(cluster.kubectl("get", "validatingwebhookconfiguration",
                                     "example-webhook", "-o", "json").stdout)
    assert {base64.b64decode(w["clientConfig"]["caBundle"]).decode()
            for w in vwc["webhooks"]} == {ca}
    requests = [e for e in cluster.request_log()["requests"] if e["user"] == user]
    # One leader created the Secret; the other followed.
    creates = [e for e in requests if e["verb"] == "create" and e["resource"] == "secrets"]
    assert len(creates) == 1, creates
    assert [e for e in requests if e["code"] == 403] == []
    # The release on SIGTERM: nobody holds the Lease.
    lease = json.loads(cluster.kubectl("get", "lease", "webhook-server-cert-certctl", "-n",
                                       NS, "-o", "json").stdout)
    assert not lease["spec"].get("holderIdentity")
