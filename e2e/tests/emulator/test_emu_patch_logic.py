"""The emulator's patch and selector logic, checked directly (no server)."""

import pytest

from kubeemu import errors, patch, schema
from kubeemu.codec import Base64Error, go_b64decode, parse_micro
from kubeemu.resources import lookup
from kubeemu.selectors import FieldSelector, LabelSelector

VWC = schema.VALIDATING_WEBHOOK_CONFIGURATION


def _vwc():
    return {"webhooks": [{"name": "a.example.com", "clientConfig": {"caBundle": "QQ=="}},
                         {"name": "b.example.com", "clientConfig": {"url": "https://b"}},
                         {"name": "c.example.com", "clientConfig": {"caBundle": "Qw=="}}]}


def test_strategic_merge_merges_webhooks_by_name():
    out = patch.strategic_merge(_vwc(), {"webhooks": [
        {"name": "b.example.com", "clientConfig": {"caBundle": "Qg=="}}]}, VWC)
    assert out["webhooks"][0] == _vwc()["webhooks"][0]
    assert out["webhooks"][1] == {"name": "b.example.com",
                                  "clientConfig": {"url": "https://b", "caBundle": "Qg=="}}
    assert out["webhooks"][2] == _vwc()["webhooks"][2]


def test_strategic_merge_directives():
    out = patch.strategic_merge(_vwc(), {
        "$setElementOrder/webhooks": [{"name": "c.example.com"}, {"name": "a.example.com"}],
        "webhooks": [{"name": "b.example.com", "$patch": "delete"}]}, VWC)
    assert [w["name"] for w in out["webhooks"]] == ["c.example.com", "a.example.com"]
    out = patch.strategic_merge(_vwc(), {"webhooks": [{"$patch": "replace"},
                                                      {"name": "z.example.com"}]}, VWC)
    assert out["webhooks"] == [{"name": "z.example.com"}]


def test_strategic_merge_primitive_set_and_atomic_lists():
    obj = {"metadata": {"finalizers": ["a", "b"]},
           "webhooks": [{"name": "a.example.com", "admissionReviewVersions": ["v1", "v1beta1"]}]}
    out = patch.strategic_merge(obj, {
        "metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]},
        "webhooks": [{"name": "a.example.com", "admissionReviewVersions": ["v1"]}]}, VWC)
    assert out["metadata"]["finalizers"] == ["b", "c"]
    # admissionReviewVersions carries no patch strategy: replaced, not merged.
    assert out["webhooks"][0]["admissionReviewVersions"] == ["v1"]


def test_strategic_merge_pod_template_keys_and_retain_keys():
    deploy = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                       "template": {"spec": {"containers": [
                           {"name": "app", "image": "a:1",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 80, "name": "http"}]}]}}}}
    out = patch.strategic_merge(deploy, {"spec": {
        "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
        "template": {"spec": {"containers": [{"name": "app", "env": [{"name": "B",
                                                                      "value": "3"}],
                                              "ports": [{"containerPort": 81}]}]}}}},
        schema.DEPLOYMENT)
    assert out["spec"]["strategy"] == {"type": "Recreate"}
    c = out["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "a:1"
    assert c["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    assert c["ports"] == [{"containerPort": 80, "name": "http"}, {"containerPort": 81}]


def test_merge_patch_replaces_lists_and_deletes_nulls():
    out = patch.merge_patch({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": None}, "l": [3]})
    assert out == {"a": {"c": 2}, "l": [3]}


def test_json_patch_ops_and_failures():
    doc = {"webhooks": [{"name": "a", "clientConfig": {}}]}
    out = patch.json_patch(doc, [
        {"op": "test", "path": "/webhooks/0/name", "value": "a"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "QQ=="},
        {"op": "copy", "from": "/webhooks/0", "path": "/webhooks/-"},
        {"op": "move", "from": "/webhooks/1/name", "path": "/moved"},
        {"op": "remove", "path": "/webhooks/1"}])
    assert out == {"webhooks": [{"name": "a", "clientConfig": {"caBundle": "QQ=="}}],
                   "moved": "a"}
    for ops in ([{"op": "test", "path": "/webhooks/0/name", "value": "x"}],
                [{"op": "replace", "path": "/missing", "value": 1}],
                [{"op": "remove", "path": "/webhooks/5"}]):
        with pytest.raises(errors.ApiError) as e:
            patch.json_patch(doc, ops)
        assert e.value.code == 422
        assert e.value.message == ("the server rejected our request due to an error in our "
                                   "request")


@pytest.mark.parametrize("text,labels,expected", [
    ("a=1", {"a": "1"}, True),
    ("a==1,b!=2", {"a": "1"}, True),
    ("a in (1,2),!c", {"a": "2"}, True),
    ("a notin (1)", {}, True),
    ("a", {"b": "1"}, False),
    ("x>5", {"x": "6"}, True),
])
def test_label_selector_matching(text, labels, expected):
    assert LabelSelector.parse(text).matches(labels) is expected


def test_label_selector_parse_errors_are_bad_requests():
    for text in ("a in 1", "a=1 b", "=x", "a,"):
        with pytest.raises(errors.ApiError) as e:
            LabelSelector.parse(text)
        assert e.value.code == 400 and e.value.reason == "BadRequest"


def test_field_selector_fields_per_kind():
    secrets, leases = lookup("", "v1", "secrets"), lookup("coordination.k8s.io", "v1", "leases")
    sel = FieldSelector.parse("metadata.name=x,type!=Opaque", secrets)
    assert sel.matches({"metadata": {"name": "x"}, "type": "kubernetes.io/tls"})
    with pytest.raises(errors.ApiError) as e:
        FieldSelector.parse("spec.x=1", secrets)
    assert e.value.message == "field label not supported: spec.x"
    with pytest.raises(errors.ApiError) as e:
        FieldSelector.parse("spec.x=1", leases)
    assert e.value.message == ('"spec.x" is not a known field selector: only "metadata.name", '
                               '"metadata.namespace"')


def test_go_compatible_decoders():
    assert go_b64decode("YW\r\nJj") == b"abc"
    for bad, offset in (("YWJ", 0), ("YWJjZA=", 7), ("!!!!", 0), ("YWJjZA==x", 8)):
        with pytest.raises(Base64Error) as e:
            go_b64decode(bad)
        assert e.value.offset == offset
    assert parse_micro("2025-05-01T10:00:00.123456Z") == "2025-05-01T10:00:00.123456Z"
    with pytest.raises(ValueError) as e:
        parse_micro("2019-09-29T14:27:11.738Z")
    assert str(e.value) == ('parsing time "2019-09-29T14:27:11.738Z" as '
                            '"2006-01-02T15:04:05.000000Z07:00": cannot parse ".738Z" as '
                            '".000000"')
