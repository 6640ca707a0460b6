"""Targets whose entries name nothing the API server can call: a webhook clientConfig with
both url and service or neither, a url that is not https or has user information, a
fragment, query parameters or no host, a service without name or namespace, ports 0 and
70000; a CRD's conversion webhook with an http url and an APIService whose spec.service has
no namespace. The API server refuses to store any of them (the first test shows the emulator
does too), so harness/hostile.py serves them, as only a corrupting proxy would.

docs/usage.md (check, job, run): such an entry is finding `target-invalid` on the target, its
message naming the field to fix. check reports it (exit 1) and writes nothing; job injects
the caBundle all the same (a JSON patch of caBundle fields only), then exits 1 with one line,
`certctl job: the CA bundle is injected, but the API server cannot call every target: ...`;
run stays up, not ready, with `not ready: callable: <object>: <message>` on /readyz.
"""

import base64
import copy
import json
import time

import pytest

from harness.certctl import (api_service, crd, run_certctl, service_with_endpoints,
                             webhook_configuration)
from harness.corpus import NS, SECRET_PATH, findings, one_line
from harness.hostile import (HostileServer, echo_created, json_reply, status_reply,
                             stream_reply)

VWC = "ValidatingWebhookConfiguration"
CRD = "CustomResourceDefinition"
APISERVICE = "APIService"
# kind -> (certctl's flag, collection, the kind as findings name it)
KINDS = {
    VWC: ("--validating-webhook",
          "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
          "validatingwebhookconfiguration"),
    CRD: ("--crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
          "customresourcedefinition"),
    APISERVICE: ("--apiservice", "/apis/apiregistration.k8s.io/v1/apiservices", "apiservice"),
}
SERVICE_PATH = f"/api/v1/namespaces/{NS}/services/hook"
SLICES_PATH = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
JOB_FAILED = ("certctl job: the CA bundle is injected, but the API server cannot call every "
              "target: ")
URL = "https://hook.example.com/validate"


# --- the cases ------------------------------------------------------------------------------

def first_entry(change):
    """Configuration hook: webhooks[0]'s clientConfig changed by `change`, webhooks[1] a
    healthy call of Service hook, so only the broken entry may be named."""
    def make(ca_pem):
        doc = webhook_configuration(VWC, "hook", ["a.hook.io", "b.hook.io"], ca_bundle=ca_pem,
                                    namespace=NS)
        change(doc["webhooks"][0]["clientConfig"])
        return doc
    return make


def url_instead(url):
    def change(config):
        config.pop("service")
        config["url"] = url
    return change


def with_url(config):
    config["url"] = URL


def without_service(config):
    config.pop("service")


def service_without(key):
    return lambda config: config["service"].pop(key)


def service_port(port):
    def change(config):
        config["service"]["port"] = port
    return change


def crd_conversion_url(url):
    def make(ca_pem):
        doc = crd("hooks.example.com", ca_bundle=ca_pem)
        config = doc["spec"]["conversion"]["webhook"]["clientConfig"]
        config.pop("service")
        config["url"] = url
        return doc
    return make


def apiservice_without(key):
    def make(ca_pem):
        doc = api_service("example.com", ca_bundle=ca_pem)
        doc["spec"]["service"].pop(key)
        return doc
    return make


# id -> (kind, make(ca_pem) -> target, the field the message starts with, texts it names)
CASES = {
    "both-url-and-service": (
        VWC, first_entry(with_url),
        "webhooks[0].clientConfig", ["both url and service"]),
    "neither-url-nor-service": (
        VWC, first_entry(without_service),
        "webhooks[0].clientConfig", ["neither url nor service"]),
    "url-not-https": (
        VWC, first_entry(url_instead("http://hook.example.com/validate")),
        "webhooks[0].clientConfig.url", ['"http://hook.example.com/validate"', "not https"]),
    "url-with-user-information": (
        VWC, first_entry(url_instead("https://admin:secret@hook.example.com/validate")),
        "webhooks[0].clientConfig.url", ["user information"]),
    "url-with-fragment": (
        VWC, first_entry(url_instead("https://hook.example.com/validate#v1")),
        "webhooks[0].clientConfig.url",
        ['"https://hook.example.com/validate#v1"', "fragment"]),
    "url-with-query": (
        VWC, first_entry(url_instead("https://hook.example.com/validate?dry=1")),
        "webhooks[0].clientConfig.url",
        ['"https://hook.example.com/validate?dry=1"', "query parameters"]),
    "url-without-host": (
        VWC, first_entry(url_instead("https:///validate")),
        "webhooks[0].clientConfig.url", ['"https:///validate"', "no host"]),
    "service-without-name": (
        VWC, first_entry(service_without("name")),
        "webhooks[0].clientConfig.service.name", ["is missing"]),
    "service-without-namespace": (
        VWC, first_entry(service_without("namespace")),
        "webhooks[0].clientConfig.service.namespace", ["is missing"]),
    "service-port-0": (
        VWC, first_entry(service_port(0)),
        "webhooks[0].clientConfig.service.port", ["port 0 is not a port (1-65535)"]),
    "service-port-70000": (
        VWC, first_entry(service_port(70000)),
        "webhooks[0].clientConfig.service.port", ["port 70000 is not a port (1-65535)"]),
    "crd-conversion-url-not-https": (
        CRD, crd_conversion_url("http://hook.example.com/convert"),
        "spec.conversion.webhook.clientConfig.url",
        ['"http://hook.example.com/convert"', "not https"]),
    "apiservice-service-without-namespace": (
        APISERVICE, apiservice_without("namespace"),
        "spec.service.namespace", ["is missing"]),
}


def target_of(case, ca_pem=""):
    """The case's target as a server returns it, holding `ca_pem` as caBundle (none when
    empty)."""
    doc = CASES[case][1](ca_pem)
    doc["metadata"].update(uid="0b7e8d0c-4f5e-4c55-8f4e-2d1c6b9a7e21", resourceVersion="77",
                           creationTimestamp="2025-01-01T00:00:00Z")
    return doc


def name_of(case):
    return CASES[case][1]("")["metadata"]["name"]


def object_of(case):
    """The target as findings name it: validatingwebhookconfiguration/hook."""
    return f"{KINDS[CASES[case][0]][2]}/{name_of(case)}"


def args_of(case):
    return [KINDS[CASES[case][0]][0], name_of(case)]


def path_of(case):
    return f"{KINDS[CASES[case][0]][1]}/{name_of(case)}"


def assert_names(text, case):
    """`text` names the case's field right after its object, and every text of the case."""
    _, _, field, named = CASES[case]
    assert f"{object_of(case)}: {field} " in text, f"{field!r} not named: {text}"
    for part in named:
        assert part in text, f"{part!r} not named: {text}"


# --- a target as the hostile server keeps it -------------------------------------------------

def pointer(doc, path):
    """(container, key) an RFC 6901 pointer names in doc."""
    *parents, leaf = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, int(leaf) if isinstance(node, list) else leaf


def json_patched(doc, ops):
    """doc with the RFC 6902 operations certctl may send (test, add, replace) applied."""
    out = copy.deepcopy(doc)
    for op in ops:
        node, key = pointer(out, op["path"])
        if op["op"] == "test":
            if node[key] != op["value"]:
                raise ValueError(f"test of {op['path']} failed")
        elif op["op"] == "add" and isinstance(node, list):
            node.insert(key, op["value"])
        elif op["op"] in ("add", "replace"):
            node[key] = op["value"]
        else:
            raise ValueError(f"operation {op['op']} at {op['path']}")
    return out


class Stored:
    """One target served as an API server keeps it: GET answers the object, a JSON patch
    changes it (a failed test operation is a 422, as on a real server)."""

    def __init__(self, obj):
        self.obj = obj
        self.original = copy.deepcopy(obj)

    def get(self, request):
        return json_reply(self.obj)

    def patch(self, request):
        if request.headers.get("content-type") != "application/json-patch+json":
            return status_reply(415, "UnsupportedMediaType",
                                f"unexpected {request.headers.get('content-type')}")
        try:
            patched = json_patched(self.obj, request.json())
        except (KeyError, IndexError, TypeError, ValueError) as e:
            return status_reply(422, "Invalid", f"the patch does not apply: {e}")
        patched["metadata"]["resourceVersion"] = str(int(self.obj["metadata"]
                                                         ["resourceVersion"]) + 1)
        self.obj = patched
        return json_reply(patched)

    def listing(self, request):
        kind = self.obj["kind"]
        return json_reply({"apiVersion": self.obj["apiVersion"], "kind": f"{kind}List",
                           "metadata": {"resourceVersion": self.obj["metadata"]
                                        ["resourceVersion"]},
                           "items": [self.obj]})


def with_bundles(obj, ca_b64):
    """obj with every caBundle slot holding ca_b64, the only change certctl may make."""
    out = copy.deepcopy(obj)
    if out["kind"] == APISERVICE:
        out["spec"]["caBundle"] = ca_b64
    elif out["kind"] == CRD:
        out["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = ca_b64
    else:
        for webhook in out["webhooks"]:
            webhook["clientConfig"]["caBundle"] = ca_b64
    return out


def bundle_paths(obj):
    if obj["kind"] == APISERVICE:
        return {"/spec/caBundle"}
    if obj["kind"] == CRD:
        return {"/spec/conversion/webhook/clientConfig/caBundle"}
    return {f"/webhooks/{i}/clientConfig/caBundle" for i in range(len(obj["webhooks"]))}


def without_version(obj):
    out = copy.deepcopy(obj)
    out["metadata"].pop("resourceVersion", None)
    return out


def served_secret(generated):
    secret = copy.deepcopy(generated)
    secret["metadata"].update(uid="6f1d3a52-8c0e-4c1b-9a51-2b6a1d7e0c11",
                              resourceVersion="1001", creationTimestamp="2025-01-01T00:00:00Z")
    return secret


def idle_watch():
    """A watch stream that sends nothing until the server stops."""
    while True:
        yield b""
        time.sleep(0.1)


def script(api, case, secret, stored, watches=False):
    """The Secret, the target and, for the entries that call it, Service hook with port 443
    and one ready endpoint (so that nothing but the broken entry is a finding); with
    `watches`, the lists and idle watches `certctl run` opens, and Events accepted."""
    path = path_of(case)
    api.route("GET", SECRET_PATH, json_reply(secret))
    api.route("GET", path, stored.get)
    api.route("PATCH", path, stored.patch)
    service, endpoints = service_with_endpoints()
    api.route("GET", SERVICE_PATH, json_reply(service))
    api.route("GET", SLICES_PATH, json_reply({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSliceList",
        "metadata": {"resourceVersion": "5"}, "items": [endpoints]}),
        query={"labelSelector": "kubernetes.io/service-name=hook"})
    if watches:
        secrets, collection = SECRET_PATH.rsplit("/", 1)[0], path.rsplit("/", 1)[0]
        for watched in (secrets, collection):
            api.route("GET", watched, stream_reply(idle_watch), query={"watch": "1|true"})
        api.route("GET", secrets, json_reply({
            "apiVersion": "v1", "kind": "SecretList",
            "metadata": {"resourceVersion": secret["metadata"]["resourceVersion"]},
            "items": [secret]}))
        api.route("GET", collection, stored.listing)
        api.route("POST", f"/api/v1/namespaces/{NS}/events", echo_created())


def writes(api):
    return [(r.method, r.path) for r in api.requests() if r.method in WRITES]


def ca_pem_of(secret):
    return base64.b64decode(secret["data"]["ca.crt"]).decode()


# --- why the hostile server ------------------------------------------------------------------

# The API server names the CRD's field as its internal type has it (webhook.* flattened).
API_FIELDS = {"crd-conversion-url-not-https": "spec.conversion.webhookClientConfig.url"}


def test_the_api_server_refuses_every_case(stage):
    """Like kube-apiserver, the emulator validates clientConfig and the APIService's service
    on create, and the case's field is all it refuses: none of these targets can be stored,
    so only a hostile server can send one."""
    for case in CASES:
        kind, make, field, _ = CASES[case]
        resp = stage.cluster.api("POST", KINDS[kind][1], make(""))
        assert resp.status == 422, (case, resp)
        assert resp.json()["reason"] == "Invalid", (case, resp.json())
        causes = [cause["field"] for cause in resp.json()["details"]["causes"]]
        assert causes == [API_FIELDS.get(case, field)], (case, resp.json()["message"])
        assert stage.get(path_of(case)) is None, case


# --- check, job, run -------------------------------------------------------------------------

@pytest.mark.parametrize("case", list(CASES))
def test_check_names_the_field(generated, certctl_binary, case):
    """The target already holds the CA and Service hook is healthy: the broken entry is the
    only finding."""
    secret = served_secret(generated)
    stored = Stored(target_of(case, ca_pem_of(secret)))
    with HostileServer() as api:
        script(api, case, secret, stored)
        result = run_certctl(certctl_binary, "check", "--service", "hook", "-n", NS,
                             *args_of(case), "--request-timeout", "5s",
                             env={"KUBECONFIG": api.kubeconfig()})
        assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
        assert result.stderr == ""
        found = findings(result.stdout)
        assert [(obj, code) for obj, code, _ in found] == [(object_of(case), "target-invalid")], \
            result.stdout
        _, _, field, _ = CASES[case]
        assert found[0][2].startswith(f"{field} "), found[0][2]
        assert_names(result.stdout, case)
        assert writes(api) == []
        assert api.errors == []
    assert stored.obj == stored.original


@pytest.mark.parametrize("case", list(CASES))
def test_job_injects_then_names_the_field(generated, certctl_binary, case):
    """The target has no caBundle yet: job writes it (the bundle in the broken entry does no
    harm), touches nothing else, then fails the install naming the field."""
    secret = served_secret(generated)
    stored = Stored(target_of(case))
    with HostileServer() as api:
        script(api, case, secret, stored)
        # --log-level warn: the injection's info lines aside, stderr holds only the verdict.
        result = run_certctl(certctl_binary, "job", "--service", "hook", "-n", NS,
                             *args_of(case), "--request-timeout", "5s",
                             "--wait-for-targets", "5s", "--log-level", "warn",
                             env={"KUBECONFIG": api.kubeconfig()})
        assert result.returncode == 1, (result.returncode, result.stderr)
        line = one_line(result, "job")
        assert line.startswith(JOB_FAILED), line
        assert_names(line, case)
        path = path_of(case)
        assert writes(api) == [("PATCH", path)]
        assert api.errors == []
        patch = api.requests("PATCH")[0]
        assert patch.headers["content-type"] == "application/json-patch+json", patch.headers
        assert patch.status == 200, patch
        ops = patch.json()
        assert {op["op"] for op in ops} <= {"test", "add", "replace"}, ops
        assert {op["path"] for op in ops if op["op"] != "test"} == \
            bundle_paths(stored.original), json.dumps(ops)
        ca = secret["data"]["ca.crt"]
        assert all(op["value"] == ca for op in ops if op["op"] != "test"), json.dumps(ops)
    assert without_version(stored.obj) == without_version(with_bundles(stored.original, ca))


@pytest.mark.parametrize("case", ["both-url-and-service", "url-with-query",
                                  "service-port-70000", "crd-conversion-url-not-https",
                                  "apiservice-service-without-namespace"])
def test_run_is_not_ready_naming_the_field(stage, generated, case):
    """run reads the same entries on every pass: it stays up, alive and not ready, and
    writes no object (Events aside) since the target already holds the CA."""
    secret = served_secret(generated)
    stored = Stored(target_of(case, ca_pem_of(secret)))
    with HostileServer() as api:
        script(api, case, secret, stored, watches=True)
        with stage.run_process(*args_of(case), "--request-timeout", "5s",
                               env={"KUBECONFIG": api.kubeconfig()}) as run:
            status, body = run.verdict()
            assert status == 503, (status, body, run.log())
            assert body.startswith(f"not ready: callable: {object_of(case)}: "), body
            assert body.count("\n") == 1, body
            assert_names(body, case)
            assert run.get("/healthz") == (200, "ok\n")
            code, took = run.stop()
        assert code == 0 and took < 5, (code, took, run.log())
        assert [w for w in writes(api) if not w[1].endswith("/events")] == []
        assert api.errors == []
    assert stored.obj == stored.original
