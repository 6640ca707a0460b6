"""A stored Deployment carries the defaults kube-apiserver fills in (SetDefaults_Deployment and
the pod template's: containers, probes, lifecycle handlers, field references, volumes), on
the emulator exactly as on a real kube-apiserver v1.37."""

import copy
import json

import pytest

SENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "defaults", "namespace": "infra"},
    "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {
        "metadata": {"labels": {"app": "d"}},
        "spec": {
            "initContainers": [{
                "name": "side", "image": "example/side@sha256:" + "0" * 64,
                "restartPolicy": "Always", "startupProbe": {"tcpSocket": {"port": 8080}},
                "lifecycle": {"preStop": {"httpGet": {"port": 8080}}}}],
            "containers": [
                {"name": "a", "image": "example/a",
                 "ports": [{"containerPort": 8443, "name": "https"}],
                 "env": [{"name": "POD",
                          "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                         {"name": "CPU",
                          "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
                 "readinessProbe": {"httpGet": {"port": "https"}},
                 "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
                 "volumeMounts": [{"name": "s", "mountPath": "/s"}]},
                {"name": "b", "image": "example/b:latest",
                 "resources": {"limits": {"cpu": "1"}}},
                {"name": "c", "image": "example/c:v1",
                 "securityContext": {"runAsNonRoot": True}}],
            "volumes": [
                {"name": "s", "secret": {"secretName": "x"}},
                {"name": "c", "configMap": {"name": "y"}},
                {"name": "e", "emptyDir": {}},
                {"name": "p", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "t"}},
                    {"downwardAPI": {"items": [
                        {"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}},
                {"name": "d", "downwardAPI": {"items": [
                    {"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}}}

# What kube-apiserver v1.37.2 adds to SENT's spec, path by path.
POD = "template.spec"
ADDED = {
    "replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
    "strategy": {"type": "RollingUpdate",
                 "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
    f"{POD}.restartPolicy": "Always", f"{POD}.terminationGracePeriodSeconds": 30,
    f"{POD}.dnsPolicy": "ClusterFirst", f"{POD}.securityContext": {},
    f"{POD}.schedulerName": "default-scheduler",
    f"{POD}.initContainers.0.imagePullPolicy": "IfNotPresent",
    f"{POD}.initContainers.0.resources": {},
    f"{POD}.initContainers.0.startupProbe.timeoutSeconds": 1,
    f"{POD}.initContainers.0.startupProbe.periodSeconds": 10,
    f"{POD}.initContainers.0.startupProbe.successThreshold": 1,
    f"{POD}.initContainers.0.startupProbe.failureThreshold": 3,
    f"{POD}.initContainers.0.lifecycle.preStop.httpGet.path": "/",
    f"{POD}.initContainers.0.lifecycle.preStop.httpGet.scheme": "HTTP",
    f"{POD}.containers.0.imagePullPolicy": "Always",
    f"{POD}.containers.0.resources": {},
    f"{POD}.containers.0.ports.0.protocol": "TCP",
    f"{POD}.containers.0.env.0.valueFrom.fieldRef.apiVersion": "v1",
    f"{POD}.containers.0.env.1.valueFrom.resourceFieldRef.divisor": "0",
    f"{POD}.containers.0.readinessProbe.timeoutSeconds": 1,
    f"{POD}.containers.0.readinessProbe.periodSeconds": 10,
    f"{POD}.containers.0.readinessProbe.successThreshold": 1,
    f"{POD}.containers.0.readinessProbe.failureThreshold": 3,
    f"{POD}.containers.0.readinessProbe.httpGet.path": "/",
    f"{POD}.containers.0.readinessProbe.httpGet.scheme": "HTTP",
    f"{POD}.containers.0.livenessProbe.timeoutSeconds": 1,
    f"{POD}.containers.0.livenessProbe.successThreshold": 1,
    f"{POD}.containers.0.livenessProbe.failureThreshold": 3,
    f"{POD}.containers.1.imagePullPolicy": "Always",
    f"{POD}.containers.2.imagePullPolicy": "IfNotPresent",
    f"{POD}.containers.2.resources": {},
    f"{POD}.volumes.0.secret.defaultMode": 420,
    f"{POD}.volumes.1.configMap.defaultMode": 420,
    f"{POD}.volumes.3.projected.defaultMode": 420,
    f"{POD}.volumes.3.projected.sources.0.serviceAccountToken.expirationSeconds": 3600,
    f"{POD}.volumes.3.projected.sources.1.downwardAPI.items.0.fieldRef.apiVersion": "v1",
    f"{POD}.volumes.4.downwardAPI.defaultMode": 420,
    f"{POD}.volumes.4.downwardAPI.items.0.fieldRef.apiVersion": "v1",
}
for i in range(3):
    ADDED[f"{POD}.containers.{i}.terminationMessagePath"] = "/dev/termination-log"
    ADDED[f"{POD}.containers.{i}.terminationMessagePolicy"] = "File"
ADDED[f"{POD}.initContainers.0.terminationMessagePath"] = "/dev/termination-log"
ADDED[f"{POD}.initContainers.0.terminationMessagePolicy"] = "File"


def with_defaults(spec):
    out = copy.deepcopy(spec)
    for path, value in ADDED.items():
        *parents, last = path.split(".")
        node = out
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        assert last not in node, f"{path} was sent: not a default"
        node[last] = value
    return out


@pytest.mark.backends("emulator", "real")
def test_a_stored_deployment_has_the_api_servers_defaults(cluster):
    cluster.kubectl("create", "namespace", "infra")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(SENT))
    stored = json.loads(cluster.kubectl("get", "deployment", "defaults", "-n", "infra", "-o",
                                        "json").stdout)
    assert stored["spec"] == with_defaults(SENT["spec"])
    assert stored["status"] == {}
    # Defaulted again on update: a replace without them gets them back.
    sent = copy.deepcopy(SENT)
    sent["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
    sent["spec"]["template"]["spec"]["containers"][2]["image"] = "example/c:v2"
    cluster.kubectl("replace", "-f", "-", input=json.dumps(sent))
    stored = json.loads(cluster.kubectl("get", "deployment", "defaults", "-n", "infra", "-o",
                                        "json").stdout)
    expected = with_defaults(SENT["spec"])
    expected["template"]["spec"]["containers"][2]["image"] = "example/c:v2"
    assert stored["spec"] == expected
