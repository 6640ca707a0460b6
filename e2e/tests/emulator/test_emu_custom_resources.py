"""Custom resources: once a CustomResourceDefinition is Established, the emulator serves its
versions under /apis/<group>/<version> as kube-apiserver does (wire spec 6.4): discovery,
CRUD and watch, fields the structural schema lacks pruned (and refused under
fieldValidation=Strict), values checked against the openAPIV3Schema (422), generation, the
status subresource, resourceVersion required on PUT, merge and JSON patches but no strategic
merge patch (415), and the custom resources deleted with their CRD. Checked with raw HTTPS
and with kubectl 1.36."""

import json

from harness.kubectl_io import get_json
from harness.waiting import wait_for

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
DURATION = "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?)$"

WIDGET_SCHEMA = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "every": {"type": "string", "pattern": DURATION},
                "port": {"x-kubernetes-int-or-string": True,
                         "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "parts": {
                    "type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "count": {"type": "integer"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"],
                          "categories": ["all"]},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": WIDGET_SCHEMA},
                              "subresources": {"status": {}}}]}}
WIDGET = """\
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec:
  size: 3
  mode: fast
  every: 1m30s
  port: metrics
  labels: {team: a}
  parts: [{name: a, count: 1}, {name: b}]
  free: {anything: [1, {x: z}]}
"""


def widget(name="w1", **spec):
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": 3, **spec}}


def establish(cluster, crd=CRD):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(crd))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}",
                    "--timeout=10s")


def test_custom_resources_are_served_only_once_their_crd_is_established(cluster):
    missing = cluster.api("GET", WIDGETS)
    assert missing.status == 404
    assert missing.json()["message"] == "the server could not find the requested resource"
    groups = {g["name"] for g in cluster.api("GET", "/apis").json()["groups"]}
    assert "example.com" not in groups

    establish(cluster)
    groups = {g["name"]: g for g in cluster.api("GET", "/apis").json()["groups"]}
    assert groups["example.com"]["preferredVersion"]["groupVersion"] == "example.com/v1"
    resources = cluster.api("GET", "/apis/example.com/v1").json()["resources"]
    assert [(r["name"], r["kind"], r["namespaced"]) for r in resources] == [
        ("widgets", "Widget", True), ("widgets/status", "Widget", True)]
    assert resources[0]["shortNames"] == ["wd"] and resources[0]["categories"] == ["all"]
    rows = cluster.kubectl("api-resources", "--api-group", "example.com",
                           "--no-headers").stdout.split()
    assert rows == ["widgets", "wd", "example.com/v1", "true", "Widget"]
    assert cluster.api("GET", WIDGETS).json() == {
        "kind": "WidgetList", "apiVersion": "example.com/v1",
        "metadata": {"resourceVersion": str(cluster.resource_version())}, "items": []}


def test_kubectl_applies_gets_and_reapplies_a_custom_resource(cluster):
    establish(cluster)
    out = cluster.kubectl("apply", "-f", "-", input=WIDGET).stdout
    assert out.strip() == "widget.example.com/w1 created"
    made = get_json(cluster, "widget", "w1")
    assert made["spec"]["parts"] == [{"name": "a", "count": 1}, {"name": "b"}]
    assert made["spec"]["free"] == {"anything": [1, {"x": "z"}]}
    assert made["metadata"]["generation"] == 1
    cluster.reset_request_log()
    out = cluster.kubectl("apply", "-f", "-", input=WIDGET).stdout
    assert out.strip() == "widget.example.com/w1 unchanged"
    assert cluster.writes() == []
    # kubectl patches what it does not know with a JSON merge patch.
    out = cluster.kubectl("apply", "-f", "-", input=WIDGET.replace("size: 3", "size: 4")).stdout
    assert out.strip() == "widget.example.com/w1 configured"
    changed = get_json(cluster, "wd", "w1")
    assert changed["spec"]["size"] == 4 and changed["metadata"]["generation"] == 2
    assert cluster.kubectl("get", "widgets", "-o", "name").stdout.split() == \
        ["widget.example.com/w1"]


def test_fields_the_schema_lacks_are_pruned_or_refused(cluster):
    establish(cluster)
    with_unknown = WIDGET.replace("  size: 3", "  size: 3\n  colour: red")
    refused = cluster.kubectl("apply", "-f", "-", input=with_unknown, check=False)
    assert refused.returncode != 0
    assert 'unknown field "spec.colour"' in refused.stderr, refused.stderr
    cluster.kubectl("apply", "--validate=false", "-f", "-", input=with_unknown)
    stored = get_json(cluster, "widget", "w1")
    assert "colour" not in stored["spec"]
    # x-kubernetes-preserve-unknown-fields keeps everything below it.
    assert stored["spec"]["free"] == {"anything": [1, {"x": "z"}]}
    warned = cluster.api("POST", WIDGETS, widget("w2", shape="round"))
    assert warned.status == 201 and "shape" not in warned.json()["spec"]
    assert 'unknown field \\"spec.shape\\"' in warned.header("Warning")


def test_values_are_checked_against_the_schema(cluster):
    establish(cluster)
    cases = [
        (widget(size="3"),
         'spec.size: Invalid value: "string": spec.size in body must be of type integer: '
         '"string"'),
        (widget(size=0), "spec.size: Invalid value: 0: spec.size in body should be greater "
                         "than or equal to 1"),
        (widget(size=11), "spec.size: Invalid value: 11: spec.size in body should be less "
                          "than or equal to 10"),
        (widget(mode="medium"), 'spec.mode: Unsupported value: "medium": supported values: '
                                '"fast", "slow"'),
        (widget(every="1 min"), f'spec.every: Invalid value: "1 min": spec.every in body '
                                f"should match '{DURATION}'"),
        (widget(port=True), 'spec.port: Invalid value: "boolean": spec.port in body must be '
                            'of type integer,string: "boolean"'),
        (widget(labels={"team": 1}), 'spec.labels.team: Invalid value: "integer": '
                                     'spec.labels.team in body must be of type string: '
                                     '"integer"'),
        (widget(parts=[{"name": "a"}, {"name": "a", "count": 2}]),
         'spec.parts[1]: Duplicate value: map[string]interface {}{"name":"a"}'),
        (widget(parts=[{"count": 2}]), "spec.parts[0].name: Required value"),
        ({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
          "spec": {"mode": "fast"}}, "spec.size: Required value"),
        ({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
         "spec: Required value"),
    ]
    for body, message in cases:
        resp = cluster.api("POST", WIDGETS, body)
        assert resp.status == 422, (body, resp)
        status = resp.json()
        assert status["reason"] == "Invalid" and status["details"]["group"] == "example.com"
        assert message in status["message"], (message, status["message"])
    assert cluster.api("GET", WIDGETS).json()["items"] == []


def test_generation_status_subresource_and_updates(cluster):
    establish(cluster)
    made = cluster.api("POST", WIDGETS, dict(widget(), status={"phase": "ignored"})).json()
    assert "status" not in made  # the status subresource owns it
    path = f"{WIDGETS}/w1"

    # A label is not the spec: no new generation.
    labelled = cluster.api("PATCH", path, {"metadata": {"labels": {"a": "b"}}},
                           content_type="application/merge-patch+json").json()
    assert labelled["metadata"]["generation"] == 1
    resized = cluster.api("PATCH", path, [{"op": "replace", "path": "/spec/size", "value": 5}],
                          content_type="application/json-patch+json").json()
    assert resized["metadata"]["generation"] == 2
    smp = cluster.api("PATCH", path, {"spec": {"size": 6}},
                      content_type="application/strategic-merge-patch+json")
    assert smp.status == 415 and smp.json()["reason"] == "UnsupportedMediaType"

    status = dict(resized, status={"phase": "Ready"})
    written = cluster.api("PUT", f"{path}/status", status).json()
    assert written["status"] == {"phase": "Ready"}
    assert written["metadata"]["generation"] == 2
    # The main resource keeps the status as it is; resourceVersion is required on PUT.
    again = dict(written, status={"phase": "Lost"})
    again["spec"] = dict(written["spec"], size=7)
    updated = cluster.api("PUT", path, again).json()
    assert updated["status"] == {"phase": "Ready"} and updated["spec"]["size"] == 7
    no_rv = json.loads(json.dumps(updated))
    del no_rv["metadata"]["resourceVersion"]
    resp = cluster.api("PUT", path, no_rv)
    assert resp.status == 422
    assert "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update" in \
        resp.json()["message"]


def test_custom_resources_are_watched_and_deleted_with_their_crd(cluster):
    establish(cluster)
    rv = cluster.resource_version()
    with cluster.watch(WIDGETS, timeoutSeconds=5, resourceVersion=rv) as events:
        cluster.api("POST", WIDGETS, widget())
        event = next(events)
    assert (event["type"], event["object"]["kind"], event["object"]["apiVersion"]) == \
        ("ADDED", "Widget", "example.com/v1")

    cluster.kubectl("delete", "crd", "widgets.example.com", "--wait=false")
    wait_for(lambda: cluster.api("GET", f"{CRDS}/widgets.example.com").status == 404,
             "the CRD gone after its cleanup", bound=10)
    assert cluster.api("GET", WIDGETS).status == 404
    # A CRD of the same name starts empty.
    establish(cluster)
    assert cluster.api("GET", WIDGETS).json()["items"] == []


def test_a_cluster_scoped_crd_and_a_changed_schema(cluster):
    crd = json.loads(json.dumps(CRD))
    crd["spec"]["scope"] = "Cluster"
    establish(cluster, crd)
    path = "/apis/example.com/v1/widgets"
    assert cluster.api("POST", path, widget()).status == 201
    assert cluster.api("GET", "/apis/example.com/v1/namespaces/default/widgets/w1").status \
        == 404
    # A new schema applies as soon as the CRD is updated.
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["size"]["maximum"] = 100
    cluster.kubectl("apply", "-f", "-", input=json.dumps(crd))
    wait_for(lambda: cluster.api("POST", path, widget("big", size=50)).status == 201,
             "size 50 accepted under the new schema", bound=10)
