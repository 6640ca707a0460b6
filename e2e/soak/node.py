"""The soak's pods on a real node (`--backend node`, `scripts/kube-up.sh --node`): the kubelet
and containerd run them, kube-controller-manager rolls Deployments out, runs the hook Jobs
and writes the EndpointSlices kube-apiserver routes the calls by. Nothing here plays a
component; it only looks, with the questions the soak asks the played ones on the other
backends:

- `NodePods`: the pods of one Deployment, from a pods informer — ready, live, rolled out,
  the pod whose certctl holds the Lease, the certificate folder its containers share (read
  through /proc/PID/root of the container), certctl SIGKILLed (the kubelet restarts it), the
  peak RSS of every container;
- `SecretVolumePods`: the webhook's own Deployment of the mode-job days, mounting the
  Secret, whose copy the kubelet refreshes on its own schedule;
- `NodeSlices`: whether every Service's EndpointSlices hold exactly the ready pods it
  selects, as they must before the cluster counts as steady.
"""

import json
import os
import signal
import sys
import threading
import time

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if E2E not in sys.path:
    sys.path.insert(0, E2E)

from harness.node import container_pid  # noqa: E402
from soak.workloads import peak_rss_kib  # noqa: E402

__all__ = ["NodePods", "NodeSlices", "SecretVolumePods"]

CERTCTL, WEBHOOK = "certctl", "webhook"  # the chart's container names


class NodePod:
    """One pod as the API server holds it; `cert_dir` is its certificate folder as one of its
    containers sees it (None while none of them runs)."""

    def __init__(self, obj, cert_mount, pids):
        meta, status = obj["metadata"], obj.get("status") or {}
        self.name = meta["name"]
        self.labels = meta.get("labels") or {}
        self.template_hash = self.labels.get("pod-template-hash")
        self.terminating = bool(meta.get("deletionTimestamp"))
        self.ip = status.get("podIP")
        self.ready = not self.terminating and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or [])
        self.container_ids = {}
        for s in (status.get("containerStatuses") or []) + (
                status.get("initContainerStatuses") or []):
            if (s.get("state") or {}).get("running") and s.get("containerID"):
                self.container_ids[s["name"]] = s["containerID"].split("://", 1)[1]
        self._cert_mount, self._pids = cert_mount, pids

    def pid(self, container):
        container_id = self.container_ids.get(container)
        return container_pid(container_id, self._pids) if container_id else None

    @property
    def cert_dir(self):
        # certctl's view first: the webhook container mounts the folder read-only.
        for container in (CERTCTL, WEBHOOK):
            pid = self.pid(container)
            if pid is not None:
                return f"/proc/{pid}/root{self._cert_mount}"
        return None


class NodePods:
    """The pods of the Deployment `deployment` (those of its ReplicaSets, named
    DEPLOYMENT-HASH), read from `pods`, an informer of the namespace's pods."""

    def __init__(self, pods, deployment, cert_mount="/tls"):
        self.informer, self.deployment, self.cert_mount = pods, deployment, cert_mount
        self.errors = []
        self.peaks = {}  # "CONTAINER of POD" -> peak RSS in KiB, kept after the pod is gone
        self._pids = {}
        self._lock = threading.Lock()

    @property
    def pods(self):
        out = {}
        for obj in self.informer.items():
            owners = obj["metadata"].get("ownerReferences") or []
            template = (obj["metadata"].get("labels") or {}).get("pod-template-hash")
            if any(o.get("kind") == "ReplicaSet" and o.get("name") == f"{self.deployment}-"
                   f"{template}" for o in owners):
                out[obj["metadata"]["name"]] = NodePod(obj, self.cert_mount, self._pids)
        return out

    def live(self, owner=None):
        return [p for p in self.pods.values() if not p.terminating]

    def ready_pods(self):
        return [p for p in self.pods.values() if p.ready]

    def pod_of_identity(self, identity):
        """The pod whose certctl holds `identity` ($POD_NAME + "_" + a suffix)."""
        return self.pods.get((identity or "").rsplit("_", 1)[0])

    def kill_sidecar(self, pod):
        """SIGKILL certctl's process in `pod`; the kubelet starts the container again."""
        pid = pod.pid(CERTCTL)
        if pid is not None:
            self._sample(pod)
            os.kill(pid, signal.SIGKILL)

    @staticmethod
    def rolled_out(deployment):
        """What `kubectl rollout status` waits for, from the Deployment's status."""
        spec, status = deployment["spec"], deployment.get("status") or {}
        desired = int(spec.get("replicas", 1))
        return (status.get("observedGeneration", 0) >= deployment["metadata"]["generation"]
                and status.get("updatedReplicas") == desired
                and status.get("replicas") == desired
                and status.get("availableReplicas") == desired)

    def sample(self):
        for pod in self.pods.values():
            self._sample(pod)

    def _sample(self, pod):
        for container in pod.container_ids:
            pid = pod.pid(container)
            kib = peak_rss_kib(pid) if pid is not None else None
            if kib:
                key = f"{container} of {pod.name}"
                with self._lock:
                    self.peaks[key] = max(self.peaks.get(key, 0), kib)

    def start(self):
        return self

    def stop(self):
        pass


class SecretVolumePods(NodePods):
    """The webhook as a Deployment of its own whose pod mounts the Secret (certctl in mode
    job): the example webhook reading its certificate from the Secret volume, which the
    kubelet fills at the pod's start and refreshes at its pod syncs."""

    def __init__(self, cluster, pods, name, secret, namespace, service_labels, pre_stop):
        super().__init__(pods, name)
        self.cluster, self.name, self.namespace = cluster, name, namespace
        self.manifest = _secret_volume_deployment(name, namespace, secret, service_labels,
                                                  pre_stop)
        self.stopped = False

    def start(self):
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(self.manifest))
        return self

    def _pod(self):
        live = self.live()
        return live[0] if len(live) == 1 else None

    @property
    def is_ready(self):
        pod = self._pod()
        return pod is not None and pod.ready

    @property
    def folder(self):
        pod = self._pod()
        return pod.cert_dir if pod is not None else None

    def wait_ready(self, bound):
        deadline = time.monotonic() + bound
        while not self.is_ready:
            if time.monotonic() > deadline:
                pods = self.cluster.kubectl("get", "pods", "-n", self.namespace, "-o",
                                            "wide").stdout
                raise RuntimeError(f"the Deployment {self.name} not ready within "
                                   f"{bound:g}s:\n{pods}")
            time.sleep(0.05)

    @property
    def peak_kib(self):
        return max(self.peaks.values(), default=0)

    def stop(self):
        """Deletes the Deployment; its pod pauses in preStop, then ends."""
        if self.stopped:
            return
        self.stopped = True
        self.sample()
        self.cluster.kubectl("delete", "deployment", self.name, "-n", self.namespace,
                             "--wait=false", "--ignore-not-found")


def _secret_volume_deployment(name, namespace, secret, service_labels, pre_stop):
    """Its pods carry `service_labels` (what the webhook's Service selects) and a label of
    their own, which alone its selector matches."""
    own = {"example.certctl.io/deployment": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": own},
            "template": {
                "metadata": {"labels": {**service_labels, **own}},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                        "runAsGroup": 65532},
                    "containers": [{
                        "name": WEBHOOK, "image": "localhost/example-webhook:dev",
                        "imagePullPolicy": "Never",
                        "args": ["--tls-cert-file=/tls/tls.crt",
                                 "--tls-private-key-file=/tls/tls.key"],
                        "ports": [{"name": "https", "containerPort": 9443}],
                        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "https",
                                                       "scheme": "HTTPS"},
                                           "periodSeconds": 1},
                        "lifecycle": {"preStop": {"sleep": {"seconds": pre_stop}}},
                        "volumeMounts": [{"name": "tls", "mountPath": "/tls",
                                          "readOnly": True}]}],
                    "volumes": [{"name": "tls", "secret": {"secretName": secret}}]}}}}


class NodeSlices:
    """kube-controller-manager's EndpointSlices, read from `slices` (an informer), against the
    Services of `services` and the pods of `pods` (informers of one namespace)."""

    def __init__(self, slices, services, pods):
        self.slices, self.services, self.pods = slices, services, pods
        self._since = None

    def _agree(self):
        ready = [(obj["metadata"].get("labels") or {}, (obj.get("status") or {}).get("podIP"))
                 for obj in self.pods.items()
                 if not obj["metadata"].get("deletionTimestamp") and any(
                     c.get("type") == "Ready" and c.get("status") == "True"
                     for c in (obj.get("status") or {}).get("conditions") or [])]
        for service in self.services.items():
            selector = (service.get("spec") or {}).get("selector")
            if not selector:
                continue
            name = service["metadata"]["name"]
            want = {ip for labels, ip in ready
                    if all(labels.get(k) == v for k, v in selector.items())}
            held = set()
            for obj in self.slices.items():
                if (obj["metadata"].get("labels") or {}).get(
                        "kubernetes.io/service-name") != name:
                    continue
                for endpoint in obj.get("endpoints") or []:
                    if (endpoint.get("conditions") or {}).get("ready"):
                        held.update(endpoint.get("addresses") or [])
            if held != want:
                return False
        return True

    def in_sync(self, settled):
        """The slices have agreed with the ready pods for `settled` seconds (kube-apiserver's
        cache of them follows within milliseconds)."""
        if not self._agree():
            self._since = None
            return False
        if self._since is None:
            self._since = time.monotonic()
        return time.monotonic() - self._since >= settled

    def start(self):
        return self

    def stop(self):
        pass
