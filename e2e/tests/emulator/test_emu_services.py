"""Services and EndpointSlices as kubectl 1.32 and python-kubernetes see them."""

import ipaddress
import json

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from harness.kubectl_io import get_json, read_line

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: hook
  namespace: default
  labels: {app: hook}
spec:
  selector: {app: hook, tier: webhook}
  ports:
  - {name: https, port: 443, targetPort: 9443}
  - {name: metrics, port: 8080}
"""
SLICE = """\
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}
  namespace: default
  labels:
    kubernetes.io/service-name: {service}
    endpointslice.kubernetes.io/managed-by: e2e.example.com
addressType: IPv4
endpoints:
- addresses: [10.244.0.5]
  conditions: {{ready: true, serving: true, terminating: false}}
- addresses: [10.244.0.6]
  conditions: {{ready: false}}
ports:
- {{name: https, port: 9443, protocol: TCP}}
"""
# Leaves out what the server fills in: an endpoint's conditions, a port's name.
BARE_SLICE = {
    "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "bare"},
    "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.244.0.7"]},
                  {"addresses": ["10.244.0.8"], "conditions": {"ready": None, "serving": True}}],
    "ports": [{"port": 8080, "protocol": "UDP"}]}
SERVICES = "/api/v1/namespaces/default/services"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
PORT_RANGE = "must be between 1 and 65535, inclusive"


def bad_port_service(port):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad"},
            "spec": {"ports": [{"port": port}]}}


def causes(body):
    return [(c["field"], c["reason"], c["message"]) for c in body["details"]["causes"]]


@pytest.fixture
def api(cluster):
    with config.new_client_from_config(cluster.kubeconfig("admin")) as c:
        yield c


# --- kubectl ------------------------------------------------------------------------------

def test_api_resources_and_short_name(cluster):
    out = cluster.kubectl("api-resources", "--no-headers").stdout
    rows = {tuple(line.split()) for line in out.splitlines()}
    assert ("services", "svc", "v1", "true", "Service") in rows
    assert ("endpointslices", "discovery.k8s.io/v1", "true", "EndpointSlice") in rows
    core = cluster.api("GET", "/api/v1").json()["resources"]
    svc = next(r for r in core if r["name"] == "services")
    assert svc["shortNames"] == ["svc"] and svc["categories"] == ["all"]
    assert "services/status" in {r["name"] for r in core}
    slices = cluster.api("GET", "/apis/discovery.k8s.io/v1").json()["resources"]
    assert [r["name"] for r in slices] == ["endpointslices"]
    assert "shortNames" not in slices[0] and slices[0]["namespaced"] is True
    cluster.kubectl("apply", "-f", "-", input=SERVICE)
    cluster.kubectl("apply", "-f", "-", input=SLICE.format(name="hook-a", service="hook"))
    assert cluster.kubectl("get", "svc", "-o", "name").stdout.split() == ["service/hook"]
    assert cluster.kubectl("get", "endpointslices", "-o", "name").stdout.split() == \
        ["endpointslice.discovery.k8s.io/hook-a"]
    listing = cluster.kubectl("get", "svc,endpointslices", "-A").stdout
    assert "service/hook" in listing and "endpointslice.discovery.k8s.io/hook-a" in listing


def test_apply_service_defaults_and_unchanged(cluster):
    out = cluster.kubectl("apply", "-f", "-", input=SERVICE).stdout
    assert out.strip() == "service/hook created"
    svc = get_json(cluster, "svc", "hook")
    spec = svc["spec"]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["ports"] == [
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 9443},
        {"name": "metrics", "port": 8080, "protocol": "TCP", "targetPort": 8080}]
    assert spec["selector"] == {"app": "hook", "tier": "webhook"}
    assert ipaddress.ip_address(spec["clusterIP"]) in SERVICE_CIDR
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"], spec["internalTrafficPolicy"]) == \
        (["IPv4"], "SingleStack", "Cluster")
    assert "externalTrafficPolicy" not in spec and "generation" not in svc["metadata"]
    assert svc["status"] == {"loadBalancer": {}}
    cluster.reset_request_log()
    out = cluster.kubectl("apply", "-f", "-", input=SERVICE).stdout
    assert out.strip() == "service/hook unchanged"
    assert cluster.writes() == []
    other = get_json(cluster, "svc", "hook")
    assert other["metadata"]["resourceVersion"] == svc["metadata"]["resourceVersion"]
    second = SERVICE.replace("name: hook\n", "name: hook2\n")
    cluster.kubectl("apply", "-f", "-", input=second)
    assert get_json(cluster, "svc", "hook2")["spec"]["clusterIP"] != spec["clusterIP"]
    by_ip = cluster.kubectl("get", "svc", "--field-selector", f"spec.clusterIP={spec['clusterIP']}",
                            "-o", "name").stdout.split()
    assert by_ip == ["service/hook"]


def test_service_types(cluster):
    manifests = {
        "headless": {"clusterIP": "None", "selector": {"app": "x"}, "ports": [{"port": 80}]},
        "nodeport": {"type": "NodePort", "ports": [{"port": 53, "protocol": "UDP", "name": "u"},
                                                   {"port": 53, "name": "t"}]},
        "lb": {"type": "LoadBalancer", "ports": [{"port": 443}]},
        "external": {"type": "ExternalName", "externalName": "db.example.com"}}
    for name, spec in manifests.items():
        cluster.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}))
    headless = get_json(cluster, "svc", "headless")["spec"]
    assert (headless["clusterIP"], headless["clusterIPs"]) == ("None", ["None"])
    assert (headless["ipFamilies"], headless["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    nodeport = get_json(cluster, "svc", "nodeport")["spec"]
    node_ports = {p["nodePort"] for p in nodeport["ports"]}
    assert len(node_ports) == 1 and 30000 <= node_ports.pop() <= 32767  # one per port number
    assert nodeport["externalTrafficPolicy"] == "Cluster"
    lb = get_json(cluster, "svc", "lb")["spec"]
    assert lb["allocateLoadBalancerNodePorts"] is True and lb["ports"][0]["nodePort"]
    external = get_json(cluster, "svc", "external")["spec"]
    assert external == {"type": "ExternalName", "externalName": "db.example.com",
                        "sessionAffinity": "None"}
    missing = cluster.kubectl("apply", "-f", "-", check=False, input=json.dumps(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "cname"},
         "spec": {"type": "ExternalName"}}))
    assert missing.stderr.strip() == \
        'The Service "cname" is invalid: spec.externalName: Required value'


def test_kubectl_create_service_sends_protobuf(cluster):
    cluster.kubectl("create", "service", "clusterip", "made", "--tcp=443:9443", "--tcp=80:http")
    cluster.kubectl("create", "service", "nodeport", "np", "--tcp=80:8080", "--node-port=30080")
    cluster.kubectl("create", "service", "externalname", "ext", "--external-name=x.example.com")
    made = get_json(cluster, "svc", "made")["spec"]
    assert made["selector"] == {"app": "made"} and made["clusterIP"] != "None"
    assert made["ports"] == [
        {"name": "443-9443", "port": 443, "protocol": "TCP", "targetPort": 9443},
        {"name": "80-http", "port": 80, "protocol": "TCP", "targetPort": "http"}]
    assert [p["nodePort"] for p in get_json(cluster, "svc", "np")["spec"]["ports"]] == [30080]
    assert get_json(cluster, "svc", "ext")["spec"]["externalName"] == "x.example.com"
    taken = cluster.kubectl("create", "service", "nodeport", "np2", "--tcp=81",
                            "--node-port=30080", check=False)
    assert taken.stderr.strip() == (
        'error: failed to create NodePort service: Service "np2" is invalid: '
        'spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated')


@pytest.mark.parametrize("port", [0, 70000])
def test_invalid_port_is_422_with_the_field(cluster, port):
    out = cluster.kubectl("apply", "-f", "-", check=False,
                          input=json.dumps(bad_port_service(port)))
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        'The Service "bad" is invalid: ',
        f"* spec.ports[0].port: Invalid value: {port}: {PORT_RANGE}",
        f"* spec.ports[0].targetPort: Invalid value: {port}: {PORT_RANGE}"]
    resp = cluster.api("POST", SERVICES, bad_port_service(port))
    assert resp.status == 422
    body = resp.json()
    assert (body["reason"], body["details"]["kind"], body["details"]["name"]) == \
        ("Invalid", "Service", "bad")
    assert causes(body)[0] == ("spec.ports[0].port", "FieldValueInvalid",
                               f"Invalid value: {port}: {PORT_RANGE}")
    assert cluster.api("GET", f"{SERVICES}/bad").status == 404


def test_port_names_and_protocols(cluster):
    two = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "two"},
           "spec": {"ports": [{"port": 80, "name": "web"}, {"port": 81}]}}
    assert causes(cluster.api("POST", SERVICES, two).json()) == [
        ("spec.ports[1].name", "FieldValueRequired", "Required value")]
    two["spec"]["ports"][1]["name"] = "web"
    assert causes(cluster.api("POST", SERVICES, two).json()) == [
        ("spec.ports[1].name", "FieldValueDuplicate", 'Duplicate value: "web"')]
    two["spec"]["ports"] = [{"port": 80, "protocol": "HTTP"}]
    assert causes(cluster.api("POST", SERVICES, two).json()) == [
        ("spec.ports[0].protocol", "FieldValueNotSupported",
         'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"')]
    two["spec"]["ports"] = [{"port": 80, "targetPort": "https"}]
    assert cluster.api("POST", SERVICES, two).status == 201


def test_cluster_ip_is_immutable(cluster, tmp_path):
    cluster.kubectl("apply", "-f", "-", input=SERVICE)
    ip = get_json(cluster, "svc", "hook")["spec"]["clusterIP"]
    other = "10.96.7.7" if ip != "10.96.7.7" else "10.96.7.8"
    out = cluster.kubectl("patch", "svc", "hook", "-p",
                          json.dumps({"spec": {"clusterIP": other}}), check=False)
    assert out.stderr.strip() == (f'The Service "hook" is invalid: spec.clusterIPs[0]: Invalid '
                                  f'value: []string{{"{other}"}}: may not change once set')
    # A manifest without the allocated address keeps it (kubectl replace is a PUT).
    manifest = tmp_path / "svc.yaml"
    manifest.write_text(SERVICE.replace("{app: hook}\n", "{app: hook, v: '2'}\n", 1))
    cluster.kubectl("replace", "-f", str(manifest))
    svc = get_json(cluster, "svc", "hook")
    assert svc["spec"]["clusterIP"] == ip and svc["metadata"]["labels"]["v"] == "2"
    taken = cluster.api("POST", SERVICES, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "copy"},
        "spec": {"clusterIP": ip, "ports": [{"port": 1}]}})
    assert taken.status == 422
    assert causes(taken.json()) == [("spec.clusterIPs", "FieldValueInvalid",
                                     f'Invalid value: []string{{"{ip}"}}: failed to allocate IP '
                                     f'{ip}: provided IP is already allocated')]


def test_describe_service_shows_its_endpoint_slices(cluster):
    cluster.kubectl("apply", "-f", "-", input=SERVICE)
    cluster.kubectl("apply", "-f", "-", input=SLICE.format(name="hook-a", service="hook"))
    ip = get_json(cluster, "svc", "hook")["spec"]["clusterIP"]
    lines = [" ".join(line.split()) for line in
             cluster.kubectl("describe", "svc", "hook").stdout.splitlines()]
    assert "Type: ClusterIP" in lines and f"IP: {ip}" in lines
    assert "Selector: app=hook,tier=webhook" in lines
    assert "TargetPort: 9443/TCP" in lines
    assert any(line.startswith("Endpoints: 10.244.0.5:9443") for line in lines)


def test_endpoint_slices_apply_defaults_and_service_label(cluster):
    out = cluster.kubectl("apply", "-f", "-", input=SLICE.format(name="hook-a", service="hook"))
    assert out.stdout.strip() == "endpointslice.discovery.k8s.io/hook-a created"
    out = cluster.kubectl("apply", "-f", "-", input=SLICE.format(name="hook-a", service="hook"))
    assert out.stdout.strip() == "endpointslice.discovery.k8s.io/hook-a unchanged"
    for name, service in (("hook-b", "hook"), ("other-a", "other")):
        cluster.kubectl("apply", "-f", "-", input=SLICE.format(name=name, service=service))
    got = get_json(cluster, "endpointslice", "hook-a")
    assert got["addressType"] == "IPv4" and got["metadata"]["generation"] == 1
    assert got["metadata"]["labels"] == {"kubernetes.io/service-name": "hook",
                                         "endpointslice.kubernetes.io/managed-by":
                                             "e2e.example.com"}
    assert got["endpoints"] == [
        {"addresses": ["10.244.0.5"],
         "conditions": {"ready": True, "serving": True, "terminating": False}},
        {"addresses": ["10.244.0.6"], "conditions": {"ready": False}}]
    selected = cluster.kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=hook",
                               "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
    assert selected == ["hook-a", "hook-b"]
    cluster.kubectl("apply", "-f", "-", input=json.dumps(BARE_SLICE))
    bare = get_json(cluster, "endpointslice", "bare")
    assert bare["endpoints"] == [
        {"addresses": ["10.244.0.7"], "conditions": {}},
        {"addresses": ["10.244.0.8"], "conditions": {"serving": True}}]
    assert bare["ports"] == [{"name": "", "port": 8080, "protocol": "UDP"}]
    # The server's additions sit inside atomic lists, so kubectl sends them back; nothing
    # changes on the server.
    rv = bare["metadata"]["resourceVersion"]
    out = cluster.kubectl("apply", "-f", "-", input=json.dumps(BARE_SLICE))
    assert out.stdout.strip() == "endpointslice.discovery.k8s.io/bare configured"
    assert get_json(cluster, "endpointslice", "bare")["metadata"]["resourceVersion"] == rv
    # Both lists lack omitempty: none is served as null.
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "empty"}, "addressType": "FQDN", "ports": []}))
    empty = cluster.api("GET", f"{SLICES}/empty").json()
    assert empty["endpoints"] is None and empty["ports"] is None


def test_endpoint_slice_validation(cluster):
    def create(**fields):
        return cluster.api("POST", SLICES, {"apiVersion": "discovery.k8s.io/v1",
                                            "kind": "EndpointSlice",
                                            "metadata": {"name": "bad"}, **fields})

    assert causes(create(endpoints=[{"addresses": ["10.0.0.1"]}]).json()) == [
        ("addressType", "FieldValueRequired", "Required value")]
    assert causes(create(addressType="IP").json()) == [
        ("addressType", "FieldValueNotSupported",
         'Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"')]
    resp = create(addressType="IPv4", endpoints=[{"addresses": []},
                                                 {"addresses": ["127.0.0.1", "fd00::1"]}],
                  ports=[{"name": "a"}, {"name": "a", "protocol": "HTTP"}])
    assert resp.status == 422
    assert causes(resp.json()) == [
        ("endpoints[0].addresses", "FieldValueRequired",
         "Required value: must contain at least 1 address"),
        ("endpoints[1].addresses[0]", "FieldValueInvalid",
         'Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)'),
        ("endpoints[1].addresses[1]", "FieldValueInvalid",
         'Invalid value: "fd00::1": must be a valid IPv4 address'),
        ("ports[1].name", "FieldValueDuplicate", 'Duplicate value: "a"'),
        ("ports[1].protocol", "FieldValueNotSupported",
         'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"')]
    too_many = create(addressType="IPv4",
                     endpoints=[{"addresses": [f"10.0.0.{i}" for i in range(1, 102)]}])
    assert causes(too_many.json()) == [("endpoints[0].addresses", "FieldValueTooMany",
                                       "Too many: 101: must have at most 100 items")]
    cluster.kubectl("apply", "-f", "-", input=SLICE.format(name="hook-a", service="hook"))
    out = cluster.kubectl("patch", "endpointslice", "hook-a", "--type", "merge",
                          "-p", '{"addressType":"IPv6"}', check=False)
    assert 'addressType: Invalid value: "IPv6": field is immutable' in out.stderr


def test_watch_patch_and_delete_with_kubectl(cluster):
    cluster.kubectl("apply", "-f", "-", input=SERVICE)
    cluster.kubectl("apply", "-f", "-", input=SLICE.format(name="hook-a", service="hook"))
    proc = cluster.kubectl_background(
        "get", "svc", "hook", "-w", "-o", "jsonpath={.spec.ports[*].targetPort}{\"\\n\"}")
    try:
        assert read_line(proc) == "9443 8080"
        # A strategic merge patch merges ports by their port number.
        cluster.kubectl("patch", "svc", "hook", "-p",
                        '{"spec":{"ports":[{"port":443,"targetPort":8443}]}}')
        assert read_line(proc) == "8443 8080"
        cluster.kubectl("delete", "svc", "hook")
        assert read_line(proc) == "8443 8080"  # the DELETED event
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    generation = get_json(cluster, "endpointslice", "hook-a")["metadata"]["generation"]
    cluster.kubectl("patch", "endpointslice", "hook-a", "--type", "json", "-p",
                    '[{"op":"replace","path":"/endpoints/1/conditions",'
                    '"value":{"ready":true,"serving":true}}]')
    cluster.kubectl("label", "endpointslice", "hook-a", "extra=1")
    patched = get_json(cluster, "endpointslice", "hook-a")
    assert patched["endpoints"][1]["conditions"] == {"ready": True, "serving": True}
    assert patched["metadata"]["generation"] == generation + 2
    out = cluster.kubectl("delete", "endpointslice", "hook-a").stdout
    assert out.strip() == 'endpointslice.discovery.k8s.io "hook-a" deleted from default namespace'
    gone = cluster.kubectl("get", "endpointslice", "hook-a", check=False)
    assert 'endpointslices.discovery.k8s.io "hook-a" not found' in gone.stderr
    gone = cluster.kubectl("get", "svc", "hook", check=False)
    assert 'services "hook" not found' in gone.stderr


# --- python-kubernetes --------------------------------------------------------------------

def test_python_client_services(api):
    v1 = client.CoreV1Api(api)
    made = v1.create_namespaced_service("default", {
        "metadata": {"name": "hook", "labels": {"app": "hook"}},
        "spec": {"selector": {"app": "hook"}, "ports": [{"port": 443, "targetPort": 9443}]}})
    assert made.spec.type == "ClusterIP" and made.spec.ports[0].protocol == "TCP"
    assert made.spec.ports[0].target_port == 9443
    assert ipaddress.ip_address(made.spec.cluster_ip) in SERVICE_CIDR
    listed = v1.list_namespaced_service("default", label_selector="app=hook")
    assert [s.metadata.name for s in listed.items] == ["hook"]
    rv = listed.metadata.resource_version
    patched = v1.patch_namespaced_service("hook", "default", {
        "spec": {"ports": [{"port": 443, "name": "https"}]}})
    assert [(p.name, p.port, p.target_port) for p in patched.spec.ports] == \
        [("https", 443, 9443)]
    with pytest.raises(ApiException) as e:
        v1.patch_namespaced_service("hook", "default", {"spec": {"ports": [
            {"port": 443, "$patch": "delete"}, {"port": 70000}]}})
    assert e.value.status == 422
    assert ("spec.ports[0].port", "FieldValueInvalid", f"Invalid value: 70000: {PORT_RANGE}") \
        in causes(json.loads(e.value.body))
    v1.delete_namespaced_service("hook", "default")
    seen = [(ev["type"], ev["object"].metadata.name) for ev in watch.Watch().stream(
        v1.list_namespaced_service, "default", resource_version=rv, timeout_seconds=1)]
    assert seen == [("MODIFIED", "hook"), ("DELETED", "hook")]
    with pytest.raises(ApiException) as e:
        v1.read_namespaced_service("hook", "default")
    assert e.value.status == 404


def test_python_client_endpoint_slices(api, cluster):
    disc = client.DiscoveryV1Api(api)
    for name, service in (("hook-a", "hook"), ("hook-b", "hook"), ("other-a", "other")):
        disc.create_namespaced_endpoint_slice("default", {
            "metadata": {"name": name, "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.1.7"], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": 9443}]})
    found = disc.list_namespaced_endpoint_slice(
        "default", label_selector="kubernetes.io/service-name=hook")
    assert [s.metadata.name for s in found.items] == ["hook-a", "hook-b"]
    first = found.items[0]
    assert first.endpoints[0].conditions.ready is True
    assert first.endpoints[0].conditions.serving is None
    assert (first.ports[0].name, first.ports[0].port, first.ports[0].protocol) == \
        ("https", 9443, "TCP")
    rv = found.metadata.resource_version
    disc.patch_namespaced_endpoint_slice("hook-a", "default", {
        "endpoints": [{"addresses": ["10.244.1.8"], "conditions": {"ready": False}}]})
    disc.patch_namespaced_endpoint_slice("other-a", "default", {"metadata": {"labels": {
        "kubernetes.io/service-name": "hook"}}})
    disc.delete_namespaced_endpoint_slice("hook-b", "default")
    seen = [(ev["type"], ev["object"].metadata.name) for ev in watch.Watch().stream(
        disc.list_namespaced_endpoint_slice, "default", resource_version=rv,
        timeout_seconds=1, label_selector="kubernetes.io/service-name=hook")]
    assert seen == [("MODIFIED", "hook-a"), ("ADDED", "other-a"), ("DELETED", "hook-b")]
    got = disc.read_namespaced_endpoint_slice("hook-a", "default")
    assert got.endpoints[0].addresses == ["10.244.1.8"] and got.metadata.generation == 2
    with pytest.raises(ApiException) as e:
        disc.create_namespaced_endpoint_slice("default", {
            "metadata": {"name": "bad"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["0.0.0.0"]}]})
    assert e.value.status == 422
    assert causes(json.loads(e.value.body)) == [
        ("endpoints[0].addresses[0]", "FieldValueInvalid",
         'Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)')]
