"""Wire behaviour no client shows directly: Status bodies, revisions, watch framing,
bookmarks, faults and the request log — checked with raw HTTPS requests."""

import json
import threading
import time

import pytest

SECRETS = "/api/v1/namespaces/default/secrets"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
VWCS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def secret(name, labels=None, **data):
    return {"metadata": {"name": name, "labels": labels or {}}, "stringData": data}


def webhook(name, **extra):
    return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"service": {"namespace": "ca", "name": "wh"}}, **extra}


def create(cluster, path, body, status=201):
    resp = cluster.api("POST", path, body)
    assert resp.status == status, resp
    return resp.json()


# --- authentication, discovery ------------------------------------------------------------

def test_unauthenticated_requests_get_401_status(cluster):
    for token in ("", "wrong"):
        resp = cluster.api("GET", SECRETS, token=token)
        assert resp.status == 401
        assert resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Failure", "message": "Unauthorized",
                               "reason": "Unauthorized", "code": 401}
    # Lower-case scheme (Python in-cluster config) and public endpoints.
    assert cluster.api("GET", SECRETS, headers={
        "Authorization": f"bearer {cluster.admin_token}"}).status == 200
    version = cluster.api("GET", "/version/", token="").json()
    assert (version["major"], version["minor"], version["gitVersion"]) == ("1", "32", "v1.32.4")
    assert cluster.api("GET", "/healthz", token="").body == b"ok"


def test_discovery_and_openapi(cluster):
    api = cluster.api("GET", "/api").json()
    assert api["versions"] == ["v1"] and api["serverAddressByClientCIDRs"]
    groups = {g["name"] for g in cluster.api("GET", "/apis").json()["groups"]}
    assert {"coordination.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io",
            "apiregistration.k8s.io", "events.k8s.io", "apps", "batch",
            "rbac.authorization.k8s.io", "authorization.k8s.io"} <= groups
    crd = cluster.api("GET", "/apis/apiextensions.k8s.io/v1").json()["resources"]
    assert crd[0]["shortNames"] == ["crd", "crds"] and crd[1]["name"] == \
        "customresourcedefinitions/status"
    v2 = cluster.api("GET", "/openapi/v2")
    assert (v2.status, v2.body) == (200, b"")
    assert v2.header("Content-Type") == \
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert cluster.api("GET", "/openapi/v3").status == 404
    assert cluster.api("GET", SECRETS, headers={
        "Accept": "application/vnd.kubernetes.protobuf"}).status == 406


# --- errors -------------------------------------------------------------------------------

def test_not_found_and_already_exists_bodies(cluster):
    resp = cluster.api("GET", LEASES + "/lock")
    assert resp.status == 404
    assert resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure",
                           "message": 'leases.coordination.k8s.io "lock" not found',
                           "reason": "NotFound", "details": {
                               "name": "lock", "group": "coordination.k8s.io",
                               "kind": "leases"}, "code": 404}
    resp = cluster.api("GET", "/api/v1/namespaces/default/widgets")
    assert resp.json()["message"] == "the server could not find the requested resource"
    create(cluster, SECRETS, secret("s1"))
    resp = cluster.api("POST", SECRETS, secret("s1"))
    assert resp.status == 409
    assert resp.json()["reason"] == "AlreadyExists"
    assert resp.json()["message"] == 'secrets "s1" already exists'
    resp = cluster.api("POST", "/api/v1/namespaces/nope/secrets", secret("s1"))
    assert resp.status == 404 and resp.json()["message"] == 'namespaces "nope" not found'


def test_create_rules(cluster):
    resp = cluster.api("POST", SECRETS, {"metadata": {"name": "x", "resourceVersion": "5"}})
    assert (resp.status, resp.json()["message"]) == (
        500, "resourceVersion should not be set on objects to be created")
    resp = cluster.api("POST", SECRETS, {"metadata": {"name": "x", "namespace": "other"}})
    assert resp.status == 400 and "does not match the namespace" in resp.json()["message"]
    resp = cluster.api("POST", SECRETS, {"metadata": {}})
    assert resp.status == 422
    assert resp.json()["message"] == ('Secret "" is invalid: metadata.name: Required value: '
                                      'name or generateName is required')
    made = create(cluster, SECRETS, {"metadata": {"generateName": "gen-"}})
    assert made["metadata"]["name"].startswith("gen-") and len(made["metadata"]["name"]) == 9
    resp = cluster.api("POST", SECRETS, {"apiVersion": "v2", "metadata": {"name": "y"}})
    assert resp.json()["message"] == ("the API version in the data (v2) does not match the "
                                      "expected API version (v1)")


def test_secret_decoding_and_validation(cluster):
    resp = cluster.api("POST", SECRETS, {"metadata": {"name": "b"}, "data": {"k": "YWJ"}})
    assert resp.status == 400
    assert resp.json()["message"] == ('Secret in version "v1" cannot be handled as a Secret: '
                                      'illegal base64 data at input byte 0')
    resp = cluster.api("POST", SECRETS, {"metadata": {"name": "tls1"},
                                         "type": "kubernetes.io/tls",
                                         "data": {"tls.crt": ""}})
    assert resp.status == 422
    assert resp.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Secret "tls1" is invalid: data[tls.key]: Required value',
        "reason": "Invalid", "details": {"name": "tls1", "kind": "Secret", "causes": [
            {"reason": "FieldValueRequired", "message": "Required value",
             "field": "data[tls.key]"}]}, "code": 422}
    made = create(cluster, SECRETS, secret("s", a="b"))
    assert made["type"] == "Opaque" and made["data"] == {"a": "Yg=="}
    assert "stringData" not in made
    made["type"] = "kubernetes.io/tls"
    resp = cluster.api("PUT", SECRETS + "/s", made)
    assert resp.status == 422
    assert 'type: Invalid value: "kubernetes.io/tls": field is immutable' in \
        resp.json()["message"]


def test_field_validation_strict_and_warn(cluster):
    body = {"metadata": {"name": "s"}, "spec": {}, "typo": 1}
    resp = cluster.api("POST", SECRETS + "?fieldValidation=Strict", body)
    assert resp.status == 400
    assert resp.json()["message"] == ('Secret in version "v1" cannot be handled as a Secret: '
                                      'strict decoding error: unknown field "spec", unknown '
                                      'field "typo"')
    resp = cluster.api("POST", SECRETS, body)  # Warn is the server default
    assert resp.status == 201 and "spec" not in resp.json()
    assert resp.header("Warning") is not None and 'unknown field' in resp.header("Warning")
    resp = cluster.api("POST", SECRETS + "?fieldValidation=Bogus", body)
    assert resp.status == 422


def test_webhook_configuration_defaults_and_validation(cluster):
    made = create(cluster, VWCS, {"metadata": {"name": "vw"},
                                  "webhooks": [webhook("a.example.com", rules=[{
                                      "operations": ["CREATE"], "apiGroups": [""],
                                      "apiVersions": ["v1"], "resources": ["pods"]}])]})
    wh = made["webhooks"][0]
    assert (wh["failurePolicy"], wh["matchPolicy"], wh["timeoutSeconds"],
            wh["namespaceSelector"], wh["objectSelector"], wh["rules"][0]["scope"],
            wh["clientConfig"]["service"]["port"]) == \
        ("Fail", "Equivalent", 10, {}, {}, "*", 443)
    assert made["metadata"]["generation"] == 1
    bad = webhook("a.example.com")
    del bad["sideEffects"]
    resp = cluster.api("POST", VWCS, {"metadata": {"name": "bad"},
                                      "webhooks": [bad, webhook("a.example.com"),
                                                   webhook("two.parts")]})
    assert resp.status == 422
    assert resp.json()["message"] == (
        'ValidatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: ['
        'webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, '
        'webhooks[1].name: Duplicate value: "a.example.com", '
        'webhooks[2].name: Invalid value: "two.parts": should be a domain with at least '
        'three segments separated by dots]')
    resp = cluster.api("POST", VWCS, {"metadata": {"name": "b64"}, "webhooks": [
        webhook("a.example.com", clientConfig={"url": "https://x", "caBundle": "%%%"})]})
    assert resp.status == 400 and resp.json()["message"].endswith(
        "illegal base64 data at input byte 0")
    # An invalid PEM is accepted: only base64 is checked.
    create(cluster, VWCS, {"metadata": {"name": "pem"}, "webhooks": [
        webhook("a.example.com", clientConfig={"url": "https://x", "caBundle": "bm90IHBlbQ=="})]})



@pytest.mark.backends("emulator", "real")
def test_webhook_urls_are_judged_as_kube_apiserver_judges_them(cluster):
    """ValidateWebhookURL reads Go's url.URL: Host is the authority after the user
    information, so a port alone is a host, and a bare "#" or "?" leaves Fragment and RawQuery
    empty."""
    def status(url):
        return cluster.api("POST", f"{VWCS}?dryRun=All", {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "url"},
            "webhooks": [webhook("a.example.com", clientConfig={"url": url})]}).status

    stored = ["https://:8443/validate", "https://hook.example.com/validate#",
              "https://hook.example.com/validate?", "HTTPS://hook.example.com/validate",
              "https://hook.example.com:99999/validate", "https://[::1]:8443/validate"]
    refused = ["http://hook.example.com/validate", "https:///validate",
               "https://@hook.example.com/validate", "https://user:pw@hook.example.com/",
               "https://hook.example.com/validate#part", "https://hook.example.com/?a=b"]
    assert {url: status(url) for url in stored + refused} == \
        {**{url: 201 for url in stored}, **{url: 422 for url in refused}}

@pytest.mark.backends("emulator", "real")
def test_an_empty_ca_bundle_is_left_out_of_the_stored_object(cluster):
    """caBundle is a []byte with omitempty: written as "" (by a JSON patch, an apply or a
    create), it is not in the object read back; certctl's repair of a blanked bundle relies
    on reading it as absent."""
    made = create(cluster, VWCS, {"metadata": {"name": "blank"}, "webhooks": [
        webhook("a.example.com", clientConfig={"url": "https://x", "caBundle": ""})]})
    assert "caBundle" not in made["webhooks"][0]["clientConfig"], made
    create(cluster, VWCS, {"metadata": {"name": "filled"}, "webhooks": [
        webhook("a.example.com", clientConfig={"url": "https://x", "caBundle": "Zm9v"})]})
    resp = cluster.api("PATCH", f"{VWCS}/filled", [
        {"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ""}],
        content_type="application/json-patch+json")
    assert resp.status == 200, resp.body
    assert "caBundle" not in resp.json()["webhooks"][0]["clientConfig"], resp.json()
    got = cluster.api("GET", f"{VWCS}/filled").json()
    assert "caBundle" not in got["webhooks"][0]["clientConfig"], got


# --- update semantics ---------------------------------------------------------------------

def test_update_conflicts_and_resource_version_rules(cluster):
    vw = create(cluster, VWCS, {"metadata": {"name": "vw"},
                                "webhooks": [webhook("a.example.com")]})
    stale = json.loads(json.dumps(vw))
    vw["metadata"]["labels"] = {"x": "1"}
    assert cluster.api("PUT", VWCS + "/vw", vw).status == 200
    resp = cluster.api("PUT", VWCS + "/vw", stale)
    assert resp.status == 409
    assert resp.json()["message"] == (
        'Operation cannot be fulfilled on validatingwebhookconfigurations.'
        'admissionregistration.k8s.io "vw": the object has been modified; please apply your '
        'changes to the latest version and try again')
    del stale["metadata"]["resourceVersion"]
    resp = cluster.api("PUT", VWCS + "/vw", stale)
    assert resp.status == 422
    assert resp.json()["message"] == (
        'validatingwebhookconfigurations.admissionregistration.k8s.io "vw" is invalid: '
        'metadata.resourceVersion: Invalid value: 0x0: must be specified for an update')
    # Secrets allow unconditional updates; a missing Lease is created by PUT.
    create(cluster, SECRETS, secret("s"))
    assert cluster.api("PUT", SECRETS + "/s", secret("s", b="c")).status == 200
    lease = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a",
                                                 "leaseDurationSeconds": 15}}
    assert cluster.api("PUT", LEASES + "/l", lease).status == 201
    assert cluster.api("PUT", LEASES + "/l", lease).status == 422
    resp = cluster.api("PUT", LEASES + "/l", {"metadata": {"name": "l"}, "spec": {
        "renewTime": "2025-05-01T10:00:00.123Z"}})
    assert resp.status == 400 and 'cannot parse ".123Z" as ".000000"' in resp.json()["message"]


def test_no_op_writes_do_not_bump_the_revision(cluster):
    made = create(cluster, SECRETS, secret("s", a="b"))
    rev = cluster.resource_version()
    assert cluster.api("PUT", SECRETS + "/s", made).json()["metadata"]["resourceVersion"] == \
        made["metadata"]["resourceVersion"]
    resp = cluster.api("PATCH", SECRETS + "/s", {"data": {"a": "Yg=="}},
                       content_type="application/merge-patch+json")
    assert resp.json()["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    assert cluster.resource_version() == rev
    resp = cluster.api("PATCH", SECRETS + "/s", {"data": {"a": "Yw=="}},
                       content_type="application/merge-patch+json")
    assert int(resp.json()["metadata"]["resourceVersion"]) == rev + 1


def test_patch_content_types_and_options(cluster):
    create(cluster, SECRETS, secret("s", a="b"))
    resp = cluster.api("PATCH", SECRETS + "/s", {"data": {"x": "eA=="}},
                       content_type="application/json")
    assert resp.status == 415 and resp.json()["reason"] == "UnsupportedMediaType"
    resp = cluster.api("PATCH", SECRETS + "/s?force=true", {},
                       content_type="application/merge-patch+json")
    assert resp.status == 422 and "may not be specified for non-apply patch" in \
        resp.json()["message"]
    resp = cluster.api("PATCH", SECRETS + "/s", {"apiVersion": "v1", "kind": "Secret"},
                       content_type="application/apply-patch+yaml")
    assert resp.status == 422 and resp.json()["message"].endswith(
        "fieldManager: Required value: is required for apply patch")
    resp = cluster.api("PATCH", SECRETS + "/s", {"metadata": {"resourceVersion": "1"}},
                       content_type="application/merge-patch+json")
    assert resp.status == 409
    resp = cluster.api("PATCH", SECRETS + "/s", {"data": {"x": "!"}},
                       content_type="application/merge-patch+json")
    assert resp.status == 422 and "illegal base64 data at input byte 0" in \
        resp.json()["message"]
    assert cluster.api("PATCH", SECRETS + "/nope", {},
                       content_type="application/merge-patch+json").status == 404


def test_server_side_apply_ownership_and_conflicts(cluster):
    path = SECRETS + "/cfg?fieldManager={}"
    apply = "application/apply-patch+yaml"
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cfg"},
            "data": {"a": "YQ==", "b": "Yg=="}}
    resp = cluster.api("PATCH", path.format("one"), body, content_type=apply)
    assert resp.status == 201
    rv = resp.json()["metadata"]["resourceVersion"]
    resp = cluster.api("PATCH", path.format("one"), body, content_type=apply)
    assert (resp.status, resp.json()["metadata"]["resourceVersion"]) == (200, rv)
    clash = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cfg"},
             "data": {"a": "eA=="}}
    resp = cluster.api("PATCH", path.format("two"), clash, content_type=apply)
    assert resp.status == 409
    assert resp.json()["message"] == 'Apply failed with 1 conflict: conflict with "one": .data.a'
    assert resp.json()["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "one"',
         "field": ".data.a"}]
    resp = cluster.api("PATCH", path.format("two") + "&force=true", clash, content_type=apply)
    assert resp.status == 200 and resp.json()["data"]["a"] == "eA=="
    # "one" no longer applies b and nobody else owns it: it is removed.
    resp = cluster.api("PATCH", path.format("one"), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cfg"}, "data": {}},
        content_type=apply)
    assert resp.json()["data"] == {"a": "eA=="}
    managers = {(m["manager"], m["operation"]) for m in resp.json()["metadata"]["managedFields"]}
    assert ("two", "Apply") in managers


def test_dry_run_persists_nothing(cluster):
    rev = cluster.resource_version()
    made = create(cluster, SECRETS + "?dryRun=All", {"metadata": {"generateName": "d-"}})
    assert made["metadata"]["uid"] and "resourceVersion" not in made["metadata"]
    assert cluster.api("GET", SECRETS + "/" + made["metadata"]["name"]).status == 404
    resp = cluster.api("POST", SECRETS + "?dryRun=Yes", secret("x"))
    assert resp.status == 422
    assert resp.json()["message"] == ('CreateOptions.meta.k8s.io "" is invalid: dryRun: '
                                      'Unsupported value: []string{"Yes"}: supported values: '
                                      '"All"')
    assert cluster.resource_version() == rev


# --- delete -------------------------------------------------------------------------------

def test_delete_status_finalizers_and_preconditions(cluster):
    made = create(cluster, SECRETS, secret("s"))
    resp = cluster.api("DELETE", SECRETS + "/s", {"preconditions": {"uid": "other"}})
    assert resp.status == 409 and "Precondition failed: UID in precondition: other" in \
        resp.json()["message"]
    resp = cluster.api("DELETE", SECRETS + "/s", {"propagationPolicy": "Background"})
    assert resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Success", "details": {
                               "name": "s", "kind": "secrets", "uid": made["metadata"]["uid"]}}
    create(cluster, SECRETS, {"metadata": {"name": "f", "finalizers": ["example.com/x"]}})
    first = cluster.api("DELETE", SECRETS + "/f").json()
    assert first["kind"] == "Secret" and first["metadata"]["deletionTimestamp"]
    again = cluster.api("DELETE", SECRETS + "/f").json()
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    first["metadata"]["finalizers"].append("example.com/y")
    resp = cluster.api("PUT", SECRETS + "/f", first)
    assert resp.status == 422 and "no new finalizers can be added" in resp.json()["message"]
    first["metadata"]["finalizers"] = []
    assert cluster.api("PUT", SECRETS + "/f", first).status == 200
    assert cluster.api("GET", SECRETS + "/f").status == 404


def test_namespace_lifecycle(cluster):
    resp = cluster.api("DELETE", "/api/v1/namespaces/default")
    assert resp.status == 403
    assert resp.json()["message"] == ('namespaces "default" is forbidden: this namespace may '
                                      'not be deleted')
    ns = create(cluster, "/api/v1/namespaces", {"metadata": {"name": "team"}})
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"]["phase"] == "Active"
    create(cluster, "/api/v1/namespaces/team/secrets", secret("s"))
    create(cluster, "/api/v1/namespaces/team/secrets",
           {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    with cluster.watch("/api/v1/namespaces", timeoutSeconds=5,
                       resourceVersion=ns["metadata"]["resourceVersion"]) as w:
        deleting = cluster.api("DELETE", "/api/v1/namespaces/team").json()
        assert deleting["status"]["phase"] == "Terminating"
        resp = cluster.api("POST", "/api/v1/namespaces/team/secrets", secret("new"))
        assert resp.status == 403 and resp.json()["message"] == (
            'secrets "new" is forbidden: unable to create new content in namespace team '
            'because it is being terminated')
        # The held secret keeps the namespace until its finalizer goes.
        held = cluster.api("GET", "/api/v1/namespaces/team/secrets/held").json()
        deadline = time.monotonic() + 5
        while not held["metadata"].get("deletionTimestamp") and time.monotonic() < deadline:
            next(w)  # each namespace event is a step of the controller; re-read then
            held = cluster.api("GET", "/api/v1/namespaces/team/secrets/held").json()
        assert cluster.api("GET", "/api/v1/namespaces/team/secrets/s").status == 404
        assert cluster.api("PATCH", "/api/v1/namespaces/team/secrets/held",
                           {"metadata": {"finalizers": None}},
                           content_type="application/merge-patch+json").status == 200
        final = next(e for e in w if e["type"] == "DELETED")
        assert final["object"]["metadata"]["name"] == "team"


# --- list ---------------------------------------------------------------------------------

def test_list_selectors_and_pagination(cluster):
    for i in range(5):
        create(cluster, SECRETS, secret(f"s{i}", labels={"i": str(i), "even": str(i % 2 == 0)}))
    rev = cluster.resource_version()
    page = cluster.api("GET", SECRETS + "?limit=2").json()
    assert [i["metadata"]["name"] for i in page["items"]] == ["s0", "s1"]
    assert page["metadata"]["resourceVersion"] == str(rev)
    assert page["metadata"]["remainingItemCount"] == 3
    assert "kind" not in page["items"][0]
    create(cluster, SECRETS, secret("s9"))  # later writes do not leak into the snapshot
    names = []
    token = page["metadata"]["continue"]
    while token:
        nxt = cluster.api("GET", f"{SECRETS}?limit=2&continue={token}").json()
        assert nxt["metadata"]["resourceVersion"] == str(rev)
        names += [i["metadata"]["name"] for i in nxt["items"]]
        token = nxt["metadata"].get("continue")
    assert names == ["s2", "s3", "s4"]
    sel = cluster.api("GET", SECRETS + "?labelSelector=i+in+(1,2,3),even%3DTrue").json()
    assert [i["metadata"]["name"] for i in sel["items"]] == ["s2"]
    sel = cluster.api("GET", SECRETS + "?fieldSelector=metadata.name!%3Ds1,type%3DOpaque"
                                       "&labelSelector=i").json()
    assert len(sel["items"]) == 4
    assert cluster.api("GET", SECRETS + "?labelSelector=a+in").status == 400
    resp = cluster.api("GET", f"{SECRETS}?limit=2&continue={page['metadata']['continue']}"
                              f"&resourceVersion=3")
    assert resp.json()["message"] == ("specifying resource version is not allowed when using "
                                      "continue")
    cluster.compact()
    resp = cluster.api("GET", f"{SECRETS}?limit=2&continue={page['metadata']['continue']}")
    assert resp.status == 410 and resp.json()["reason"] == "Expired"
    assert resp.json()["message"].startswith("The provided continue parameter is too old")
    empty = cluster.api("GET", "/api/v1/namespaces/kube-public/secrets").json()
    assert empty["items"] == [] and empty["kind"] == "SecretList"


def test_resource_version_semantics(cluster):
    create(cluster, SECRETS, secret("a"))
    rev = cluster.resource_version()
    create(cluster, SECRETS, secret("b"))
    exact = cluster.api("GET", f"{SECRETS}?resourceVersion={rev}&resourceVersionMatch=Exact")
    assert [i["metadata"]["name"] for i in exact.json()["items"]] == ["a"]
    resp = cluster.api("GET", SECRETS + "?resourceVersionMatch=NotOlderThan")
    assert resp.status == 422
    started = time.monotonic()
    resp = cluster.api("GET", f"{SECRETS}/a?resourceVersion={rev + 100}")
    assert resp.status == 504 and time.monotonic() - started >= 2.5
    assert resp.json()["message"] == (f"Timeout: Too large resource version: {rev + 100}, "
                                      f"current: {rev + 1}")
    assert resp.json()["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    cluster.compact()
    resp = cluster.api("GET", f"{SECRETS}?resourceVersion={rev}&resourceVersionMatch=Exact")
    assert resp.status == 410


# --- watch --------------------------------------------------------------------------------

def test_watch_framing_replay_and_selector_transitions(cluster):
    base = cluster.resource_version()
    create(cluster, SECRETS, secret("a", labels={"app": "x"}))
    cluster.api("PATCH", SECRETS + "/a", {"metadata": {"labels": {"app": "y"}}},
                content_type="application/merge-patch+json")
    cluster.api("PATCH", SECRETS + "/a", {"metadata": {"labels": {"app": "x"}}},
                content_type="application/merge-patch+json")
    cluster.api("DELETE", SECRETS + "/a")
    with cluster.watch(SECRETS, resourceVersion=base, labelSelector="app=x",
                       timeoutSeconds=1) as w:
        assert w.response.getheader("Transfer-Encoding") == "chunked"
        events = list(w)
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED", "DELETED"]
    revs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert revs == [base + 1, base + 2, base + 3, base + 4]
    # Leaving the selection reports the previous content at the new revision.
    assert events[1]["object"]["metadata"]["labels"] == {"app": "x"}
    assert events[0]["object"]["kind"] == "Secret"


def test_watch_from_now_sees_live_events_and_bookmarks(cluster):
    create(cluster, SECRETS, secret("old"))
    with cluster.watch(SECRETS, timeoutSeconds=1, allowWatchBookmarks="True") as w:
        first = next(w)
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "old")
        create(cluster, SECRETS, secret("new"))
        second = next(w)
        assert (second["type"], second["object"]["metadata"]["name"]) == ("ADDED", "new")
        rest = list(w)
    assert rest == [{"type": "BOOKMARK", "object": {
        "kind": "Secret", "apiVersion": "v1",
        "metadata": {"resourceVersion": str(cluster.resource_version()),
                     "creationTimestamp": None}}}]


def test_periodic_bookmarks(fast_bookmarks_cluster):
    c = fast_bookmarks_cluster
    rev = c.resource_version()
    with c.watch(SECRETS, resourceVersion=rev, allowWatchBookmarks="true",
                 timeoutSeconds=1) as w:
        events = list(w)
    # Every 0.2 s, plus one just before the timeout.
    assert len(events) >= 4 and {e["type"] for e in events} == {"BOOKMARK"}
    with c.watch(SECRETS, resourceVersion=rev, timeoutSeconds=1) as w:
        assert list(w) == []  # no bookmarks unless asked for


def test_watch_too_old_after_compaction(cluster):
    made = create(cluster, SECRETS, secret("a"))
    create(cluster, SECRETS, secret("b"))
    compacted = cluster.compact()
    with cluster.watch(SECRETS, resourceVersion=made["metadata"]["resourceVersion"],
                       timeoutSeconds=5) as w:
        assert w.status == 200
        events = list(w)
    assert events == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {made['metadata']['resourceVersion']} "
                   f"({compacted})", "reason": "Expired", "code": 410}}]
    resp = cluster.api("GET", SECRETS + "?watch=1&sendInitialEvents=true")
    assert resp.status == 422


@pytest.mark.parametrize("abrupt", [False, True])
def test_drop_watches(cluster, abrupt):
    with cluster.watch(SECRETS, timeoutSeconds=30) as w:
        threading.Timer(0.3, cluster.drop_watches, kwargs={"abrupt": abrupt}).start()
        started = time.monotonic()
        assert list(w) == []
        assert time.monotonic() - started < 5


# --- faults, log, policy ------------------------------------------------------------------

def test_fault_injection(cluster):
    create(cluster, SECRETS, secret("s"))
    cluster.inject_fault(method="GET", path=r"/secrets/s$", status=429, retry_after=2)
    resp = cluster.api("GET", SECRETS + "/s")
    assert (resp.status, resp.body) == (429, b"Too many requests, please try again later.\n")
    assert resp.header("Retry-After") == "2"
    assert resp.header("Content-Type").startswith("text/plain")
    assert cluster.api("GET", SECRETS + "/s").status == 200  # count=1 consumed
    cluster.inject_fault(method="PUT", status=429, retry_after=1, format="status")
    resp = cluster.api("PUT", SECRETS + "/s", secret("s"))
    assert resp.json()["reason"] == "TooManyRequests"
    assert resp.json()["details"]["retryAfterSeconds"] == 1
    cluster.inject_fault(path="/secrets", status=503, count=2)
    assert [cluster.api("GET", SECRETS).status for _ in range(3)] == [503, 503, 200]
    cluster.inject_fault(method="PATCH", status=409)
    resp = cluster.api("PATCH", SECRETS + "/s", {}, content_type="application/merge-patch+json")
    assert resp.json()["message"].startswith('Operation cannot be fulfilled on secrets "s"')
    cluster.inject_fault(method="GET", latency=0.5)
    started = time.monotonic()
    assert cluster.api("GET", SECRETS + "/s").status == 200
    assert time.monotonic() - started >= 0.5
    cluster.inject_fault(watch=True, status=410)
    with cluster.watch(SECRETS, resourceVersion="1") as w:
        assert [e["object"]["code"] for e in w] == [410]
    cluster.inject_fault(status=500, count=5)
    cluster.clear_faults()
    assert cluster.api("GET", SECRETS).status == 200


def test_request_log(cluster):
    cluster.reset_request_log()
    create(cluster, SECRETS, secret("s"))
    cluster.api("GET", SECRETS + "/s")
    cluster.api("GET", SECRETS + "/nope")
    cluster.api("POST", SECRETS + "?dryRun=All", secret("d"))
    cluster.api("PATCH", LEASES + "/x", {}, content_type="application/merge-patch+json")
    with cluster.watch(SECRETS, timeoutSeconds=1) as w:
        list(w)
    log = cluster.request_log()
    reqs = [(e["verb"], e["resource"], e["name"], e["code"]) for e in log["requests"]]
    assert reqs == [("create", "secrets", "", 201), ("get", "secrets", "s", 200),
                    ("get", "secrets", "nope", 404), ("create", "secrets", "", 201),
                    ("patch", "leases", "x", 404), ("watch", "secrets", "", 200)]
    entry = log["requests"][1]
    assert (entry["user"], entry["method"], entry["namespace"], entry["apiGroup"],
            entry["path"]) == ("admin", "GET", "default", "", SECRETS + "/s")
    assert log["counts"] == {"create": {"secrets": 2}, "get": {"secrets": 2},
                             "patch": {"leases.coordination.k8s.io": 1},
                             "watch": {"secrets": 1}}
    assert [(w["verb"], w["dryRun"]) for w in log["writes"]] == [("create", False)]
    cluster.reset_request_log()
    assert cluster.request_log()["requests"] == []


def test_rbac_policy_from_admin_api(cluster):
    cluster.add_user("system:serviceaccount:ca:ctrl", [
        {"verbs": ["get", "list", "watch", "patch"], "apiGroups": [""],
         "resources": ["secrets"], "resourceNames": ["tls"], "namespaces": ["default"]},
        {"verbs": ["create"], "apiGroups": [""], "resources": ["secrets"],
         "namespaces": ["default"]},
        {"verbs": ["get"], "apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["validatingwebhookconfigurations"]}])
    user = "system:serviceaccount:ca:ctrl"
    assert cluster.api("POST", SECRETS, secret("tls"), user=user).status == 201
    assert cluster.api("GET", SECRETS + "/tls", user=user).status == 200
    # A list pinned to the allowed name by fieldSelector is authorized like a get of it.
    assert cluster.api("GET", SECRETS + "?fieldSelector=metadata.name%3Dtls",
                       user=user).status == 200
    resp = cluster.api("GET", SECRETS, user=user)
    assert resp.status == 403
    assert resp.json()["message"] == (
        'secrets is forbidden: User "system:serviceaccount:ca:ctrl" cannot list resource '
        '"secrets" in API group "" in the namespace "default"')
    resp = cluster.api("GET", "/api/v1/namespaces/kube-system/secrets/tls", user=user)
    assert resp.json()["message"] == (
        'secrets "tls" is forbidden: User "system:serviceaccount:ca:ctrl" cannot get resource '
        '"secrets" in API group "" in the namespace "kube-system"')
    assert resp.json()["details"] == {"name": "tls", "kind": "secrets"}
    resp = cluster.api("PATCH", VWCS + "/vw", {}, user=user,
                       content_type="application/merge-patch+json")
    assert resp.json()["message"] == (
        'validatingwebhookconfigurations.admissionregistration.k8s.io "vw" is forbidden: User '
        '"system:serviceaccount:ca:ctrl" cannot patch resource '
        '"validatingwebhookconfigurations" in API group "admissionregistration.k8s.io" at the '
        'cluster scope')
    assert cluster.api("GET", "/apis", user=user).status == 200  # discovery is public
    assert cluster.api("GET", "/_emulator/requests", user=user).status == 403


def test_policy_file_is_reread_on_change(tmp_path):
    from harness import Cluster
    policy = tmp_path / "policy.json"
    rules = {"verbs": ["list"], "apiGroups": [""], "resources": ["secrets"]}
    policy.write_text(json.dumps({"users": {"tok-1": {"name": "alice", "rules": [rules]}}}))
    with Cluster(policy_path=str(policy)) as c:
        assert c.api("GET", SECRETS, token="tok-1").status == 200
        assert c.api("GET", SECRETS, token="tok-2").status == 401
        policy.write_text(json.dumps({"users": {"tok-2": {"name": "bob", "rules": []},
                                                "tok-1": {"name": "alice", "rules": []}}}))
        assert c.api("GET", SECRETS, token="tok-1").status == 403
        assert c.api("GET", SECRETS, token="tok-2").status == 403


# --- other kinds --------------------------------------------------------------------------

def test_crd_lifecycle_and_ca_bundle_rules(cluster):
    crd = {"metadata": {"name": "widgets.example.com"}, "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object"}}}],
        "conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "ca", "name": "wh"}}}}}}
    with cluster.watch(CRDS, timeoutSeconds=5, resourceVersion=cluster.resource_version()) as w:
        made = create(cluster, CRDS, crd)
        assert made["spec"]["names"]["listKind"] == "WidgetList"
        assert made["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"] == 443
        assert made["status"]["storedVersions"] == ["v1"]
        events = [next(w), next(w)]
    established = events[1]["object"]
    assert {c["type"]: c["status"] for c in established["status"]["conditions"]} == \
        {"NamesAccepted": "True", "Established": "True"}
    established["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = "bm90IHBlbQ=="
    resp = cluster.api("PUT", CRDS + "/widgets.example.com", established)
    assert resp.status == 422
    assert ("spec.conversion.webhookClientConfig.caBundle: Invalid value: []byte{0x6e, 0x6f, "
            "0x74, 0x20, 0x70, 0x65, 0x6d}: unable to load root certificates: unable to parse "
            "bytes as PEM block") in resp.json()["message"]
    with open(cluster.ca_path, "rb") as f:
        import base64
        pem = base64.b64encode(f.read()).decode()
    resp = cluster.api("PATCH", CRDS + "/widgets.example.com", {"spec": {"conversion": {
        "webhook": {"clientConfig": {"caBundle": pem}}}}},
        content_type="application/merge-patch+json")
    assert resp.status == 200 and resp.json()["metadata"]["generation"] == 2
    deleting = cluster.api("DELETE", CRDS + "/widgets.example.com").json()
    assert deleting["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]


def test_events_are_served_by_both_api_groups(cluster):
    core = {"metadata": {"name": "vw.1"}, "involvedObject": {
        "kind": "ValidatingWebhookConfiguration", "name": "vw"}, "reason": "CABundleUpdated",
        "message": "injected", "source": {"component": "certctl"}, "type": "Normal",
        "count": 1, "firstTimestamp": "2025-05-01T10:00:00.5Z"}
    made = create(cluster, "/api/v1/namespaces/default/events", core)
    assert made["firstTimestamp"] == "2025-05-01T10:00:00Z"
    v1 = cluster.api("GET", "/apis/events.k8s.io/v1/namespaces/default/events/vw.1").json()
    assert (v1["apiVersion"], v1["note"], v1["regarding"]["name"], v1["deprecatedCount"]) == \
        ("events.k8s.io/v1", "injected", "vw", 1)
    bad = dict(core, metadata={"name": "vw.2"}, involvedObject={"name": "x", "namespace": "y"})
    resp = cluster.api("POST", "/api/v1/namespaces/default/events", bad)
    assert resp.status == 422 and "does not match event.namespace" in resp.json()["message"]
    sel = cluster.api("GET", "/api/v1/namespaces/default/events?fieldSelector="
                             "involvedObject.name%3Dvw,source%3Dcertctl").json()
    assert len(sel["items"]) == 1


def test_apiservice_validation(cluster):
    path = "/apis/apiregistration.k8s.io/v1/apiservices"
    good = {"metadata": {"name": "v1beta1.metrics.example.com"}, "spec": {
        "group": "metrics.example.com", "version": "v1beta1", "groupPriorityMinimum": 100,
        "versionPriority": 100, "service": {"namespace": "ca", "name": "m"},
        "caBundle": "bm90IHBlbQ=="}}
    made = create(cluster, path, good)
    assert made["spec"]["service"]["port"] == 443 and "generation" not in made["metadata"]
    bad = json.loads(json.dumps(good))
    bad["metadata"]["name"] = "wrong"
    bad["spec"]["insecureSkipTLSVerify"] = True
    resp = cluster.api("POST", path, bad)
    assert resp.status == 422
    assert resp.json()["message"] == (
        'APIService.apiregistration.k8s.io "wrong" is invalid: [metadata.name: Invalid value: '
        '"wrong": must be `spec.version+"."+spec.group`, spec.insecureSkipTLSVerify: Invalid '
        'value: true: may not be true if caBundle is present]')
