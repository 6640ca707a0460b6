"""The emulator as kubectl 1.36 sees it: every command of the wire spec's checklist."""

import base64
import json
import os
import subprocess
import time

from harness.kubectl_io import get_json, read_line

SECRET = """\
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
  namespace: default
  labels: {app: demo, tier: web}
data: {password: czNjcmV0}
"""

VWC = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: demo-webhook
  labels: {app: demo}
webhooks:
"""
WEBHOOK = """\
- name: {name}
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig:
    service: {{namespace: ca-system, name: webhook, path: /{path}, port: 443}}
  rules:
  - {{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps],
     scope: "*"}}
"""
MWC = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: demo-mutating}
webhooks:
- name: mutate.demo.example.com
  admissionReviewVersions: [v1]
  sideEffects: NoneOnDryRun
  clientConfig: {url: "https://webhook.example.com/mutate"}
"""
CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - {name: v1, served: true, storage: true,
     schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {namespace: ca-system, name: webhook, path: /convert}
"""
APISERVICE = """\
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.example.com}
spec:
  group: metrics.example.com
  version: v1beta1
  service: {namespace: ca-system, name: webhook}
  groupPriorityMinimum: 100
  versionPriority: 100
"""


def test_version_and_api_resources(cluster):
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == "v1.32.4"
    out = cluster.kubectl("api-resources", "--no-headers").stdout
    rows = {tuple(line.split()[:1] + line.split()[-3:-1]) for line in out.splitlines()}
    assert ("leases", "coordination.k8s.io/v1", "true") in rows
    assert ("validatingwebhookconfigurations", "admissionregistration.k8s.io/v1",
            "false") in rows


def test_apply_twice_is_unchanged_and_does_not_write(cluster):
    out = cluster.kubectl("apply", "-f", "-", input=SECRET).stdout
    assert out.strip() == "secret/app-secret created"
    rv = get_json(cluster, "secret", "app-secret")["metadata"]["resourceVersion"]
    cluster.reset_request_log()
    out = cluster.kubectl("apply", "-f", "-", input=SECRET).stdout
    assert out.strip() == "secret/app-secret unchanged"
    assert get_json(cluster, "secret", "app-secret")["metadata"]["resourceVersion"] == rv
    assert cluster.writes() == []
    # kubectl's own requests are what the wire spec observed.
    log = cluster.request_log()["requests"]
    assert any(e["path"] == "/openapi/v2" and e["code"] == 200 for e in log)


def test_apply_of_write_only_string_data_is_a_no_op_write(cluster):
    with_string_data = SECRET.replace("data: {password: czNjcmV0}", "stringData: {k: v}")
    cluster.kubectl("apply", "-f", "-", input=with_string_data)
    rv = cluster.resource_version()
    # stringData is never stored, so kubectl's three-way diff always sends it again (as
    # against a real server); the server sees an identical object and writes nothing.
    out = cluster.kubectl("apply", "-f", "-", input=with_string_data).stdout
    assert out.strip() == "secret/app-secret configured"
    assert cluster.resource_version() == rv
    assert get_json(cluster, "secret", "app-secret")["data"] == {"k": "dg=="}


def test_patch_types(cluster):
    cluster.kubectl("apply", "-f", "-", input=SECRET)
    cluster.kubectl("patch", "secret", "app-secret", "--type", "strategic",
                    "-p", '{"metadata":{"labels":{"patched":"smp"}}}')
    cluster.kubectl("patch", "secret", "app-secret", "--type", "merge",
                    "-p", '{"metadata":{"labels":{"tier":null}},"data":{"extra":"eA=="}}')
    cluster.kubectl("patch", "secret", "app-secret", "--type", "json", "-p",
                    '[{"op":"test","path":"/data/extra","value":"eA=="},'
                    '{"op":"replace","path":"/data/extra","value":"eQ=="}]')
    obj = get_json(cluster, "secret", "app-secret")
    assert obj["metadata"]["labels"] == {"app": "demo", "patched": "smp"}
    assert obj["data"]["extra"] == "eQ=="
    failed = cluster.kubectl("patch", "secret", "app-secret", "--type", "json", "-p",
                             '[{"op":"test","path":"/data/extra","value":"eA=="}]',
                             check=False)
    assert failed.returncode == 1
    assert "the server rejected our request due to an error in our request" in failed.stderr


def test_server_side_apply(cluster):
    out = cluster.kubectl("apply", "--server-side", "-f", "-", input=SECRET).stdout
    assert out.strip() == "secret/app-secret serverside-applied"
    obj = get_json(cluster, "secret", "app-secret", "--show-managed-fields")
    assert obj["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert obj["metadata"]["managedFields"][0]["operation"] == "Apply"
    cluster.kubectl("apply", "--server-side", "-f", "-", input=SECRET)
    again = get_json(cluster, "secret", "app-secret")
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    # Another manager changing the same field conflicts unless it forces.
    cluster.kubectl("label", "secret", "app-secret", "app=other", "--overwrite")
    clash = cluster.kubectl("apply", "--server-side", "-f", "-", input=SECRET, check=False)
    assert clash.returncode == 1
    assert 'conflict with "kubectl-label"' in clash.stderr and ".metadata.labels.app" in \
        clash.stderr
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=SECRET)
    assert get_json(cluster, "secret", "app-secret")["metadata"]["labels"]["app"] == "demo"


def test_client_side_then_server_side_apply_migrates_ownership(cluster):
    cluster.kubectl("apply", "-f", "-", input=SECRET)
    out = cluster.kubectl("apply", "--server-side", "-f", "-",
                          input=SECRET.replace("czNjcmV0", "Y2hhbmdlZA==")).stdout
    assert out.strip() == "secret/app-secret serverside-applied"


def test_get_watch_sees_updates_and_deletion(cluster):
    cluster.kubectl("apply", "-f", "-", input=SECRET)
    proc = cluster.kubectl_background(
        "get", "secret", "app-secret", "-w",
        "-o", "jsonpath={.metadata.labels.step}{\"\\n\"}")
    try:
        assert read_line(proc) == ""  # the initial object has no "step" label
        cluster.kubectl("label", "secret", "app-secret", "step=one")
        assert read_line(proc) == "one"
        cluster.kubectl("delete", "secret", "app-secret")
        assert read_line(proc) == "one"  # the DELETED event carries the last state
    finally:
        proc.kill()
        proc.communicate(timeout=10)


def test_delete_with_finalizer_and_wait_for_delete(cluster):
    cluster.kubectl("apply", "-f", "-", input=SECRET)
    cluster.kubectl("patch", "secret", "app-secret", "--type", "merge",
                    "-p", '{"metadata":{"finalizers":["example.com/hold"]}}')
    out = cluster.kubectl("delete", "secret", "app-secret", "--wait=false").stdout
    assert out.strip() == 'secret "app-secret" deleted from default namespace'
    assert get_json(cluster, "secret", "app-secret")["metadata"]["deletionTimestamp"]
    waiter = cluster.kubectl_background("wait", "--for=delete", "secret/app-secret",
                                        "--timeout=20s")
    try:
        time.sleep(0.5)  # let kubectl reach its watch; the outcome does not depend on it
        cluster.kubectl("patch", "secret", "app-secret", "--type", "json",
                        "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
        out, err = waiter.communicate(timeout=20)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate(timeout=10)
    assert waiter.returncode == 0, err
    assert out.strip() == "secret/app-secret condition met"
    gone = cluster.kubectl("get", "secret", "app-secret", check=False)
    assert 'secrets "app-secret" not found' in gone.stderr


def test_auth_can_i_and_forbidden_messages(cluster):
    cluster.add_user("bob", [{"verbs": ["get", "list"], "apiGroups": [""],
                              "resources": ["secrets"], "namespaces": ["team"]}])
    assert cluster.kubectl("auth", "can-i", "get", "secrets", "-n", "team",
                           user="bob").stdout.strip() == "yes"
    denied = cluster.kubectl("auth", "can-i", "delete", "secrets", "-n", "team", user="bob",
                             check=False)
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    assert cluster.kubectl("auth", "can-i", "get", "secrets", "-n", "other", user="bob",
                           check=False).stdout.strip() == "no"
    assert cluster.kubectl("auth", "can-i", "delete", "secrets").stdout.strip() == "yes"
    forbidden = cluster.kubectl("get", "secret", "x", "-n", "ns", user="bob", check=False)
    assert forbidden.stderr.strip() == (
        'Error from server (Forbidden): secrets "x" is forbidden: User "bob" cannot get '
        'resource "secrets" in API group "" in the namespace "ns"')


def test_bad_token_is_unauthorized(cluster):
    cluster.add_user("mallory", [])
    with open(cluster.kubeconfig("mallory"), encoding="utf-8") as f:
        config = json.load(f)
    config["users"][0]["user"]["token"] = "not-a-token"
    with open(cluster.kubeconfig("mallory"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    out = cluster.kubectl("get", "secrets", user="mallory", check=False)
    assert out.returncode == 1
    # kubectl's discovery client reports the 401 in its own words on a cold cache.
    assert "error: You must be logged in to the server" in out.stderr


def test_typed_create_commands_send_protobuf(cluster, tmp_path):
    key, crt = tmp_path / "tls.key", tmp_path / "tls.crt"
    subprocess.run(["openssl", "req", "-x509", "-nodes", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-subj", "/CN=demo", "-days", "1",
                    "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True,
                   timeout=30)
    cluster.kubectl("create", "namespace", "ca-system")
    cluster.kubectl("create", "secret", "tls", "webhook-tls", "-n", "ca-system",
                    f"--cert={crt}", f"--key={key}")
    cluster.kubectl("create", "secret", "generic", "plain", "-n", "ca-system",
                    "--from-literal=a=b", "--from-literal=empty=")
    cluster.kubectl("create", "configmap", "cfg", "-n", "ca-system", "--from-literal=x=y")
    cluster.kubectl("create", "serviceaccount", "ctrl", "-n", "ca-system")
    tls = get_json(cluster, "secret", "webhook-tls", "-n", "ca-system")
    assert tls["type"] == "kubernetes.io/tls"
    assert base64.b64decode(tls["data"]["tls.crt"]) == crt.read_bytes()
    plain = get_json(cluster, "secret", "plain", "-n", "ca-system")
    assert plain["data"] == {"a": "Yg==", "empty": ""}
    assert get_json(cluster, "configmap", "cfg", "-n", "ca-system")["data"] == {"x": "y"}
    ns = get_json(cluster, "namespace", "ca-system")
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "ca-system"}
    assert get_json(cluster, "serviceaccount", "ctrl", "-n", "ca-system")["metadata"]["name"] \
        == "ctrl"


def test_label_selectors(cluster):
    for name, labels in (("a", "app=x,tier=web"), ("b", "app=y,tier=web"), ("c", "app=x")):
        cluster.kubectl("create", "secret", "generic", name)
        cluster.kubectl("label", "secret", name, *labels.split(","))

    def names(selector):
        return cluster.kubectl("get", "secrets", "-l", selector, "-o",
                               "jsonpath={.items[*].metadata.name}").stdout.split()

    assert names("app=x") == ["a", "c"]
    assert names("app in (x,y),tier") == ["a", "b"]
    assert names("!tier") == ["c"]
    assert names("app!=x") == ["b"]
    assert cluster.kubectl("get", "secrets", "--field-selector", "metadata.name=b", "-o",
                           "name").stdout.split() == ["secret/b"]


def test_webhook_kinds_and_ca_bundle_patch_by_name(cluster):
    manifest = VWC + "".join(WEBHOOK.format(name=f"{n}.demo.example.com", path=n)
                             for n in ("a", "b", "c"))
    for doc in (manifest, MWC, CRD, APISERVICE):
        cluster.kubectl("apply", "-f", "-", input=doc)
    second = cluster.kubectl("apply", "-f", "-", input="---\n".join(
        (manifest, MWC, CRD, APISERVICE))).stdout.split("\n")
    assert all(line.endswith(" unchanged") for line in second if line)
    cluster.kubectl("wait", "--for=condition=Established", "crd/widgets.example.com",
                    "--timeout=10s")
    before = get_json(cluster, "validatingwebhookconfiguration", "demo-webhook")
    cluster.kubectl("patch", "validatingwebhookconfiguration", "demo-webhook", "-p",
                    '{"webhooks":[{"name":"b.demo.example.com",'
                    '"clientConfig":{"caBundle":"Q0EtQlVORExF"}}]}')
    after = get_json(cluster, "validatingwebhookconfiguration", "demo-webhook")
    assert [w["name"] for w in after["webhooks"]] == \
        ["a.demo.example.com", "b.demo.example.com", "c.demo.example.com"]
    assert after["webhooks"][0] == before["webhooks"][0]
    assert after["webhooks"][2] == before["webhooks"][2]
    expected = json.loads(json.dumps(before["webhooks"][1]))
    expected["clientConfig"]["caBundle"] = "Q0EtQlVORExF"
    assert after["webhooks"][1] == expected
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    # An Established CRD takes only a PEM bundle; an APIService takes any bytes.
    with open(cluster.ca_path, "rb") as f:
        pem = base64.b64encode(f.read()).decode()
    for kind, name, patch in (
            ("crd", "widgets.example.com",
             '{"spec":{"conversion":{"webhook":{"clientConfig":{"caBundle":"%s"}}}}}' % pem),
            ("apiservice", "v1beta1.metrics.example.com", '{"spec":{"caBundle":"Q0E="}}')):
        cluster.kubectl("patch", kind, name, "--type", "merge", "-p", patch)
    crd = get_json(cluster, "crd", "widgets.example.com")
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == pem
    assert get_json(cluster, "apiservice", "v1beta1.metrics.example.com")["spec"][
        "caBundle"] == "Q0E="
    assert get_json(cluster, "mutatingwebhookconfiguration", "demo-mutating")["webhooks"][0][
        "reinvocationPolicy"] == "Never"


def test_dry_run_server_replace_and_lease(cluster, tmp_path):
    cluster.kubectl("apply", "-f", "-", input=SECRET)
    rv = cluster.resource_version()
    out = cluster.kubectl("delete", "secret", "app-secret", "--dry-run=server").stdout
    assert out.strip() == 'secret "app-secret" deleted from default namespace (server dry run)'
    cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=SECRET.replace("demo", "x"))
    assert cluster.resource_version() == rv
    lease = tmp_path / "lease.yaml"
    lease.write_text("apiVersion: coordination.k8s.io/v1\nkind: Lease\n"
                     "metadata: {name: lock, namespace: kube-system}\n"
                     "spec: {holderIdentity: a, leaseDurationSeconds: 15,\n"
                     "       renewTime: '2025-05-01T10:00:00.123456Z'}\n")
    cluster.kubectl("create", "-f", str(lease))
    # replace fetches the resourceVersion itself; a Lease PUT without one would be a 422.
    cluster.kubectl("replace", "-f", str(lease))
    got = get_json(cluster, "lease", "lock", "-n", "kube-system")
    assert got["spec"]["renewTime"] == "2025-05-01T10:00:00.123456Z"
    lease.write_text(lease.read_text().replace("123456Z", "123Z"))
    bad = cluster.kubectl("replace", "-f", str(lease), check=False)
    assert 'cannot parse ".123Z" as ".000000"' in bad.stderr


def test_strict_validation_rejects_unknown_fields(cluster):
    out = cluster.kubectl("apply", "-f", "-", check=False,
                          input=SECRET.replace("data: {", "dta: {"))
    assert out.returncode == 1
    assert 'strict decoding error: unknown field "dta"' in out.stderr
    assert os.path.isdir(os.path.join(cluster.tmp, "kubecache-admin"))


DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def test_scale_subresource_of_deployments(cluster):
    """kubectl scale goes through deployments/scale (autoscaling/v1 Scale), as HPAs do."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps(DEPLOYMENT))
    out = cluster.kubectl("scale", "deployment", "web", "--replicas=3").stdout
    assert out.strip() == "deployment.apps/web scaled"
    deployment = get_json(cluster, "deployment", "web")
    assert deployment["spec"]["replicas"] == 3 and deployment["metadata"]["generation"] == 2
    scale = json.loads(cluster.kubectl(
        "get", "--raw", "/apis/apps/v1/namespaces/default/deployments/web/scale").stdout)
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 3} and scale["status"]["selector"] == "app=web"
    assert scale["metadata"]["resourceVersion"] == deployment["metadata"]["resourceVersion"]
    # --current-replicas is a precondition kubectl checks; a stale resourceVersion is a 409.
    wrong = cluster.kubectl("scale", "deployment", "web", "--replicas=1",
                            "--current-replicas=2", check=False)
    assert wrong.returncode != 0 and "Expected replicas to be 2, was 3" in wrong.stderr
    stale = dict(scale, metadata=dict(scale["metadata"], resourceVersion="1"),
                 spec={"replicas": 2})
    resp = cluster.api("PUT", "/apis/apps/v1/namespaces/default/deployments/web/scale", stale)
    assert resp.status == 409 and resp.json()["reason"] == "Conflict"
    negative = cluster.api("PATCH", "/apis/apps/v1/namespaces/default/deployments/web/scale",
                           {"spec": {"replicas": -1}},
                           content_type="application/merge-patch+json")
    assert negative.status == 422 and "spec.replicas" in negative.json()["message"]
    resources = json.loads(cluster.kubectl("get", "--raw", "/apis/apps/v1").stdout)["resources"]
    [entry] = [r for r in resources if r["name"] == "deployments/scale"]
    assert (entry["group"], entry["version"], entry["kind"]) == ("autoscaling", "v1", "Scale")
    assert get_json(cluster, "deployment", "web")["spec"]["replicas"] == 3
