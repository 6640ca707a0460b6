"""The part of a cluster that runs pods, for the soak: `Deployments` plays the Deployment
controller, the kubelet and kube-proxy for the Deployments stored in one namespace (the
chart's, in mode sidecar); `VolumePod` is a webhook pod outside the chart that mounts the
Secret (mode job).

What a `Deployments` pod is: certctl's native sidecar and the webhook container of the stored
pod template, as local processes (harness.kubelet.pod_container: the stored RBAC, the
service-account token, $(VAR) expansion), sharing a certificate folder; their ports are
free loopback ports in place of the pod's own. The kubelet part follows the template's
probes: the webhook container starts once certctl's startupProbe passed; a container is ready
after one successful readinessProbe and not ready after failureThreshold failed ones; a
container that exits is started again after RESTART_DELAY (with its startupProbe again). The
pod is ready when both containers are. The Deployment part rolls a changed template out with
the default strategy (maxSurge 25% rounded up, maxUnavailable 25% rounded down: one new pod,
an old one removed once the new one is ready) and scales to spec.replicas (not-ready pods
first, then the newest). A pod being removed runs the webhook container's preStop pause
(`lifecycle.preStop.sleep.seconds`, none without one), then SIGTERMs the webhook container
and after it certctl (a native sidecar stops last). kube-proxy: `endpoints(namespace,
service)` is the ready pods the stored Service selects, and for ENDPOINTS_LAG a pod that
was ready when its removal began: the calls on their way while the EndpointSlice change
travels, which a pod without a preStop pause refuses.
"""

import base64
import hashlib
import http.client
import json
import os
import random
import shutil
import signal
import ssl
import sys
import threading
import time

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if E2E not in sys.path:
    sys.path.insert(0, E2E)

from harness.kubelet import (ContainerProcess, ConfigError, free_ports,  # noqa: E402
                             pod_container, rewrite_flags)
from harness.naive_rotation import publish_folder  # noqa: E402
from harness.sidecar import WEBHOOK_SERVER  # noqa: E402
from soak.background import Background  # noqa: E402

__all__ = ["Deployments", "EndpointSliceWriter", "VolumePod", "WEBHOOK_SERVER", "peak_rss_kib"]

RESTART_DELAY = 1.0       # the kubelet's first back-off is 10 s; compressed like the lifetimes
ENDPOINTS_LAG = 1.0       # a removed pod still gets calls this long
TICK = 0.1


def peak_rss_kib(pid):
    """VmHWM of a live process, in KiB (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _probe(host, port, path, https=False, timeout=1.0):
    """True when GET answers 2xx/3xx, as the kubelet's httpGet probe judges it."""
    if https:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the kubelet does not verify probe certificates
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        return 200 <= conn.getresponse().status < 400
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()



def template_hash_of(deployment):
    """The pod template's fingerprint: pods of an older template are a rollout's old ones."""
    return hashlib.sha256(json.dumps(deployment["spec"]["template"],
                                     sort_keys=True).encode()).hexdigest()

class Container:
    """One container of a pod: its process, its probes, its readiness."""

    def __init__(self, name, spec, make_process, port_of, host):
        self.name, self.spec = name, spec
        self.make_process, self.port_of = make_process, port_of
        self.host = host
        self.process = None
        self.started = False        # startupProbe passed (or there is none)
        self.ready = False
        self.failures = 0
        self.next_probe = 0.0
        self.restart_at = None
        self.peak_kib = 0

    def probe(self, kind):
        spec = self.spec.get(kind) or {}
        get = spec.get("httpGet")
        if not get:
            return None
        return _probe(self.host, self.port_of(get["port"]), get.get("path", "/"),
                      https=get.get("scheme") == "HTTPS",
                      timeout=float(spec.get("timeoutSeconds", 1)))

    def period(self, kind):
        return float((self.spec.get(kind) or {}).get("periodSeconds", 10))

    def start(self):
        self.process = self.make_process()
        self.process.start()
        self.started = not self.spec.get("startupProbe")
        self.ready = False
        self.failures = 0
        self.next_probe = time.monotonic()
        self.restart_at = None

    def alive(self):
        return self.process is not None and self.process.alive()

    def sample(self):
        if self.alive():
            self.peak_kib = max(self.peak_kib, peak_rss_kib(self.process.proc.pid) or 0)

    def tick(self, now):
        """One look by the kubelet; returns True when the container just passed startup."""
        if self.process is None:
            return False
        if not self.alive():
            self.ready = False
            if self.restart_at is None:
                self.restart_at = now + RESTART_DELAY
            elif now >= self.restart_at:
                self.start()
            return False
        if now < self.next_probe:
            return False
        if not self.started:
            self.next_probe = now + self.period("startupProbe")
            if self.probe("startupProbe"):
                self.started = True
                self.next_probe = now
                return True
            return False
        self.next_probe = now + self.period("readinessProbe")
        result = self.probe("readinessProbe")
        if result is None or result:
            self.ready, self.failures = True, 0
        else:
            self.failures += 1
            threshold = int((self.spec.get("readinessProbe") or {}).get("failureThreshold", 3))
            if self.failures >= threshold:
                self.ready = False
        return False

    def stop(self, sig=signal.SIGTERM):
        if self.process is not None:
            self.sample()
            self.process.stop(sig)


class Pod:
    def __init__(self, owner, name, template_hash, labels, created):
        self.owner = owner  # the Deployment's name
        self.name, self.template_hash, self.labels = name, template_hash, labels
        self.created = created
        self.sidecar = None
        self.server = None
        self.https = None
        self.cert_dir = None
        self.pre_stop = 0.0           # seconds of the webhook container's preStop pause
        self.terminating = False
        self.routed_until = None      # a removed pod: calls still reach it until then

    @property
    def ready(self):
        return (not self.terminating and self.sidecar is not None and self.sidecar.ready
                and self.server is not None and self.server.ready)

    def containers(self):
        return [c for c in (self.sidecar, self.server) if c is not None]


class Deployments(Background):
    """Runs the pods of every Deployment in `namespace`, read from `deployments` (an
    Informer); `services` (an Informer) gives the Services whose endpoints it answers for.
    `image_map` maps image repositories to local executables; `log(text)` records what it
    does. `host` is the pods' address: loopback on the emulator, the node's address (one an
    EndpointSlice may hold) where kube-apiserver calls them."""

    def __init__(self, cluster, namespace, deployments, services, image_map, workdir, log,
                 seed=0, extra_env=None, host="127.0.0.1"):
        self.cluster, self.namespace, self.host = cluster, namespace, host
        self.extra_env = dict(extra_env or {})  # added to certctl's environment
        self.deployments, self.services = deployments, services
        self.image_map, self.workdir, self.log = image_map, workdir, log
        self.pods = {}
        self.gone = []               # pods removed, kept for the report
        self._random = random.Random(seed)
        self._lock = threading.RLock()
        self.errors = []
        super().__init__("kubelet", TICK, errors=self.errors)

    # -- kube-proxy -------------------------------------------------------------------------

    def endpoints(self, namespace, service):
        found = []
        svc = self.services.get(service) if namespace == self.namespace else None
        if svc is None:
            return found
        selector = (svc.get("spec") or {}).get("selector") or {}
        if not selector:
            return found
        with self._lock:
            now = time.monotonic()
            for pod in self.pods.values():
                routed = pod.ready or (pod.routed_until is not None and now < pod.routed_until)
                if routed and all(pod.labels.get(k) == v for k, v in selector.items()):
                    found.append((pod.name, pod.https))
        return found

    # -- pods -------------------------------------------------------------------------------

    def ready_pods(self):
        with self._lock:
            return [p for p in self.pods.values() if p.ready]

    def pod_of_identity(self, identity):
        """The pod whose certctl holds `identity` ($POD_NAME + "_" + a suffix)."""
        name = (identity or "").rsplit("_", 1)[0]
        with self._lock:
            return self.pods.get(name)

    def kill_sidecar(self, pod):
        """SIGKILL certctl in `pod` (the kubelet starts it again)."""
        with self._lock:
            if pod.sidecar is not None and pod.sidecar.alive():
                pod.sidecar.sample()
                os.killpg(pod.sidecar.process.proc.pid, signal.SIGKILL)

    def rolled_out(self, deployment):
        """What `kubectl rollout status` waits for: as many pods as desired, every one from
        the current template and ready, none of an older one left."""
        desired = int(deployment["spec"].get("replicas", 1))
        current = template_hash_of(deployment)
        live = self.live(deployment["metadata"]["name"])
        return len(live) == desired and all(p.template_hash == current and p.ready for p in live)

    def live(self, owner=None):
        with self._lock:
            return [p for p in self.pods.values()
                    if not p.terminating and (owner is None or p.owner == owner)]

    def _new_pod(self, deployment, template_hash):
        template = deployment["spec"]["template"]
        spec = template["spec"]
        owner = deployment["metadata"]["name"]
        suffix = "".join(self._random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        name = f"{owner}-{template_hash[:10]}-{suffix}"
        pod = Pod(owner, name, template_hash, dict(template["metadata"].get("labels") or {}),
                  time.monotonic())
        folder = os.path.join(self.workdir, "pods", name)
        pod.cert_dir = os.path.join(folder, "tls")
        os.makedirs(pod.cert_dir, exist_ok=True)
        health, metrics, https = free_ports(3)
        pod.https = https
        ports = {"health": health, "metrics": metrics, "https": https}

        def sidecar_process():
            process = pod_container(
                self.cluster, spec, "certctl", self.namespace, self.image_map,
                os.path.join(folder, "certctl"), pod_name=name,
                args=lambda args: rewrite_flags(args, {
                    "--cert-dir": pod.cert_dir, "--health-addr": f"{self.host}:{health}",
                    "--metrics-addr": f"{self.host}:{metrics}",
                    "--serving-addr": f"{self.host}:{https}"}))
            process.env.update(self.extra_env)
            return process

        [server_spec] = spec["containers"]
        pre_stop = ((server_spec.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}
        pod.pre_stop = float(pre_stop.get("seconds", 0))

        def server_process():
            return pod_container(
                self.cluster, spec, server_spec["name"], self.namespace, self.image_map,
                os.path.join(folder, "server"), pod_name=name,
                args=lambda args: rewrite_flags(args, {"--cert-dir": pod.cert_dir,
                                                       "--listen": f"{self.host}:{https}"}))

        [sidecar_spec] = [c for c in spec.get("initContainers") or [] if c["name"] == "certctl"]
        pod.sidecar = Container("certctl", sidecar_spec, sidecar_process,
                                lambda port: ports.get(port, port), self.host)
        pod.server = Container(server_spec["name"], server_spec, server_process,
                               lambda port: ports.get(port, port), self.host)
        pod.sidecar.start()
        self.pods[name] = pod
        self.log(f"pod {name} created")
        return pod

    def _remove(self, pod, why):
        with self._lock:
            if pod.ready:
                pod.routed_until = time.monotonic() + ENDPOINTS_LAG
            pod.terminating = True
        self.log(f"pod {pod.name} removed ({why})")

        def finish():
            time.sleep(pod.pre_stop)
            for container in (pod.server, pod.sidecar):
                if container is not None:
                    container.stop()
            # Calls on their way reach the stopped pod (refused) until the lag has passed.
            time.sleep(max(0.0, (pod.routed_until or 0.0) - time.monotonic()))
            with self._lock:
                self.pods.pop(pod.name, None)
                self.gone.append(pod)

        threading.Thread(target=finish, name=f"stop {pod.name}", daemon=True).start()

    def _reconcile(self):
        stored = {d["metadata"]["name"]: d for d in self.deployments.items()}
        for pod in self.live():
            if pod.owner not in stored:
                self._remove(pod, f"Deployment {pod.owner} deleted")
        for name, deployment in stored.items():
            self._reconcile_one(deployment, self.live(name))

    def _reconcile_one(self, deployment, live):
        desired = int(deployment["spec"].get("replicas", 1))
        template_hash = template_hash_of(deployment)
        new = [p for p in live if p.template_hash == template_hash]
        old = [p for p in live if p.template_hash != template_hash]
        surge = -(-desired * 25 // 100) if desired else 0
        unavailable = desired * 25 // 100
        if len(new) < desired and len(live) < desired + max(surge, 1 if old else 0):
            try:
                self._new_pod(deployment, template_hash)
            except ConfigError as e:
                self.errors.append(str(e))
            return
        if old:
            ready = sum(1 for p in live if p.ready)
            victim = sorted(old, key=lambda p: (p.ready, -p.created))[0]
            if not victim.ready or ready - 1 >= desired - unavailable:
                self._remove(victim, "rolling update")
            return
        if len(new) > desired:
            victim = sorted(new, key=lambda p: (p.ready, -p.created))[0]
            self._remove(victim, f"scaled to {desired}")

    def step(self):
        now = time.monotonic()
        with self._lock:
            for pod in list(self.pods.values()):
                if pod.terminating:
                    continue
                if pod.sidecar.tick(now) and pod.server.process is None:
                    pod.server.start()  # the main container waits for the sidecar's start
                pod.server.tick(now)
            self._reconcile()

    def sample(self):
        with self._lock:
            for pod in self.pods.values():
                for container in pod.containers():
                    container.sample()

    def stop(self, timeout=10):
        super().stop(timeout)
        with self._lock:
            pods = list(self.pods.values())
        for pod in pods:
            for container in pod.containers():
                container.stop()
            self.gone.append(pod)
        self.pods.clear()


class VolumePod:
    """The webhook as a pod of its own Deployment that mounts the Secret (certctl in mode
    job): the example server on a folder the kubelet fills from the Secret, each new version
    written `propagation` seconds after it was stored, as a new timestamped folder swapped in
    through `..data` the way the kubelet updates a Secret volume."""

    def __init__(self, secrets, secret_name, workdir, name, propagation=1.0, host="127.0.0.1"):
        self.secrets, self.secret_name, self.host = secrets, secret_name, host
        self.name, self.propagation = name, propagation
        self.folder = os.path.join(workdir, "pods", name, "secret-volume")
        os.makedirs(self.folder, exist_ok=True)
        self.port, = free_ports(1)
        self.process = ContainerProcess(
            [WEBHOOK_SERVER, "--cert-dir", self.folder, "--listen", f"{host}:{self.port}",
             "--ready-timeout", "600"], {}, os.path.join(workdir, "pods", name, "server"),
            name="webhook")
        self.version = None
        self.is_ready = False        # its readinessProbe (/healthz over HTTPS), every 0.5 s
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sync, name=f"volume {name}", daemon=True)

    def _write(self, data):
        old = os.path.realpath(os.path.join(self.folder, "..data"))
        publish_folder(self.folder, {key: base64.b64decode(data[key]).decode()
                                     for key in ("tls.crt", "tls.key", "ca.crt") if key in data})
        if os.path.isdir(old) and old != os.path.realpath(os.path.join(self.folder, "..data")):
            shutil.rmtree(old, ignore_errors=True)  # the kubelet removes the replaced set

    def _sync(self):
        next_probe = 0.0
        while not self._stop.is_set():
            if time.monotonic() >= next_probe:
                self.is_ready = self.ready()
                next_probe = time.monotonic() + 0.5
            secret = self.secrets.get(self.secret_name)
            version = secret["metadata"]["resourceVersion"] if secret else None
            if secret is not None and version != self.version:
                self._stop.wait(self.propagation)
                self._write(secret.get("data") or {})
                self.version = version
            self.sample()
            self._stop.wait(0.1)

    def sample(self):
        if self.process.alive():
            self.peak_kib = max(self.peak_kib, peak_rss_kib(self.process.proc.pid) or 0)

    def ready(self):
        return self.process.alive() and _probe(self.host, self.port, "/healthz", https=True)

    def start(self):
        self._thread.start()
        self.process.start()
        return self

    def wait_ready(self, bound):
        deadline = time.monotonic() + bound
        while not self.is_ready:
            if time.monotonic() > deadline or not self.process.alive():
                raise RuntimeError(f"pod {self.name} not ready within {bound:g}s:\n"
                                   f"{self.process.log()[-2000:]}")
            time.sleep(0.05)

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        self.sample()
        self.process.stop()


class EndpointSliceWriter(Background):
    """The EndpointSlice controller, for a real API server (whose webhook and aggregator
    calls go to the addresses the Service's EndpointSlices hold): every TICK, each Service in
    `services` (an Informer) gets one slice per endpoint `router(namespace, service)` gives,
    `host` and that pod's port under each of the Service's port names (the pods of one node
    listen on one address, each on its own port); slices of endpoints or Services gone are
    deleted. What goes wrong is appended to `errors` (the report's harness errors).
    `in_sync(settled)`: the slices hold what the router gives now, and have for `settled`
    seconds (the API server's cache of them has caught up)."""

    MANAGER = "soak-endpointslice-writer"

    def __init__(self, cluster, namespace, services, router, host, errors):
        super().__init__("endpointslices", TICK, errors=errors, what="endpointslices: ")
        self.cluster, self.namespace = cluster, namespace
        self.services, self.router, self.host = services, router, host
        self.path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
        self.written = {}            # slice name -> the slice as last written
        self.synced_at = None        # when the last change was written

    def _desired(self):
        out = {}
        for service in self.services.items():
            name = service["metadata"]["name"]
            ports = [p.get("name", "") for p in (service.get("spec") or {}).get("ports") or []]
            for pod, port in self.router(self.namespace, name):
                slice_name = f"{name}-{hashlib.sha256(pod.encode()).hexdigest()[:10]}"
                out[slice_name] = {
                    "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": slice_name, "namespace": self.namespace,
                                 "labels": {"kubernetes.io/service-name": name,
                                            "endpointslice.kubernetes.io/managed-by":
                                                self.MANAGER}},
                    "addressType": "IPv4",
                    "endpoints": [{"addresses": [self.host], "conditions": {"ready": True},
                                   "targetRef": {"kind": "Pod", "name": pod,
                                                 "namespace": self.namespace}}],
                    "ports": [{"name": p, "port": port, "protocol": "TCP"} for p in ports]}
        return out

    def in_sync(self, settled):
        if self.synced_at is None or time.monotonic() - self.synced_at < settled:
            return False
        return self._desired() == self.written

    def step(self):
        desired = self._desired()
        if desired == self.written and self.synced_at is not None:
            return
        for name in [n for n in self.written if n not in desired]:
            resp = self.cluster.api("DELETE", f"{self.path}/{name}")
            if resp.status not in (200, 404):
                raise RuntimeError(f"DELETE endpointslice {name}: {resp.status}")
            del self.written[name]
        for name, obj in desired.items():
            if self.written.get(name) == obj:
                continue
            resp = self.cluster.api("PUT", f"{self.path}/{name}", obj)
            if resp.status == 404:
                resp = self.cluster.api("POST", self.path, obj)
            if resp.status not in (200, 201):
                raise RuntimeError(f"endpointslice {name}: {resp.status} {resp.body[:300]!r}")
            self.written[name] = obj
        self.synced_at = time.monotonic()
