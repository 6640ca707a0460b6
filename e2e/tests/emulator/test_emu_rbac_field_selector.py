"""RBAC for a list or watch pinned to one object by a field selector, as kube-apiserver 1.32
authorizes it: its RequestInfo takes the name from fieldSelector=metadata.name=X (or ==X) of
a collection GET, so a rule with resourceNames [X] allows a list and a watch of exactly X and
nothing else. This is what lets `certctl run` watch the one Secret and the named webhook
configurations it keeps, under resourceNames (the chart's permission table relies on it).

Checked with raw requests, with kubectl (`get --field-selector`, `get -w`) and with the
official Python client; the 403 bodies are the real ones (the name from the selector
included, as apiserver's Forbidden names the request's name)."""

import json
import time

from kubernetes import client, config, watch

USER = "restricted"  # no colons: kubectl reads KUBECONFIG as a :-list
SECRETS = "/api/v1/namespaces/infra/secrets"
VWCS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
RULES = [
    {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["secrets"],
     "resourceNames": ["tls"], "namespaces": ["infra"]},
    {"verbs": ["list", "watch"], "apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["validatingwebhookconfigurations"], "resourceNames": ["hook"]},
]


def prepare(cluster):
    cluster.kubectl("create", "namespace", "infra")
    for name in ("tls", "other"):
        cluster.kubectl("create", "secret", "generic", name, "-n", "infra",
                        f"--from-literal=k={name}")
    for name in ("hook", "else"):
        cluster.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
            "webhooks": [{"name": f"{name}.example.com", "admissionReviewVersions": ["v1"],
                          "sideEffects": "None",
                          "clientConfig": {"service": {"namespace": "infra",
                                                       "name": "hook"}}}]}))
    cluster.add_user(USER, RULES)


def names(resp):
    assert resp.status == 200, resp.body
    return [item["metadata"]["name"] for item in resp.json()["items"]]


def forbidden(resp, message):
    assert resp.status == 403, resp.body
    body = resp.json()
    assert (body["reason"], body["message"]) == ("Forbidden", message)
    return body


def test_list_pinned_by_name_is_authorized_for_that_name(cluster):
    prepare(cluster)
    get = lambda query: cluster.api("GET", f"{SECRETS}?{query}", user=USER)  # noqa: E731
    assert names(get("fieldSelector=metadata.name%3Dtls")) == ["tls"]
    assert names(get("fieldSelector=metadata.name%3D%3Dtls")) == ["tls"]  # ==
    # Other terms do not matter for authorization, wherever the name term stands.
    assert names(get("fieldSelector=metadata.name%3Dtls,type%3DOpaque")) == ["tls"]
    assert names(get("fieldSelector=type%3DOpaque,metadata.name%3Dtls")) == ["tls"]
    assert names(get("fieldSelector=metadata.name%3Dtls&limit=1")) == ["tls"]
    # Cluster-scoped too.
    assert names(cluster.api("GET", f"{VWCS}?fieldSelector=metadata.name%3Dhook",
                             user=USER)) == ["hook"]

    body = forbidden(get("fieldSelector=metadata.name%3Dother"),
                     f'secrets "other" is forbidden: User "{USER}" cannot list resource '
                     f'"secrets" in API group "" in the namespace "infra"')
    assert body["details"] == {"name": "other", "kind": "secrets"}
    # Not pinned to one name: a list of every Secret, which resourceNames never allow.
    for query in ("", "fieldSelector=metadata.name!%3Dother", "labelSelector=a%3Db",
                  "fieldSelector=type%3DOpaque"):
        forbidden(get(query), f'secrets is forbidden: User "{USER}" cannot list resource '
                              f'"secrets" in API group "" in the namespace "infra"')
    forbidden(cluster.api("GET", f"{VWCS}?fieldSelector=metadata.name%3Delse", user=USER),
              f'validatingwebhookconfigurations.admissionregistration.k8s.io "else" is '
              f'forbidden: User "{USER}" cannot list resource '
              f'"validatingwebhookconfigurations" in API group '
              f'"admissionregistration.k8s.io" at the cluster scope')
    # Another namespace: the rule's namespace still applies.
    forbidden(cluster.api("GET", "/api/v1/namespaces/default/secrets?fieldSelector="
                                 "metadata.name%3Dtls", user=USER),
              f'secrets "tls" is forbidden: User "{USER}" cannot list resource "secrets" in '
              f'API group "" in the namespace "default"')


def test_watch_pinned_by_name_is_authorized_and_sees_only_that_object(cluster):
    prepare(cluster)
    rv = cluster.resource_version()
    with cluster.watch(SECRETS, user=USER, fieldSelector="metadata.name=tls",
                       resourceVersion=rv, timeoutSeconds=5) as stream:
        cluster.kubectl("label", "secret", "other", "-n", "infra", "x=1")
        cluster.kubectl("label", "secret", "tls", "-n", "infra", "x=1")
        event = next(iter(stream))
        assert (event["type"], event["object"]["metadata"]["name"]) == ("MODIFIED", "tls")
    resp = cluster.api("GET", f"{SECRETS}?watch=1&fieldSelector=metadata.name%3Dother",
                       user=USER)
    forbidden(resp, f'secrets "other" is forbidden: User "{USER}" cannot watch resource '
                    f'"secrets" in API group "" in the namespace "infra"')
    forbidden(cluster.api("GET", f"{SECRETS}?watch=1", user=USER),
              f'secrets is forbidden: User "{USER}" cannot watch resource "secrets" in API '
              f'group "" in the namespace "infra"')
    log = [e for e in cluster.request_log()["requests"] if e["user"] == USER]
    assert [(e["verb"], e["code"]) for e in log] == [("watch", 200), ("watch", 403),
                                                     ("watch", 403)]


def test_kubectl_lists_and_watches_by_field_selector_under_resource_names(cluster):
    prepare(cluster)
    out = cluster.kubectl("get", "secrets", "-n", "infra", "--field-selector",
                          "metadata.name=tls", "-o", "name", user=USER).stdout
    assert out.split() == ["secret/tls"]
    denied = cluster.kubectl("get", "secrets", "-n", "infra", "-o", "name", user=USER,
                             check=False)
    assert denied.returncode != 0
    assert 'cannot list resource "secrets"' in denied.stderr
    # kubectl get -w: a list, then a watch, both pinned to the name.
    proc = cluster.kubectl_background("get", "secrets", "-n", "infra", "--field-selector",
                                      "metadata.name=tls", "-w", "-o", "name", user=USER)
    try:
        first = proc.stdout.readline().strip()
        assert first == "secret/tls", first + proc.stderr.read()
        deadline = time.monotonic() + 10
        while not any(e["user"] == USER and e["verb"] == "watch"
                      for e in cluster.request_log()["requests"]):
            assert time.monotonic() < deadline, "kubectl never started its watch"
            time.sleep(0.05)
        cluster.kubectl("label", "secret", "tls", "-n", "infra", "y=1")
        assert proc.stdout.readline().strip() == "secret/tls"
    finally:
        proc.kill()
        proc.wait()
    codes = {(e["verb"], e["code"]) for e in cluster.request_log()["requests"]
             if e["user"] == USER and e["resource"] == "secrets"}
    assert ("watch", 200) in codes and ("list", 200) in codes


def test_python_client_lists_and_watches_by_field_selector(cluster):
    prepare(cluster)
    api = client.CoreV1Api(config.new_client_from_config(cluster.kubeconfig(USER)))
    listed = api.list_namespaced_secret("infra", field_selector="metadata.name=tls")
    assert [s.metadata.name for s in listed.items] == ["tls"]
    try:
        api.list_namespaced_secret("infra", field_selector="metadata.name=other")
        raise AssertionError("listed a Secret outside resourceNames")
    except client.ApiException as e:
        assert e.status == 403
    events = watch.Watch().stream(api.list_namespaced_secret, "infra",
                                  field_selector="metadata.name=tls",
                                  resource_version=listed.metadata.resource_version,
                                  timeout_seconds=2)
    cluster.kubectl("label", "secret", "tls", "-n", "infra", "z=1")
    first = next(events)
    assert (first["type"], first["object"].metadata.name) == ("MODIFIED", "tls")
