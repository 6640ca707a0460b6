"""policy/v1 PodDisruptionBudget and networking.k8s.io/v1 NetworkPolicy as kube-apiserver
1.32 serves them: discovery and short names, the defaults the API server fills in (a
NetworkPolicy port's protocol, policyTypes), generation, and the validation errors of
ValidatePodDisruptionBudgetSpec and ValidateNetworkPolicy. With kubectl and raw HTTPS."""

import json

from harness.kubectl_io import get_json

PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
NETPOLS = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies"

PDB = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: hook, namespace: default}
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {app.kubernetes.io/name: hook}
"""
NETPOL = """\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: hook, namespace: default}
spec:
  podSelector:
    matchLabels: {app.kubernetes.io/name: hook}
  ingress:
    - ports: [{port: https, protocol: TCP}]
    - from:
        - namespaceSelector:
            matchLabels: {kubernetes.io/metadata.name: monitoring}
          podSelector:
            matchLabels: {app.kubernetes.io/name: prometheus}
        - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}
      ports: [{port: 8080, protocol: TCP}, {port: 9000, endPort: 9010, protocol: TCP}]
"""


def rejected(cluster, path, body):
    resp = cluster.api("POST", path, body)
    assert resp.status == 422, resp
    return resp.json()["message"]


def test_discovery_lists_both_kinds(cluster):
    rows = {tuple(line.split()) for line in
            cluster.kubectl("api-resources", "--no-headers").stdout.splitlines()}
    assert ("poddisruptionbudgets", "pdb", "policy/v1", "true", "PodDisruptionBudget") in rows
    assert ("networkpolicies", "netpol", "networking.k8s.io/v1", "true", "NetworkPolicy") in rows
    policy = cluster.api("GET", "/apis/policy/v1").json()["resources"]
    assert [r["name"] for r in policy] == ["poddisruptionbudgets", "poddisruptionbudgets/status"]
    networking = cluster.api("GET", "/apis/networking.k8s.io/v1").json()["resources"]
    assert [r["name"] for r in networking] == ["networkpolicies"]


def test_pod_disruption_budget_applies_and_is_validated(cluster):
    assert cluster.kubectl("apply", "-f", "-", input=PDB).stdout.strip() == \
        "poddisruptionbudget.policy/hook created"
    pdb = get_json(cluster, "pdb", "hook")
    assert pdb["spec"] == {"maxUnavailable": 1,
                           "selector": {"matchLabels": {"app.kubernetes.io/name": "hook"}}}
    assert pdb["metadata"]["generation"] == 1
    # spec.selector has patchStrategy "replace": kubectl's patch always carries it, so a
    # second apply says "configured", but the object and its revision stay as they are.
    rv = cluster.resource_version()
    assert cluster.kubectl("apply", "-f", "-", input=PDB).stdout.strip() == \
        "poddisruptionbudget.policy/hook configured"
    assert cluster.resource_version() == rv
    assert get_json(cluster, "pdb", "hook") == pdb
    cluster.kubectl("apply", "-f", "-", input=PDB.replace("maxUnavailable: 1",
                                                          'maxUnavailable: "50%"'))
    assert get_json(cluster, "pdb", "hook")["metadata"]["generation"] == 2

    base = {"metadata": {"name": "bad"}, "spec": {"selector": {"matchLabels": {"a": "b"}}}}
    for spec, message in (
            ({"minAvailable": 1, "maxUnavailable": 1},
             "spec: Invalid value: policy.PodDisruptionBudgetSpec{...}: minAvailable and "
             "maxUnavailable cannot be both set"),
            ({"maxUnavailable": -1},
             "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"),
            ({"minAvailable": "150%"},
             'spec.minAvailable: Invalid value: "150%": must not be greater than 100%'),
            ({"minAvailable": "half"},
             'spec.minAvailable: Invalid value: "half": a valid percent string must be'),
            ({"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "Never"},
             'spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": supported values: '
             '"AlwaysAllow", "IfHealthyBudget"')):
        body = json.loads(json.dumps(base))
        body["spec"].update(spec)
        assert message in rejected(cluster, PDBS, body)
    bad_type = cluster.api("POST", PDBS, {"metadata": {"name": "x"},
                                          "spec": {"maxUnavailable": True}})
    assert bad_type.status == 400


def test_network_policy_applies_with_its_defaults(cluster):
    assert cluster.kubectl("apply", "-f", "-", input=NETPOL).stdout.strip() == \
        "networkpolicy.networking.k8s.io/hook created"
    policy = get_json(cluster, "netpol", "hook")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"][0] == {"ports": [{"port": "https", "protocol": "TCP"}]}
    assert policy["spec"]["ingress"][1]["ports"] == [
        {"port": 8080, "protocol": "TCP"}, {"port": 9000, "endPort": 9010, "protocol": "TCP"}]
    assert policy["metadata"]["generation"] == 1
    cluster.reset_request_log()
    assert cluster.kubectl("apply", "-f", "-", input=NETPOL).stdout.strip() == \
        "networkpolicy.networking.k8s.io/hook unchanged"
    assert cluster.writes() == []
    # The lists are atomic: a port that leaves its protocol to the default differs from the
    # stored one, so kubectl sends the whole list again ("configured"), to no effect.
    no_protocol = NETPOL.replace("{port: https, protocol: TCP}", "{port: https}")
    cluster.kubectl("apply", "-f", "-", input=no_protocol)  # a new last-applied annotation
    rv = cluster.resource_version()
    assert cluster.kubectl("apply", "-f", "-", input=no_protocol).stdout.strip() == \
        "networkpolicy.networking.k8s.io/hook configured"
    assert cluster.resource_version() == rv
    egress = cluster.api("POST", NETPOLS, {"metadata": {"name": "out"}, "spec": {
        "podSelector": {}, "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}}).json()
    assert egress["spec"]["policyTypes"] == ["Ingress", "Egress"]


def test_network_policy_validation(cluster):
    def policy(*ingress, types=None):
        spec = {"podSelector": {"matchLabels": {"app": "hook"}}, "ingress": list(ingress)}
        if types:
            spec["policyTypes"] = types
        return {"metadata": {"name": "bad"}, "spec": spec}

    for body, message in (
            (policy({"ports": [{"port": 0}]}),
             "spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, "
             "inclusive"),
            (policy({"ports": [{"port": 53, "protocol": "ICMP"}]}),
             'spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: '
             '"SCTP", "TCP", "UDP"'),
            (policy({"ports": [{"port": "the-metrics-port"}]}),
             'spec.ingress[0].ports[0].port: Invalid value: "the-metrics-port": must be no more '
             'than 15 characters'),
            (policy({"ports": [{"port": "metrics", "endPort": 9000}]}),
             "spec.ingress[0].ports[0].endPort: Forbidden: may not be specified when `port` is "
             "non-numeric"),
            (policy({"ports": [{"port": 9000, "endPort": 8000}]}),
             "spec.ingress[0].ports[0].endPort: Invalid value: 8000: must be greater than or "
             "equal to `port`"),
            (policy({"from": [{}]}),
             "spec.ingress[0].from[0]: Required value: must specify a peer"),
            (policy({"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}),
             "spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another "
             "peer"),
            (policy({"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/8"]}}]}),
             'spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: "11.0.0.0/8": must be '
             'a strict subset of `cidr`'),
            (policy({"from": [{"namespaceSelector": {"matchExpressions": [
                {"key": "team", "operator": "In"}]}}]}),
             "spec.ingress[0].from[0].namespaceSelector.matchExpressions[0].values: Required "
             "value"),
            (policy(types=["Inbound"]),
             'spec.policyTypes[0]: Unsupported value: "Inbound": supported values: "Egress", '
             '"Ingress"')):
        assert message in rejected(cluster, NETPOLS, body), body
    assert cluster.api("GET", NETPOLS).json()["items"] == []
