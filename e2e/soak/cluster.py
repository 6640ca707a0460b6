"""The soak's cluster (see e2e/soak/README.md): `SoakCluster` holds the parts (the emulator,
the Job runner for Helm's hook Jobs, the chart's Deployments run by `workloads.Deployments`,
the webhook's own pod of the mode-job days `workloads.VolumePod`, the API server's admission
calls `apiserver.AdmissionCaller` through its delayed cache) and a monitor that tells the
ledger when the cluster is steady; and how the soak acts on it (Helm, kubectl).

On the real backend the cluster is a real kube-apiserver and etcd (`scripts/kube-up.sh`): the
pods listen on the node's address, `workloads.EndpointSliceWriter` writes their
EndpointSlices, and kube-apiserver makes the admission calls (`apiserver.KubeApiServerCaller`).
On the node backend (`scripts/kube-up.sh --node`) nothing is played: the kubelet runs the
pods, kube-controller-manager the Jobs, Deployments and EndpointSlices, and `soak.node`
only reads them.
"""

import base64
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if E2E not in sys.path:
    sys.path.insert(0, E2E)

from harness.certctl import webhook_configuration  # noqa: E402
from harness.cluster import Cluster  # noqa: E402
from harness.faults import user_fault  # noqa: E402
from harness.helm import REPO, find_helm, helm_env  # noqa: E402
from harness.kubelet import JobRunner  # noqa: E402
from harness.node import NodeCluster  # noqa: E402
from harness.real_cluster import RealCluster  # noqa: E402

from cryptography import x509  # noqa: E402  (Debian's python3-cryptography)

from soak.apiserver import (AdmissionCaller, CachedView, KubeApiServerCaller,  # noqa: E402
                            entries)
from soak.informer import Informer  # noqa: E402
from soak.ledger import Ledger  # noqa: E402
from soak.node import NodePods, NodeSlices, SecretVolumePods  # noqa: E402
from soak.workloads import (WEBHOOK_SERVER, Deployments, EndpointSliceWriter,  # noqa: E402
                            VolumePod, peak_rss_kib)

NS = "infra"
RELEASE = "hook"
SECRET = "webhook-server-cert"
SERVICE, RENAMED = "hook", "hook-v2"
DEPLOYMENT = SERVICE  # the chart keeps the Deployment's name when the Service is renamed
CERTCTL_USER = f"system:serviceaccount:{NS}:{RELEASE}-certctl"  # the chart's service account
FLOW_CONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
VWC, MWC = "hook", "hook-mutating"
CHART = os.path.join(REPO, "manifests", "helm", "certctl")
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PHASE = "certctl.io/rotation-phase"
UNTIL = "certctl.io/previous-ca-until"
SETTLE_BOUND = 120.0
API_SERVER_CACHE_DELAY = 1.0  # a webhook configuration's change reaches the calls this late
# On a real API server: how long the EndpointSlices must have held the ready pods before the
# cluster counts as steady (the write, and kube-apiserver's cache of it, take milliseconds).
SLICES_SETTLED = 0.5
# The labels the chart's Service selects (certctl.webhookSelectorLabels). On the node the
# webhook's own pods of the mode-job days carry them too, so that the chart's Service, which
# takes over the webhook's, selects both until the old Deployment is deleted.
WEBHOOK_SELECTOR = {"app.kubernetes.io/name": SERVICE, "app.kubernetes.io/instance": RELEASE,
                    "app.kubernetes.io/component": "webhook"}
VOLUME_DEPLOYMENT = "hook-server"
# On the node: the kubelet syncs each pod this often, compressed like the lifetimes, so that
# a renewed Secret reaches the volume of the mode-job days within seconds, not a minute.
KUBELET_SYNC = "2s"
# The preStop pause of the webhook's own pod, before the chart runs it (the chart's pods have
# the chart's default): longer than the calls still on their way to a removed pod.
WEBHOOK_PRE_STOP = 2


class SoakError(RuntimeError):
    pass


def not_after(pem):
    """notAfter (unix seconds) of the first certificate of a PEM text (openssl CLI)."""
    out = subprocess.run(["openssl", "x509", "-noout", "-enddate"], input=pem.encode(),
                         capture_output=True, check=True).stdout.decode()
    stamp = out.strip().split("=", 1)[1]
    return time.mktime(time.strptime(stamp, "%b %d %H:%M:%S %Y %Z")) - time.timezone


class SoakCluster:
    def __init__(self, binary, workdir, seed, minutes, control=None, log=print,
                 backend="emulator"):
        self.binary, self.workdir = os.path.abspath(binary), workdir
        self.backend = backend
        self.real_api = backend in ("real", "node")  # a kube-apiserver makes the calls
        self.host = "127.0.0.1"  # where the pods listen: the node's address on a real server
        self.seed, self.minutes, self.control = seed, minutes, control
        self.random = random.Random(seed)
        self.k = minutes / 10.0
        # Compressed lifetimes: a ten-minute run sees about six leaf renewals and two CAs
        # come to their end. Shorter runs keep them above certctl's own fixed times (the 3 s
        # a new bundle is left to reach every API server, the spacing of repairs in a fight),
        # which no real lifetime comes near; the CA's end then falls after the fight and the
        # read-only folder, where the ca-expiry event waits for it.
        self.cert_validity = max(20, round(120 * self.k))
        self.renew_before = max(10, round(40 * self.k))
        self.ca_validity = max(90, round(300 * self.k))
        self.ca_overlap = max(3, round(20 * self.k))
        # A dead leader is replaced a Lease's length later; client-go's 15 s stays short
        # beside a renewal window of 40 s, below that the Lease is shortened with it.
        self.lease_times = None if self.renew_before >= 40 else (4, 3, 1)
        self.say = log
        # What certctl's processes get besides their pod's environment: a control run's
        # removed safety (a control build only acts on it).
        self.certctl_env = {"CERTCTL_REMOVE_SAFETY": control} if control else {}
        self.ledger = Ledger(visible_after=API_SERVER_CACHE_DELAY)
        self.phase = "none"
        self.service = SERVICE
        self.replicas = 1
        self.writes_of_certctl = []
        self.helm_home = os.path.join(workdir, "helm")
        self.cluster = self.kubelet_jobs = self.pods = self.volume_pod = None
        self.informers = {}
        self.caller = self.slices = None
        self.views = []
        self._names = {}  # server certificate PEM -> its DNS names
        self.legacy_routed = False
        self.legacy_routed_until = None  # its pod removed: calls still reach it until then
        self.rss = {}
        self.metrics_notes = []  # the real API server's own count of the calls
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch_steadiness, name="steadiness",
                                         daemon=True)

    # -- the parts --------------------------------------------------------------------------

    def _open(self):
        os.makedirs(self.helm_home, exist_ok=True)
        if self.backend == "node":
            self.cluster = NodeCluster(os.path.join(self.workdir, "node"), KUBELET_SYNC)
        else:
            self.cluster = RealCluster() if self.backend == "real" else Cluster()
        self.cluster.start()
        if self.backend == "real":
            self.host = self.cluster.node_ip
        if self.backend != "node":
            self.kubelet_jobs = JobRunner(self.cluster, {"certctl": self.binary})
            self.kubelet_jobs.start()
        self.cluster.kubectl("create", "namespace", NS)
        paths = {"vwc": f"{ADMISSION}/validatingwebhookconfigurations",
                 "mwc": f"{ADMISSION}/mutatingwebhookconfigurations",
                 "secrets": f"/api/v1/namespaces/{NS}/secrets",
                 "deployments": f"/apis/apps/v1/namespaces/{NS}/deployments",
                 "services": f"/api/v1/namespaces/{NS}/services",
                 "leases": f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"}
        if self.backend == "node":
            paths.update(pods=f"/api/v1/namespaces/{NS}/pods",
                         slices=f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices")
        self.informers = {key: Informer(self.cluster, path).start() for key, path in paths.items()}
        self.views = [CachedView(self.informers[key], API_SERVER_CACHE_DELAY).start()
                      for key in ("vwc", "mwc")]
        if self.backend == "node":
            self.pods = NodePods(self.informers["pods"], DEPLOYMENT)
            self.slices = NodeSlices(self.informers["slices"], self.informers["services"],
                                     self.informers["pods"])
            self.caller = KubeApiServerCaller(self.cluster,
                                              [self.informers["vwc"], self.informers["mwc"]],
                                              NS, self.ledger.failure, self.ledger.success)
            self._monitor.start()
            self.caller.start()
            return
        self.pods = Deployments(self.cluster, NS, self.informers["deployments"],
                                self.informers["services"],
                                {"certctl": self.binary, "webhook-server": WEBHOOK_SERVER},
                                self.workdir, self.say, seed=self.seed,
                                extra_env=self.certctl_env, host=self.host)
        self.pods.start()
        if self.backend == "real":
            self.slices = EndpointSliceWriter(self.cluster, NS, self.informers["services"],
                                              self._route, self.host, self.pods.errors).start()
            self.caller = KubeApiServerCaller(self.cluster,
                                              [self.informers["vwc"], self.informers["mwc"]],
                                              NS, self.ledger.failure, self.ledger.success)
        else:
            self.caller = AdmissionCaller(self.views, self._route, self.ledger.failure,
                                          self.ledger.success)
        self._monitor.start()
        self.caller.start()

    def cluster_up(self):
        if self.cluster is None:
            return False
        if self.backend == "node":
            return self.cluster.up
        return (self.cluster.tmp if self.backend == "real" else self.cluster.proc) is not None

    def new_volume_pod(self):
        """The webhook's own pod of the mode-job days, mounting the Secret."""
        if self.backend == "node":
            return SecretVolumePods(self.cluster, self.informers["pods"], VOLUME_DEPLOYMENT,
                                    SECRET, NS, WEBHOOK_SELECTOR, WEBHOOK_PRE_STOP).start()
        return VolumePod(self.informers["secrets"], SECRET, self.workdir,
                         "hook-server-7c9d4-qm2xt", host=self.host).start()

    def _control_plane_pids(self):
        if self.backend == "emulator":
            return {"emulator": self.cluster.proc.pid}
        pids = {}
        for name in ("kube-apiserver", "etcd"):
            try:
                with open(os.path.join(self.cluster.state_dir, f"{name}.pid"),
                          encoding="ascii") as f:
                    pids[name] = int(f.read())
            except (OSError, ValueError):
                pass
        return pids

    def close(self):
        self._stop.set()
        for part in (self.caller, self.slices, *self.views, self.pods, self.volume_pod):
            if part is not None:
                part.stop()
        if isinstance(self.pods, NodePods):
            self.pods.sample()
            self.rss.update(self.pods.peaks)
            if self.volume_pod is not None:
                self.rss.update(self.volume_pod.peaks)
        elif self.pods is not None:
            for pod in self.pods.gone:
                for container in pod.containers():
                    key = f"{container.name} of {pod.name}"
                    self.rss[key] = max(self.rss.get(key, 0), container.peak_kib)
        if isinstance(self.volume_pod, VolumePod):
            self.rss[f"webhook of {self.volume_pod.name}"] = self.volume_pod.peak_kib
        if self.cluster_up():
            for name, pid in self._control_plane_pids().items():
                self.rss[name] = peak_rss_kib(pid) or 0
        for informer in self.informers.values():
            informer.stop()
        if self.kubelet_jobs is not None:
            self.kubelet_jobs.stop(raise_errors=False)
        if self.backend == "real" and self.cluster_up():
            # The control plane's folder goes with it: keep its logs in the work folder.
            kept = os.path.join(self.workdir, "control-plane")
            os.makedirs(kept, exist_ok=True)
            for name in ("kube-apiserver.log", "etcd.log"):
                try:
                    shutil.copy(os.path.join(self.cluster.state_dir, name), kept)
                except OSError:
                    pass
        if self.cluster is not None:
            self.cluster.stop()

    def _route(self, namespace, service):
        """kube-proxy: the chart's ready pods the Service selects, and in the mode-job days
        the webhook's own pod behind the Service `hook` (its Deployment is not stored)."""
        found = self.pods.endpoints(namespace, service)
        pod = self.volume_pod
        routed = self.legacy_routed or (self.legacy_routed_until is not None
                                        and time.monotonic() < self.legacy_routed_until)
        if (routed and pod is not None and pod.is_ready
                and (namespace, service) == (NS, SERVICE)):
            found.append((pod.name, pod.port))
        return found

    # -- what the soak reads ----------------------------------------------------------------

    def secret_files(self):
        secret = self.informers["secrets"].get(SECRET)
        if secret is None:
            return None, {}
        data = secret.get("data") or {}
        return secret, {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}

    def called_hosts(self):
        """The names the webhook entries call, as the API server's cache holds them."""
        return {f"{service}.{namespace}.svc" for view in self.views for obj in view.items()
                for _, namespace, service, _ in entries(obj)}

    def leaf_names(self, pem):
        """The DNS names of a server certificate (parsed once per certificate)."""
        if pem not in self._names:
            leaf = x509.load_pem_x509_certificate(pem.encode())
            try:
                sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
                self._names[pem] = set(sans.value.get_values_for_type(x509.DNSName))
            except x509.ExtensionNotFound:
                self._names[pem] = set()
        return self._names[pem]

    def bundles(self):
        """The caBundles as the API server's cache holds them (what the calls trust)."""
        out = []
        for view in self.views:
            for obj in view.items():
                for hook in obj.get("webhooks") or []:
                    raw = (hook.get("clientConfig") or {}).get("caBundle") or ""
                    out.append(base64.b64decode(raw).decode(errors="replace"))
        return out

    def leader(self):
        lease = self.informers["leases"].get(f"{SECRET}-certctl")
        if lease is None:
            return None
        return self.pods.pod_of_identity((lease.get("spec") or {}).get("holderIdentity"))

    def steady(self):
        if self.slices is not None and not self.slices.in_sync(SLICES_SETTLED):
            return False  # kube-apiserver would not yet send the calls where the pods are
        secret, files = self.secret_files()
        if secret is None or "ca.crt" not in files:
            return False
        bundles = self.bundles()
        if not bundles or any(b != files["ca.crt"] for b in bundles):
            return False
        leaf = files.get("tls.crt")
        if not leaf or not self.called_hosts() <= self.leaf_names(leaf):
            return False  # the API server would find a name the certificate lacks
        if self.phase == "job":
            pod = self.volume_pod
            return (pod is not None and pod.is_ready and pod.folder is not None
                    and _read(pod.folder, "tls.crt") == leaf)
        deployment = self.informers["deployments"].get(DEPLOYMENT)
        if deployment is None:
            return False
        live = self.pods.live()
        desired = int(deployment["spec"].get("replicas", 1))
        if len(live) != desired or not all(p.ready for p in live):
            return False
        if any(p.template_hash != live[0].template_hash for p in live):
            return False
        return all(p.cert_dir is not None and _read(p.cert_dir, "tls.crt") == leaf
                   for p in live)

    def _watch_steadiness(self):
        while not self._stop.is_set():
            try:
                self.ledger.set_steady(self.steady())
                if self.pods is not None:
                    self.pods.sample()
            except Exception as e:  # noqa: BLE001 - reported, never hidden
                self.pods.errors.append(f"steadiness: {type(e).__name__}: {e}")
            self._stop.wait(0.1)

    def wait(self, predicate, what, bound=SETTLE_BOUND):
        deadline = time.monotonic() + bound
        while not predicate():
            if time.monotonic() > deadline:
                raise SoakError(f"{what}: not within {bound:g}s")
            time.sleep(0.05)

    def settle(self, event=None):
        """Waits until every event under way is repaired, then a seeded pause."""
        self.wait(lambda: not self.ledger.active, "steady after " +
                  (event.name if event else "the last event"))
        time.sleep(self.random.uniform(0.5, 1.5) * max(1.0, 2 * self.k))

    def certctl_unavailable(self, on):
        """The API server refuses every request of certctl's service account (`on`), or
        answers it again. The emulator answers 503; a real kube-apiserver is told by API
        Priority and Fairness: a FlowSchema puts the account in a priority level with no
        seats, whose requests are rejected (429) until it is deleted."""
        if self.backend == "emulator":
            if on:
                user_fault(self.cluster, CERTCTL_USER, status=503, count=10**9)
            else:
                self.cluster.clear_faults()
            return "503"
        name = "soak-certctl-unavailable"
        level = f"{FLOW_CONTROL}/prioritylevelconfigurations"
        schema = f"{FLOW_CONTROL}/flowschemas"
        if not on:
            for path in (f"{schema}/{name}", f"{level}/{name}"):
                resp = self.cluster.api("DELETE", path)
                if resp.status not in (200, 404):
                    raise SoakError(f"DELETE {path}: {resp.status} {resp.body[:200]!r}")
            return "429"
        account = CERTCTL_USER.rsplit(":", 2)
        for path, obj in (
                (level, {"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                         "kind": "PriorityLevelConfiguration", "metadata": {"name": name},
                         "spec": {"type": "Limited", "limited": {
                             "nominalConcurrencyShares": 0, "lendablePercent": 0,
                             "borrowingLimitPercent": 0,
                             "limitResponse": {"type": "Reject"}}}}),
                (schema, {"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                          "kind": "FlowSchema", "metadata": {"name": name},
                          "spec": {"priorityLevelConfiguration": {"name": name},
                                   "matchingPrecedence": 100,
                                   "distinguisherMethod": {"type": "ByUser"},
                                   "rules": [{
                                       "subjects": [{"kind": "ServiceAccount",
                                                     "serviceAccount": {
                                                         "namespace": account[1],
                                                         "name": account[2]}}],
                                       "resourceRules": [{
                                           "verbs": ["*"], "apiGroups": ["*"],
                                           "resources": ["*"], "clusterScope": True,
                                           "namespaces": ["*"]}],
                                       "nonResourceRules": [{"verbs": ["*"],
                                                             "nonResourceURLs": ["*"]}]}]}})):
            resp = self.cluster.api("POST", path, obj)
            if resp.status != 201:
                raise SoakError(f"POST {path}: {resp.status} {resp.body[:300]!r}")

        def in_force():  # the API server's flow-control controller has taken it up
            resp = self.cluster.api("GET", f"{schema}/{name}")
            conditions = (resp.json().get("status") or {}).get("conditions") or []
            return any(c.get("type") == "Dangling" and c.get("status") == "False"
                       for c in conditions)

        self.wait(in_force, "the FlowSchema in force", bound=30)
        return "429"

    # -- helm and kubectl -------------------------------------------------------------------

    def values(self, mode, **extra):
        duration = "{}s".format
        values = {
            "mode": mode,
            "webhook": {"service": self.service},
            "targets": {"validatingWebhooks": [VWC], "mutatingWebhooks": [MWC]},
            "certificate": {"caValidity": duration(self.ca_validity),
                            "certValidity": duration(self.cert_validity),
                            "renewBefore": duration(self.renew_before),
                            "caOverlap": duration(self.ca_overlap)},
            "logFormat": "text",
            "sidecar": {
                "replicas": self.replicas, "leaderElection": True, "resync": "1s",
                "readinessProbe": {"periodSeconds": 1, "failureThreshold": 3},
                "webhook": {"image": {"repository": "soak/webhook-server", "tag": "soak"},
                            "args": ["--cert-dir", "/tls", "--listen", "127.0.0.1:9443"],
                            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "https",
                                                           "scheme": "HTTPS"},
                                               "periodSeconds": 1}}},
        }
        if self.lease_times:
            lease, deadline, retry = map(duration, self.lease_times)
            values["sidecar"].update(leaseDuration=lease, leaseRenewDeadline=deadline,
                                     leaseRetryPeriod=retry)
        if self.backend == "node":  # the images scripts/kube-up.sh --node loaded
            values["image"] = {"repository": "localhost/certctl", "tag": "dev",
                               "pullPolicy": "Never"}
            values["sidecar"]["webhook"].update(
                image={"repository": "localhost/example-webhook", "tag": "dev",
                       "pullPolicy": "Never"},
                args=["--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key"])
        for key, value in extra.items():
            values[key] = value
        return values

    def helm(self, *args, values=None):
        path = os.path.join(self.helm_home, f"values-{time.monotonic_ns()}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(values or {}, f)
        proc = subprocess.run([find_helm(), *args, "-f", path], capture_output=True, text=True,
                              timeout=300, env=helm_env(self.helm_home, self.cluster.kubeconfig()))
        if proc.returncode != 0:
            raise SoakError(f"helm {' '.join(args)}: {proc.stdout}{proc.stderr}")
        return proc

    def kubectl(self, *args, input=None):
        return self.cluster.kubectl(*args, input=input)

    def webhook_service(self):
        """The webhook's own Service, before the chart serves it, with Helm's marks so that
        the chart takes it over in mode sidecar, as a user moving to the sidecar would let
        it: selector-less where the soak routes to the webhook's own pod itself, on the node
        selecting what the chart's Service will select (the webhook's own pods carry it)."""
        spec = {"ports": [{"name": "https", "port": 443, "targetPort": "https",
                           "protocol": "TCP"}]}
        if self.backend == "node":
            spec["selector"] = dict(WEBHOOK_SELECTOR)
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": SERVICE, "namespace": NS,
                             "labels": {"app.kubernetes.io/managed-by": "Helm"},
                             "annotations": {"meta.helm.sh/release-name": RELEASE,
                                             "meta.helm.sh/release-namespace": NS}},
                "spec": spec}

    def targets(self):
        """The user's webhook configurations: no caBundle, failing closed."""
        configs = [webhook_configuration("ValidatingWebhookConfiguration", VWC,
                                         [f"{VWC}.hook.example.com"], service=SERVICE,
                                         namespace=NS),
                   webhook_configuration("MutatingWebhookConfiguration", MWC,
                                         [f"{MWC}.hook.example.com"], service=SERVICE,
                                         namespace=NS)]
        for config in configs:
            for hook in config["webhooks"]:
                hook["failurePolicy"] = "Fail"
                hook["clientConfig"]["service"]["path"] = "/validate"
        return configs


def _read(folder, name):
    try:
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None
