"""The kustomize component manifests/kustomize/certctl-sidecar (with its target components
validating-webhook/ and mutating-webhook/) and its worked example
manifests/examples/kustomize-component: a webhook base (webhook/) and an overlay
(with-certctl/) that adds certctl to the base's Deployment, selected by name.

Offline, `kubectl kustomize` renders: the native sidecar, its volumes and probes, the
read-only mount in the first container, the RBAC named and limited by the settings
ConfigMap, and nothing else of the user's Deployment changed; the label instead of the name;
both target components; the README's recipe for more flags and targets; the errors the
component documents. On the real API server: the overlay applies (its image named), and the
stored pod template's certctl container and webhook container (the example webhook server,
e2e/harness/webhook_server.py, for the image registry.example/my-webhook), run as local
processes with exactly the stored RBAC (harness.kubelet.pod_container), show readiness
following the serving check: not ready until the webhook serves certctl's certificate,
ready once it does, not ready again once it stops. That the overlay's RBAC is the
permission table's for its flags is checked in e2e/tests/certctl/test_rbac_table.py as for
the other examples.
"""

import base64
import copy
import json
import os
import re
import shutil

import pytest
import yaml

from harness.kubelet import free_ports, pod_container, rewrite_flags
from harness.kustomize import TEST_IMAGE, certctl_images, kustomize, name_image, run_kustomize
from harness.rbac import policy_rules
from harness.sidecar import WEBHOOK_SERVER, handshake
from harness.waiting import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
MANIFESTS = os.path.join(REPO, "manifests")
COMPONENT = os.path.join(MANIFESTS, "kustomize", "certctl-sidecar")
EXAMPLE = os.path.join(MANIFESTS, "examples", "kustomize-component")
BASE = os.path.join(EXAMPLE, "webhook")
OVERLAY = os.path.join(EXAMPLE, "with-certctl")
NS = "my-webhook-system"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
LABEL = ("certctl.io/sidecar", "enabled")
ADDED_KINDS = ["ClusterRole", "ClusterRoleBinding", "Role", "Role", "RoleBinding",
               "RoleBinding", "ServiceAccount"]
SERVING_DROP = 10.0  # the serving check re-runs every 5 s while it holds


def settings():
    """The data of the example's settings ConfigMap."""
    with open(os.path.join(OVERLAY, "certctl-sidecar.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)["data"]


def one(objects, kind, namespace=None):
    found = [obj for obj in objects if obj["kind"] == kind and
             (namespace is None or obj["metadata"].get("namespace") == namespace)]
    assert len(found) == 1, f"expected one {kind} in {namespace}"
    return found[0]


def deployment(objects, name="my-webhook"):
    [found] = [obj for obj in objects
               if obj["kind"] == "Deployment" and obj["metadata"]["name"] == name]
    return found


def named(items, name):
    [item] = [i for i in items if i["name"] == name]
    return item


def args_of(args, flag):
    return [value for name, value in zip(args, args[1:]) if name == flag]


def unordered(rules):
    return sorted(json.dumps(rule, sort_keys=True) for rule in rules)


def copy_tree(tmp_path):
    """The component and the example under tmp_path, where a test may change them, with
    certctl's image set; the overlay's relative path to the component still holds. Returns
    (base, overlay)."""
    root = tmp_path / "manifests"
    shutil.copytree(os.path.join(MANIFESTS, "kustomize"), root / "kustomize")
    shutil.copytree(EXAMPLE, root / "examples" / "kustomize-component")
    example = root / "examples" / "kustomize-component"
    assert name_image(example) == 1  # the settings, as a user sets them
    return example / "webhook", example / "with-certctl"


def edit_yaml(path, change):
    docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    change(docs)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")


# --- offline --------------------------------------------------------------------------------


def test_overlay_adds_the_native_sidecar_to_the_named_deployment():
    stream, objects = kustomize(OVERLAY)
    _, base = kustomize(BASE)
    data = settings()
    # The settings and the component's own template are local-config: built with, never
    # output; every placeholder was replaced.
    assert "CONFIG_" not in stream and "certctl-sidecar-parts" not in stream
    assert not [obj for obj in objects if obj["kind"] in ("ConfigMap", "SidecarParts")]
    assert sorted(obj["kind"] for obj in objects) == \
        sorted(ADDED_KINDS + [obj["kind"] for obj in base])

    dep = deployment(objects)
    assert dep["metadata"]["labels"][LABEL[0]] == LABEL[1]  # set by select-deployment
    pod = dep["spec"]["template"]["spec"]
    certctl = pod["initContainers"][0]
    assert certctl["name"] == "certctl" and certctl["restartPolicy"] == "Always"
    assert certctl_images(objects) == [("Deployment", dep["metadata"]["name"], TEST_IMAGE)]
    # The layout the component fixes, with the settings in place and the target flag that
    # validating-webhook/ inserted after `run`.
    assert certctl["args"] == [
        "run", "--validating-webhook", data["validatingWebhook"],
        "--service", data["service"], "--secret", data["secret"],
        "--cert-dir", data["certDir"],
        "--health-addr", f":{data['healthPort']}", "--metrics-addr", f":{data['metricsPort']}",
        "--serving-addr", f"127.0.0.1:{data['servingPort']}",
        "--leader-elect", "--log-format", "json"]
    assert certctl["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]
    # Ports are numbers (the settings are strings): the API server takes nothing else.
    assert named(certctl["ports"], "health")["containerPort"] == int(data["healthPort"])
    assert named(certctl["ports"], "metrics")["containerPort"] == int(data["metricsPort"])
    # The startupProbe leaves out `serving` (the webhook container starts only after it
    # passed); the readinessProbe keeps it and leaves out `callable`.
    for probe, path in (("startupProbe", "/readyz?exclude=serving"),
                        ("readinessProbe", "/readyz?exclude=callable&exclude=injected"),
                        ("livenessProbe", "/healthz")):
        assert certctl[probe]["httpGet"] == {"path": path, "port": "health"}, probe
    assert certctl["startupProbe"]["periodSeconds"] * \
        certctl["startupProbe"]["failureThreshold"] == 300
    assert certctl["volumeMounts"] == [
        {"name": "certctl-certs", "mountPath": data["certDir"]},
        {"name": "certctl-token", "mountPath": TOKEN_PATH, "readOnly": True}]
    sc = certctl["securityContext"]
    assert (sc["runAsNonRoot"], sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"],
            sc["capabilities"], sc["seccompProfile"]) == \
        (True, True, False, {"drop": ["ALL"]}, {"type": "RuntimeDefault"})
    assert "runAsUser" not in sc  # the pod's user: the server must read tls.key (0600)

    # The first container, the webhook server: the folder read-only, no token, and no
    # readinessProbe (certctl's, with the serving check, is the pod's).
    server = pod["containers"][0]
    assert server["volumeMounts"] == [
        {"name": "certctl-certs", "mountPath": data["certDir"], "readOnly": True}]
    assert f"--cert-dir={data['certDir']}" in server["args"]  # where the server reads
    assert named(server["ports"], "https")["containerPort"] == int(data["servingPort"])
    assert "readinessProbe" not in server

    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == data["serviceAccount"]
    assert [v["name"] for v in pod["volumes"]] == ["certctl-certs", "certctl-token"]
    assert named(pod["volumes"], "certctl-certs")["emptyDir"] == {"medium": "Memory",
                                                                 "sizeLimit": "1Mi"}
    sources = named(pod["volumes"], "certctl-token")["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}

    # What certctl is told matches what the base has.
    service = one(objects, "Service")
    vwc = one(objects, "ValidatingWebhookConfiguration")
    assert service["metadata"]["name"] == data["service"]
    assert vwc["metadata"]["name"] == data["validatingWebhook"]
    assert vwc["webhooks"][0]["clientConfig"]["service"] == {
        "name": data["service"], "namespace": NS, "path": "/validate", "port": 443}
    assert "caBundle" not in vwc["webhooks"][0]["clientConfig"]  # certctl's to fill in


def test_rbac_is_named_and_limited_by_the_settings():
    _, objects = kustomize(OVERLAY)
    data = settings()
    name, sa = f"{data['name']}-certctl", data["serviceAccount"]
    assert one(objects, "ServiceAccount")["metadata"] == {
        "name": sa, "namespace": NS, "labels": {"certctl.io/sidecar": "rbac"}}
    role = one(objects, "Role", NS)
    events = one(objects, "Role", "default")
    assert role["metadata"]["name"] == name
    assert events["metadata"]["name"] == f"{name}-events"
    assert role["rules"][0]["resourceNames"] == [data["secret"]]
    assert role["rules"][3]["resourceNames"] == [f"{data['secret']}-certctl"]  # the Lease
    assert one(objects, "ClusterRole")["metadata"]["name"] == name
    assert one(objects, "ClusterRole")["rules"] == [{
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["validatingwebhookconfigurations"],
        "resourceNames": [data["validatingWebhook"]],
        "verbs": ["get", "list", "patch", "watch"]}]
    for binding, ref in ((one(objects, "RoleBinding", NS), role),
                         (one(objects, "RoleBinding", "default"), events),
                         (one(objects, "ClusterRoleBinding"), one(objects, "ClusterRole"))):
        assert binding["metadata"]["name"] == ref["metadata"]["name"]
        assert binding["metadata"].get("namespace") == ref["metadata"].get("namespace")
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                      "kind": ref["kind"], "name": ref["metadata"]["name"]}
        # The kustomization's NamespaceTransformer set the subject's namespace.
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa,
                                        "namespace": NS}]


def test_nothing_else_in_the_users_objects_changes():
    _, objects = kustomize(OVERLAY)
    _, base = kustomize(BASE)
    for kind in ("Service", "ValidatingWebhookConfiguration"):
        assert one(objects, kind) == one(base, kind)
    # The overlay's Deployment without what the component adds is the base's.
    dep = copy.deepcopy(deployment(objects))
    del dep["metadata"]["labels"][LABEL[0]]
    pod = dep["spec"]["template"]["spec"]
    assert [c["name"] for c in pod.pop("initContainers")] == ["certctl"]
    for key in ("serviceAccountName", "automountServiceAccountToken", "volumes"):
        del pod[key]
    del pod["containers"][0]["volumeMounts"]
    assert dep == deployment(base)


def test_label_selects_the_deployment_and_only_the_first_container_gets_the_folder(tmp_path):
    """The label instead of the name, on a Deployment with an init container of its own,
    a second container and mounts of its own, beside a Deployment without the label."""
    base, overlay = copy_tree(tmp_path)

    def change(docs):
        [dep] = docs
        dep["metadata"]["labels"][LABEL[0]] = LABEL[1]
        pod = dep["spec"]["template"]["spec"]
        pod["initContainers"] = [{"name": "migrate", "image": "registry.example/migrate:1"}]
        pod["containers"][0]["volumeMounts"] = [{"name": "cache", "mountPath": "/cache"}]
        pod["containers"].append({"name": "log-shipper", "image": "registry.example/logs:1"})
        pod["volumes"] = [{"name": "cache", "emptyDir": {}}]
        other = copy.deepcopy(dep)
        other["metadata"] = {"name": "other", "labels": {"app.kubernetes.io/name": "other"}}
        docs.append(other)
    edit_yaml(base / "deployment.yaml", change)
    kustomization = overlay / "kustomization.yaml"
    text = kustomization.read_text(encoding="utf-8")
    kustomization.write_text(text.replace("  - select-deployment\n", ""), encoding="utf-8")

    _, objects = kustomize(str(overlay))
    pod = deployment(objects)["spec"]["template"]["spec"]
    # The merge puts certctl first: the target component and the README's recipe rely on it.
    assert [c["name"] for c in pod["initContainers"]] == ["certctl", "migrate"]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "cache", "mountPath": "/cache"},
        {"name": "certctl-certs", "mountPath": "/tls", "readOnly": True}]
    assert pod["containers"][1] == {"name": "log-shipper", "image": "registry.example/logs:1"}
    assert sorted(v["name"] for v in pod["volumes"]) == ["cache", "certctl-certs",
                                                        "certctl-token"]
    # The Deployment without the label is left as it was.
    other = deployment(objects, "other")["spec"]["template"]["spec"]
    assert [c["name"] for c in other["initContainers"]] == ["migrate"]
    assert "serviceAccountName" not in other and "certctl-certs" not in json.dumps(other)


def test_both_target_components(tmp_path):
    _, overlay = copy_tree(tmp_path)
    kustomization = overlay / "kustomization.yaml"
    text = kustomization.read_text(encoding="utf-8")
    line = "  - ../../../kustomize/certctl-sidecar/validating-webhook\n"
    kustomization.write_text(text.replace(
        line, line + "  - ../../../kustomize/certctl-sidecar/mutating-webhook\n"),
        encoding="utf-8")
    edit_yaml(overlay / "certctl-sidecar.yaml",
              lambda docs: docs[0]["data"].update(mutatingWebhook="my-webhook-defaults"))

    _, objects = kustomize(str(overlay))
    args = deployment(objects)["spec"]["template"]["spec"]["initContainers"][0]["args"]
    # Each target component inserts after `run`: the last listed comes first.
    assert args[:5] == ["run", "--mutating-webhook", "my-webhook-defaults",
                        "--validating-webhook", "my-webhook"]
    targets = {"validatingWebhooks": ["my-webhook"], "mutatingWebhooks": ["my-webhook-defaults"]}
    expected = policy_rules("sidecar", "my-webhook-tls", targets, {"leaderElection": True})
    rules = one(objects, "ClusterRole")["rules"]
    assert unordered(rules) == unordered(expected["cluster"])
    assert one(objects, "Role", NS)["rules"] == expected["namespace"]


def readme_recipe():
    """The `patches:` of the component README's section "More targets and flags"."""
    with open(os.path.join(COMPONENT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## More targets and flags", 1)[1]
    [block] = re.findall(r"```yaml\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    return yaml.safe_load(block)["patches"]


def test_the_readmes_recipe_for_more_targets_and_flags(tmp_path):
    """The recipe, added to the example's kustomization as the README says, gives certctl
    the flags and the ClusterRole the table's rule for the CRD target."""
    _, overlay = copy_tree(tmp_path)
    kustomization = overlay / "kustomization.yaml"
    doc = yaml.safe_load(kustomization.read_text(encoding="utf-8"))
    doc["patches"] = readme_recipe()
    kustomization.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")

    _, objects = kustomize(str(overlay))
    args = deployment(objects)["spec"]["template"]["spec"]["initContainers"][0]["args"]
    assert args[-4:] == ["--crd", "widgets.example.com", "--key-type", "ecdsa-p384"]
    targets = {"validatingWebhooks": args_of(args, "--validating-webhook"),
               "crds": args_of(args, "--crd")}
    expected = policy_rules("sidecar", "my-webhook-tls", targets, {"leaderElection": True})
    assert one(objects, "ClusterRole")["rules"] == expected["cluster"]


def test_a_target_component_before_the_sidecar_stops_the_build(tmp_path):
    _, overlay = copy_tree(tmp_path)
    kustomization = overlay / "kustomization.yaml"
    text = kustomization.read_text(encoding="utf-8")
    sidecar = "  - ../../../kustomize/certctl-sidecar\n"
    target = "  - ../../../kustomize/certctl-sidecar/validating-webhook\n"
    assert sidecar + target in text
    kustomization.write_text(text.replace(sidecar + target, target + sidecar),
                             encoding="utf-8")
    proc = run_kustomize(str(overlay))
    # The JSON patch's test on initContainers/0 fails: no pod without certctl's flag.
    assert proc.returncode != 0 and "initContainers/0" in proc.stderr, proc.stderr


def test_a_missing_setting_stops_the_build(tmp_path):
    _, overlay = copy_tree(tmp_path)
    edit_yaml(overlay / "certctl-sidecar.yaml", lambda docs: docs[0]["data"].pop("secret"))
    proc = run_kustomize(str(overlay))
    assert proc.returncode != 0 and "data.secret" in proc.stderr, proc.stderr


def test_namespace_transformer_keeps_the_events_role_in_default(tmp_path):
    """The overlay's NamespaceTransformer (unsetOnly) puts certctl's objects into the
    webhook's namespace and leaves the Role for Events about cluster-scoped objects in
    default; the plain `namespace:` field, which the README warns against, would move it."""
    _, objects = kustomize(OVERLAY)
    namespaces = {(obj["kind"], obj["metadata"]["name"]): obj["metadata"].get("namespace")
                  for obj in objects}
    assert namespaces[("Role", "my-webhook-certctl-events")] == "default"
    assert namespaces[("RoleBinding", "my-webhook-certctl-events")] == "default"
    assert {ns for (kind, _), ns in namespaces.items()
            if kind in ("ServiceAccount", "Deployment", "Service")} == {NS}
    assert namespaces[("Role", "my-webhook-certctl")] == NS

    _, overlay = copy_tree(tmp_path)
    kustomization = overlay / "kustomization.yaml"
    doc = yaml.safe_load(kustomization.read_text(encoding="utf-8"))
    del doc["transformers"]
    doc["namespace"] = NS
    kustomization.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    _, moved = kustomize(str(overlay))
    assert len([obj for obj in moved if obj["kind"] == "Role"
                and obj["metadata"]["namespace"] == NS]) == 2
    assert not [obj for obj in moved if obj["metadata"].get("namespace") == "default"]


# --- against the emulator -------------------------------------------------------------------


@pytest.mark.backends("real")
def test_overlay_applies_and_readiness_follows_the_serving_check(cluster, certctl_binary,
                                                                 tmp_path):
    cluster.kubectl("create", "namespace", NS)
    stream, _ = kustomize(OVERLAY)
    cluster.kubectl("apply", "-f", "-", "--dry-run=server", input=stream)
    cluster.kubectl("apply", "-f", "-", input=stream)
    # The settings are local-config: never applied.
    missing = cluster.kubectl("get", "configmap", "certctl-sidecar", "-n", NS, check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr, missing.stderr
    pod = json.loads(cluster.kubectl("get", "deployment", "my-webhook", "-n", NS, "-o",
                                     "json").stdout)["spec"]["template"]["spec"]
    certctl_spec = named(pod["initContainers"], "certctl")
    startup_path = certctl_spec["startupProbe"]["httpGet"]["path"]
    ready_path = certctl_spec["readinessProbe"]["httpGet"]["path"]
    user = f"system:serviceaccount:{NS}:{pod['serviceAccountName']}"
    pod_name = "my-webhook-7d9f8-kq2xw"

    # One folder for both containers, as the emptyDir certctl-certs; local ports for the
    # pod's (the serving check dials the webhook's port on loopback, as in the pod).
    cert_dir = str(tmp_path / "certctl-certs")
    health, metrics, serving = free_ports(3)
    certctl = pod_container(
        cluster, pod, "certctl", NS, {"certctl": certctl_binary}, str(tmp_path / "certctl"),
        pod_name=pod_name, args=lambda args: rewrite_flags(args, {
            "--cert-dir": cert_dir, "--health-addr": f"127.0.0.1:{health}",
            "--metrics-addr": f"127.0.0.1:{metrics}",
            "--serving-addr": f"127.0.0.1:{serving}"}))
    assert certctl.user == user
    webhook = pod_container(
        cluster, pod, "server", NS, {"my-webhook": WEBHOOK_SERVER}, str(tmp_path / "server"),
        pod_name=pod_name, args=lambda args: rewrite_flags(args, {
            "--cert-dir": cert_dir, "--listen": f"127.0.0.1:{serving}"}))

    def probe(path):
        return certctl.get(path, health)

    def serving_verdict():
        # The serving check follows a new certificate by one handshake; until then /readyz
        # says it is checking.
        status, body = probe(ready_path)
        return None if "checking the handshake" in body else (status, body)

    exit_code = None
    try:
        certctl.start()
        # The kubelet starts the webhook container once the startupProbe passed.
        wait_for(lambda: probe(startup_path)[0] == 200, f"startupProbe {startup_path}",
                 watch=[certctl])
        # Meanwhile nothing listens on the webhook's port: once the serving check has
        # judged this certificate, the pod's readiness is 503 because of it alone.
        status, body = wait_for(serving_verdict, "the serving check's first verdict",
                                watch=[certctl])
        assert status == 503 and body.startswith("not ready: serving: "), body
        status, text = probe("/readyz?verbose")
        assert status == 503 and "[+]certificate ok" in text and \
            "[-]serving failed: " in text, text

        webhook.start()
        wait_for(lambda: probe(ready_path) == (200, "ok\n"),
                 f"readinessProbe {ready_path} 200 once the webhook serves",
                 watch=[certctl, webhook])
        # What the API server would check: the webhook's certificate verifies against the
        # injected caBundle for the Service's name.
        vwc = json.loads(cluster.kubectl("get", "validatingwebhookconfiguration",
                                         "my-webhook", "-o", "json").stdout)
        client = vwc["webhooks"][0]["clientConfig"]
        cafile = tmp_path / "bundle.crt"
        cafile.write_bytes(base64.b64decode(client["caBundle"]))
        host = f"{client['service']['name']}.{client['service']['namespace']}.svc"
        assert handshake(serving, str(cafile), host)

        assert webhook.stop() == 0
        wait_for(lambda: probe(ready_path)[0] == 503,
                 f"readinessProbe {ready_path} 503 once the webhook is gone",
                 bound=SERVING_DROP, watch=[certctl])
        assert probe(startup_path)[0] == 200  # the certificate itself is still right
    finally:
        webhook.stop()
        exit_code = certctl.stop()
    assert exit_code == 0, certctl.log()[-3000:]

    secret = json.loads(cluster.kubectl("get", "secret", "my-webhook-tls", "-n", NS, "-o",
                                        "json").stdout)
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "certctl"
    assert base64.b64decode(secret["data"]["ca.crt"]) == cafile.read_bytes()
    # Exactly the stored RBAC was enough, the Events in default included.
    requests = [e for e in cluster.request_log()["requests"] if e["user"] == user]
    assert [e for e in requests if e["code"] == 403] == []
    assert [e for e in requests if e["verb"] == "create" and e["resource"] == "secrets"]
    events = json.loads(cluster.kubectl("get", "events", "-n", "default", "-o",
                                        "json").stdout)["items"]
    assert any(e["reason"] == "CABundleInjected" and
               e["involvedObject"]["name"] == "my-webhook" for e in events), events
    lease = json.loads(cluster.kubectl("get", "lease", "my-webhook-tls-certctl", "-n", NS,
                                       "-o", "json").stdout)
    assert not lease["spec"].get("holderIdentity")  # released on SIGTERM
