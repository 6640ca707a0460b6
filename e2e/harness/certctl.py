"""Helpers for end-to-end tests that drive the certctl binary against the emulator."""

import base64
import os
import subprocess

# Read-only verbs: what `certctl check` may send.
READ_VERBS = {"get", "list", "watch"}


def what_to_do(*codes):
    """The line check and audit print after their findings: each code's section of the
    troubleshooting page, in the order the codes first appear."""
    return "what to do: " + ", ".join(f"docs/troubleshooting.md#{code}" for code in codes)


def run_certctl(binary, *args, env=None, timeout=60, input=None):
    """Run certctl with `args`; `env` is added to a scrubbed copy of this environment."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
                         "POD_NAMESPACE", "CERTCTL_SERVICEACCOUNT_DIR")}
    base.update(env or {})
    return subprocess.run([binary, *args], capture_output=True, text=True, env=base,
                          timeout=timeout, input=input)


# The annotations with which every pair certctl issues records its issuer (docs/secret.md).
ISSUER_RECORD = ("certctl.io/issued-by", "certctl.io/issuer-started", "certctl.io/issued-with")


def split_issuer_record(annotations):
    """(the issuer record, every other annotation) of an object's annotations (None: none)."""
    annotations = annotations or {}
    return ({k: v for k, v in annotations.items() if k in ISSUER_RECORD},
            {k: v for k, v in annotations.items() if k not in ISSUER_RECORD})


def b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


def webhook_configuration(kind, name, webhooks, ca_bundle="", service="hook", namespace="infra",
                          labels=None):
    """A Validating/MutatingWebhookConfiguration with one entry per name in `webhooks`."""
    entries = []
    for i, webhook in enumerate(webhooks):
        client_config = {"service": {"namespace": namespace, "name": service,
                                     "path": f"/{i}", "port": 443}}
        if ca_bundle:
            client_config["caBundle"] = b64(ca_bundle)
        entries.append({
            "name": webhook, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": client_config,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"]}]})
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, "labels": labels or {}}, "webhooks": entries}


def crd(name, ca_bundle="", service="hook", namespace="infra"):
    """A CRD with a Webhook conversion strategy; name is <plural>.<group>."""
    plural, group = name.split(".", 1)
    client_config = {"service": {"namespace": namespace, "name": service, "path": "/convert"}}
    if ca_bundle:
        client_config["caBundle"] = b64(ca_bundle)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": plural[:-1],
                               "kind": plural[:-1].capitalize()},
                     "versions": [
                         {"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object",
                                                         "x-kubernetes-preserve-unknown-fields": True}}},
                         {"name": "v2", "served": True, "storage": False,
                          "schema": {"openAPIV3Schema": {"type": "object",
                                                         "x-kubernetes-preserve-unknown-fields": True}}}],
                     "conversion": {"strategy": "Webhook", "webhook": {
                         "clientConfig": client_config, "conversionReviewVersions": ["v1"]}}}}


def api_service(group, version="v1", ca_bundle="", service="hook", namespace="infra"):
    spec = {"group": group, "version": version, "groupPriorityMinimum": 1000,
            "versionPriority": 15, "service": {"namespace": namespace, "name": service,
                                                "port": 443}}
    if ca_bundle:
        spec["caBundle"] = b64(ca_bundle)
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"{version}.{group}"}, "spec": spec}


def service_with_endpoints(name="hook", namespace="infra", port=443, target_port=9443,
                           ready=(True,), port_name=""):
    """A Service and the EndpointSlice its controller would keep: one endpoint per entry
    of `ready` (its conditions.ready; None leaves the condition out, which means ready)."""
    svc_port = {"port": port, "targetPort": target_port}
    if port_name:
        svc_port["name"] = port_name
    endpoints = []
    for i, state in enumerate(ready):
        endpoint = {"addresses": [f"10.244.0.{10 + i}"]}
        if state is not None:
            endpoint["conditions"] = {"ready": state}
        endpoints.append(endpoint)
    return [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"ports": [svc_port], "selector": {"app": name}}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": f"{name}-abcde", "namespace": namespace,
                      "labels": {"kubernetes.io/service-name": name,
                                 "endpointslice.kubernetes.io/managed-by":
                                     "endpointslice-controller.k8s.io"}},
         "addressType": "IPv4", "endpoints": endpoints,
         "ports": [{"name": port_name, "port": target_port, "protocol": "TCP"}]},
    ]


def selectorless_service(name, namespace, address, port):
    """A Service without a selector and the EndpointSlice a test keeps for it: the API
    server's calls for its port 443 go to address:port (a server the test runs)."""
    return [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": f"{name}-1", "namespace": namespace,
                      "labels": {"kubernetes.io/service-name": name}},
         "addressType": "IPv4",
         "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
         "ports": [{"name": "https", "port": port, "protocol": "TCP"}]},
    ]


def assert_contains(live, wanted, path="$", empty_may_be_absent=True):
    """Every field of `wanted` (a manifest) has its value in `live`, which may hold more (the
    API server's defaults). Empty maps and lists may be absent unless told otherwise."""
    if isinstance(wanted, dict):
        assert isinstance(live, dict), (path, live)
        for key, value in wanted.items():
            if key not in live and empty_may_be_absent and value in ({}, []):
                continue
            assert key in live, f"{path}.{key} missing"
            assert_contains(live[key], value, f"{path}.{key}", empty_may_be_absent)
    elif isinstance(wanted, list):
        assert isinstance(live, list) and len(live) == len(wanted), (path, live)
        for i, (a, b) in enumerate(zip(live, wanted)):
            assert_contains(a, b, f"{path}[{i}]", empty_may_be_absent)
    else:
        assert live == wanted, (path, live, wanted)


def read_only(log, user):
    """True when every request `user` made was a read."""
    verbs = {entry["verb"] for entry in log["requests"] if entry.get("user") == user}
    return verbs <= READ_VERBS, verbs
