"""The plain-YAML examples (manifests/examples, the hook Job, and manifests/examples/sidecar,
the sidecar) take the webhook's name from one place in their kustomization: the literal
`webhook=` of the local-config ConfigMap `webhook-name`. Offline, in a copy with that one
line changed, `kubectl kustomize` renders no trace of the old name, and certctl's flags,
the Service, the ServiceAccount, the webhook configuration, the RBAC's names, subjects and
resourceNames all carry the new one. The Secret's name stays what certctl's --secret says
and the Role's resourceNames allow.
"""

import os
import shutil

from harness.helm import by_kind, one
from harness.kustomize import kustomize, name_image

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
EXAMPLES = os.path.join(REPO, "manifests", "examples")
OLD, NEW = "example-webhook", "payments-hook"
LINE = f"- webhook={OLD}"


def renamed_copy(tmp_path, folder, kustomization):
    """A copy of the examples, certctl's image set, with the webhook's name changed in one
    line of one file."""
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy)
    assert name_image(copy) >= 3  # the Job's, the sidecar's, the audit's
    path = copy / kustomization
    text = path.read_text(encoding="utf-8")
    assert text.count(LINE) == 1, f"{kustomization} must set the name once"
    path.write_text(text.replace(LINE, f"- webhook={NEW}"), encoding="utf-8")
    return copy / folder


def values_of(args, flag):
    return [value for name, value in zip(args, args[1:]) if name == flag]


def assert_rbac_follows(objects, service_account, secret):
    """Names, subjects and resourceNames carry the new name; the Secret rule its name."""
    for obj in objects:
        assert obj["metadata"]["labels"].get("app.kubernetes.io/instance") == NEW, obj
    for binding in by_kind(objects, "RoleBinding") + by_kind(objects, "ClusterRoleBinding"):
        assert [s["name"] for s in binding["subjects"]] == [service_account]
        role_kind = binding["roleRef"]["kind"]
        names = [r["metadata"]["name"] for r in by_kind(objects, role_kind)
                 if r["metadata"].get("namespace") == binding["metadata"].get("namespace")]
        assert binding["roleRef"]["name"] in names, binding
    for cluster_scoped in by_kind(objects, "ClusterRole") + by_kind(objects, "ClusterRoleBinding"):
        assert NEW in cluster_scoped["metadata"]["name"].split("."), cluster_scoped["metadata"]
    [target_rule] = [r for r in one(objects, "ClusterRole")["rules"]
                     if r["resources"] == ["validatingwebhookconfigurations"]]
    assert target_rule["resourceNames"] == [NEW]
    secret_rules = [r for role in by_kind(objects, "Role") for r in role["rules"]
                    if r["resources"] == ["secrets"] and "resourceNames" in r]
    assert [r["resourceNames"] for r in secret_rules] == [[secret]]


def test_hook_job_example_renames_from_one_place(tmp_path):
    folder = renamed_copy(tmp_path, ".", "kustomization.yaml")
    stream, objects = kustomize(folder)
    assert OLD not in stream
    assert not by_kind(objects, "ConfigMap"), "the name's ConfigMap is local configuration"

    job = one(objects, "Job")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert values_of(args, "--service") == [NEW]
    assert values_of(args, "--validating-webhook") == [NEW]
    [secret] = values_of(args, "--secret")
    assert job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/instance"] == NEW
    sa = job["spec"]["template"]["spec"]["serviceAccountName"]
    assert_rbac_follows(objects, sa, secret)


def test_the_unchanged_hook_job_example_is_named_example_webhook():
    _, objects = kustomize(EXAMPLES)
    args = one(objects, "Job")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert values_of(args, "--service") == [OLD]
    assert values_of(args, "--validating-webhook") == [OLD]


def check_sidecar(objects, stream):
    assert OLD not in stream
    assert not by_kind(objects, "ConfigMap"), "the name's ConfigMap is local configuration"
    service, vwc = one(objects, "Service"), one(objects, "ValidatingWebhookConfiguration")
    deployment, sa = one(objects, "Deployment"), one(objects, "ServiceAccount")
    pod = deployment["spec"]["template"]["spec"]
    [certctl] = [c for c in (pod.get("initContainers") or []) + pod["containers"]
                 if c["name"] == "certctl"]
    args = certctl["args"]

    assert service["metadata"]["name"] == NEW
    assert values_of(args, "--service") == [NEW]
    assert vwc["metadata"]["name"] == NEW
    assert values_of(args, "--validating-webhook") == [NEW]
    for webhook in vwc["webhooks"]:
        assert webhook["clientConfig"]["service"]["name"] == NEW
        assert webhook["clientConfig"]["service"]["namespace"] == service["metadata"]["namespace"]
        assert webhook["name"] == f"validate.{NEW}.example.com"
        assert webhook["namespaceSelector"]["matchLabels"] == {"webhooks.example.com/opt-in": NEW}
    assert deployment["metadata"]["name"] == NEW
    assert sa["metadata"]["name"] == NEW == pod["serviceAccountName"]
    # The Service still selects the Deployment's pods.
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert pod_labels["app.kubernetes.io/name"] == NEW
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == NEW, obj["metadata"]
    [secret] = values_of(args, "--secret")
    assert_rbac_follows(objects, NEW, secret)


def test_sidecar_example_renames_from_one_place(tmp_path):
    folder = renamed_copy(tmp_path, "sidecar", os.path.join("sidecar", "native",
                                                             "kustomization.yaml"))
    stream, objects = kustomize(folder)
    check_sidecar(objects, stream)


def test_sidecar_variant_without_native_sidecars_follows_the_same_place(tmp_path):
    folder = renamed_copy(tmp_path, os.path.join("sidecar", "without-native-sidecar"),
                          os.path.join("sidecar", "native", "kustomization.yaml"))
    stream, objects = kustomize(folder)
    check_sidecar(objects, stream)
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert "initContainers" not in pod
    assert pod["containers"][0]["command"][:2] == ["/usr/local/bin/certctl", "wait"]
