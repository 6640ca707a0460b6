"""The emulator as the Debian python3-kubernetes client (22.6) sees it."""

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


@pytest.fixture
def api(cluster):
    """A python-kubernetes ApiClient logged in as admin through the kubeconfig."""
    with config.new_client_from_config(cluster.kubeconfig("admin")) as c:
        yield c


def test_crud_patch_and_selectors(api):
    v1 = client.CoreV1Api(api)
    assert client.VersionApi(api).get_code().minor == "32"
    made = v1.create_namespaced_secret("default", {
        "metadata": {"name": "p1", "labels": {"app": "x", "tier": "web"}},
        "stringData": {"a": "b"}})
    assert made.data == {"a": "Yg=="} and made.type == "Opaque"
    patched = v1.patch_namespaced_secret("p1", "default", {"metadata": {"labels": {"v": "2"}}})
    assert patched.metadata.labels == {"app": "x", "tier": "web", "v": "2"}
    patched = v1.patch_namespaced_secret("p1", "default", [
        {"op": "replace", "path": "/metadata/labels/v", "value": "3"}])
    assert patched.metadata.labels["v"] == "3"
    v1.create_namespaced_secret("default", {"metadata": {"name": "p2", "labels": {"app": "y"}}})
    names = [s.metadata.name for s in v1.list_namespaced_secret(
        "default", label_selector="app in (x,y),!tier").items]
    assert names == ["p2"]
    names = [s.metadata.name for s in v1.list_secret_for_all_namespaces(
        field_selector="metadata.namespace=default,metadata.name!=p2").items]
    assert names == ["p1"]
    assert v1.read_namespaced_secret("p1", "default").metadata.uid == made.metadata.uid
    status = v1.delete_namespaced_secret("p1", "default")
    assert status.status == "Success" and status.details.uid == made.metadata.uid
    with pytest.raises(ApiException) as e:
        v1.read_namespaced_secret("p1", "default")
    assert e.value.status == 404


def test_stale_update_is_a_conflict(api):
    v1 = client.CoreV1Api(api)
    first = v1.create_namespaced_secret("default", {"metadata": {"name": "s"}})
    first.metadata.labels = {"a": "1"}
    v1.replace_namespaced_secret("s", "default", first)
    first.metadata.labels = {"a": "2"}
    with pytest.raises(ApiException) as e:
        v1.replace_namespaced_secret("s", "default", first)
    assert e.value.status == 409 and '"reason":"Conflict"' in e.value.body


def test_typed_models_of_webhook_kinds_and_leases(api):
    adm = client.AdmissionregistrationV1Api(api)
    adm.create_validating_webhook_configuration({
        "metadata": {"name": "vw"},
        "webhooks": [{"name": "a.example.com", "admissionReviewVersions": ["v1"],
                      "sideEffects": "None", "clientConfig": {"url": "https://x/a"}}]})
    vw = adm.read_validating_webhook_configuration("vw")
    assert vw.webhooks[0].timeout_seconds == 10 and vw.metadata.generation == 1
    with pytest.raises(ApiException) as e:
        adm.create_validating_webhook_configuration({
            "metadata": {"name": "bad"}, "webhooks": [{
                "name": "a.example.com", "admissionReviewVersions": ["v1"],
                "sideEffects": "Some", "clientConfig": {"url": "https://x/a"}}]})
    assert e.value.status == 422
    assert 'webhooks[0].sideEffects: Unsupported value: \\"Some\\": supported values: ' \
           '\\"None\\", \\"NoneOnDryRun\\"' in e.value.body
    coord = client.CoordinationV1Api(api)
    lease = coord.create_namespaced_lease("default", {
        "metadata": {"name": "lock"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                 "renewTime": "2025-05-01T10:07:42.654321Z"}})
    assert lease.spec.renew_time.microsecond == 654321
    assert [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items] == \
        ["default", "kube-node-lease", "kube-public", "kube-system"]


def test_watch_stream_sees_changes_from_a_list(api, cluster):
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_secret("default", {"metadata": {"name": "w", "labels": {"a": "1"}}})
    rv = v1.list_namespaced_secret("default").metadata.resource_version
    v1.patch_namespaced_secret("w", "default", {"metadata": {"labels": {"a": "2"}}})
    v1.delete_namespaced_secret("w", "default")
    seen = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        v1.list_namespaced_secret, "default", resource_version=rv, timeout_seconds=1,
        label_selector="a")]
    assert seen == [("MODIFIED", "w"), ("DELETED", "w")]


def test_watch_after_compaction_raises_410(api, cluster):
    v1 = client.CoreV1Api(api)
    made = v1.create_namespaced_secret("default", {"metadata": {"name": "w"}})
    v1.patch_namespaced_secret("w", "default", {"metadata": {"labels": {"a": "2"}}})
    cluster.compact()
    with pytest.raises(ApiException) as e:
        for _ in watch.Watch().stream(v1.list_namespaced_secret, "default",
                                      resource_version=made.metadata.resource_version,
                                      timeout_seconds=2):
            pass
    assert e.value.status == 410


def test_in_cluster_service_account(cluster, monkeypatch):
    cluster.add_user("system:serviceaccount:ca:ctrl", [
        {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
         "namespaces": ["default"]}])
    env = cluster.in_cluster_env("system:serviceaccount:ca:ctrl", "ca")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    sa = env["CERTCTL_SERVICEACCOUNT_DIR"]
    with open(f"{sa}/namespace", encoding="utf-8") as f:
        assert f.read() == "ca"
    cfg = client.Configuration()
    config.incluster_config.InClusterConfigLoader(
        token_filename=f"{sa}/token", cert_filename=f"{sa}/ca.crt").load_and_set(cfg)
    with client.ApiClient(cfg) as c:
        v1 = client.CoreV1Api(c)
        with pytest.raises(ApiException) as e:
            v1.read_namespaced_secret("missing", "default")
        assert e.value.status == 404
        with pytest.raises(ApiException) as e:
            v1.list_namespaced_secret("default")
        assert e.value.status == 403
