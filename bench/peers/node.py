"""bench/peers/run.py --backend node: each tool as the pods it ships as, on one real node
(scripts/kube-up.sh --node: the kubelet, containerd, kube-controller-manager and
kube-scheduler), so that what a cluster adds to an install is in its figures: the scheduler,
the image's start, the probes, and for the webhooks that read the Secret through a volume,
the kubelet's own refresh of that volume (its pod sync, a minute by default).

Every install gets a namespace of its own, named for the tool and the attempt, holding one
ValidatingWebhookConfiguration of the same name that every ConfigMap create in it meets
(empty caBundle, failurePolicy Fail, the Service `hook`); the webhook server is the example
webhook (examples/webhook) in every column. The columns, as their users install them:

- certctl: the chart in mode sidecar (examples/webhook/deploy/values.yaml), `helm install`;
- cert-controller: a Deployment of two containers, the rotator (bench/peers/cert-controller)
  and the webhook, both mounting the Secret its manifests ship empty;
- certctl job: the webhook's Deployment, which mounts the Secret, then `helm install` of the
  chart in mode job (examples/webhook/deploy/job-values.yaml): two hook Jobs;
- kube-webhook-certgen: the webhook's Deployment, then its `create` and `patch` Jobs one after
  the other, as Helm runs ingress-nginx's hooks.

The webhook's readiness probe is the example's (every 2 s), and so is that of cert-controller's
/readyz (Gatekeeper leaves its at the kubelet's 10 s).
"""

import collections
import contextlib
import hashlib
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.request

from harness.api_server import dry_run_admission
from harness.helm import REPO, find_helm, helm_env
from harness.node import NodeCluster, NodeError
from soak.workloads import peak_rss_kib
from columns import SECRET, SERVICE, STEP_BOUND, StepFailed
from measure import POLL, Caller, cpu_seconds, wait_for

CHART = os.path.join(REPO, "manifests", "helm", "certctl")
EXAMPLE = os.path.join(REPO, "examples", "webhook", "deploy")
CERTCTL_IMAGE = "localhost/certctl:dev"   # scripts/kube-up.sh --node loads both
WEBHOOK_IMAGE = "localhost/example-webhook:dev"
WEBHOOK_PODS = "app.kubernetes.io/component=webhook"
HEALTH_PORT = 8081   # /readyz of certctl's chart and of cert-controller's manager
RELEASE = "bench"
ADMISSION = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
NONROOT = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
           "seccompProfile": {"type": "RuntimeDefault"}}
LOCKED = {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
          "capabilities": {"drop": ["ALL"]}}
# The rights each peer's own account gets: the same for both, as in the process backend.
NAMESPACED_RULES = [
    {"apiGroups": [""], "resources": ["secrets", "events", "configmaps", "services"],
     "verbs": ["*"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
     "verbs": ["get", "list", "watch"]}]
CLUSTER_RULES = [
    {"apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
     "verbs": ["get", "list", "watch", "update", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]


class Form:
    """The node backend's share of run.py's form: installs (the median), the steady window
    (a minute: a controller's idle cost shows in it), one restart (the kubelet backs off from
    the second crash on)."""

    def __init__(self, form):
        self.quick = form.quick
        self.installs = form.installs
        self.steady = 3 if form.quick else 60


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load_image(node, name, binary):
    """A static executable as the image localhost/NAME:dev (FROM scratch, its user 65532),
    built when podman holds none of this executable, then loaded into the node."""
    image = f"localhost/{name}:dev"
    digest = sha256_file(binary)
    held = subprocess.run(["podman", "image", "inspect", "--format",
                           '{{index .Labels "io.certctl.source"}}', image],
                          capture_output=True, text=True).stdout.strip()
    if held != digest:
        with tempfile.TemporaryDirectory() as context:
            shutil.copy(binary, os.path.join(context, name))
            containerfile = (f"FROM scratch\nCOPY {name} /{name}\nUSER 65532:65532\n"
                             f'ENTRYPOINT ["/{name}"]\n')
            subprocess.run(["podman", "build", "--quiet", "--network", "none", "--label",
                            f"io.certctl.source={digest}", "-t", image, "-f", "-", context],
                           input=containerfile, text=True, capture_output=True, check=True)
    archive = os.path.join(node.tmp, "node", f"{name}.tar")
    subprocess.run(["podman", "save", "--quiet", "-o", archive, image], check=True)
    try:
        node.ctr("images", "import", archive)
    finally:
        os.remove(archive)
    return image


def webhook_container():
    return {"name": "webhook", "image": WEBHOOK_IMAGE, "imagePullPolicy": "Never",
            "args": ["--tls-cert-file=/tls/tls.crt", "--tls-private-key-file=/tls/tls.key"],
            "ports": [{"name": "https", "containerPort": 9443}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "https",
                                           "scheme": "HTTPS"}, "periodSeconds": 2},
            "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}],
            "securityContext": LOCKED}


def webhook_deployment(ns, items=None, beside=None, account=None):
    """The webhook's Deployment and Service `hook`, mounting the Secret (`items`: its keys
    mapped to the file names the webhook reads), `beside`: more containers in its pod."""
    volume = {"name": "tls", "secret": {"secretName": SECRET}}
    if items:
        volume["secret"]["items"] = [{"key": k, "path": p} for k, p in items.items()]
    labels = {"app.kubernetes.io/name": "webhook", "app.kubernetes.io/component": "webhook"}
    pod = {"securityContext": NONROOT, "containers": [webhook_container()] + (beside or []),
           "volumes": [volume], "automountServiceAccountToken": account is not None}
    if account:
        pod["serviceAccountName"] = account
    return [{"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": SERVICE, "namespace": ns},
             "spec": {"selector": labels,
                      "ports": [{"name": "https", "port": 443, "targetPort": "https"}]}},
            {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "webhook", "namespace": ns},
             "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                      "template": {"metadata": {"labels": labels}, "spec": pod}}}]


def account(ns, name):
    """A ServiceAccount with the peers' rights, in a Role and a ClusterRole of its own."""
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
    cluster_name = f"{ns}-{name}"
    return [{"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": name, "namespace": ns}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": name, "namespace": ns}, "rules": NAMESPACED_RULES},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": name, "namespace": ns}, "subjects": subject,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": name}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": cluster_name}, "rules": CLUSTER_RULES},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": cluster_name}, "subjects": subject,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": cluster_name}}]


class Column:
    """One tool on the node: what its install applies, and what it then runs (a Helm
    install, hook Jobs); a controller's container in the webhook's pod."""

    name = title = ""
    hook = False
    versus = None
    container = None

    def __init__(self, bed):
        self.bed = bed

    def objects(self, ns):
        """What the install applies first (the webhook's own objects among them)."""
        return []

    def run(self, ns):
        """The install's steps after that; StepFailed when one fails."""

    def helm(self, ns, values, *settings):
        argv = [find_helm(), "install", RELEASE, CHART, "-n", ns, "-f",
                os.path.join(EXAMPLE, values), "--timeout", f"{STEP_BOUND:g}s",
                "--set", f"webhook.service={SERVICE}",
                "--set", f"targets.validatingWebhooks={{{ns}}}", *settings]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_BOUND + 30,
                              env=helm_env(self.bed.helm_home, self.bed.node.kubeconfig()))
        if proc.returncode:
            raise StepFailed(f"{self.name}: helm install: {proc.stderr[-1500:]}")


class Certctl(Column):
    name = title = "certctl"
    container = "certctl"

    def run(self, ns):
        self.helm(ns, "values.yaml")


class CertController(Column):
    name = title = "cert-controller"
    versus = "certctl"
    container = "cert-controller"

    def objects(self, ns):
        rotator = {"name": self.container, "image": self.bed.images[self.name],
                   "imagePullPolicy": "Never",
                   "args": ["--namespace", ns, "--secret", SECRET, "--service", SERVICE,
                            "--cert-dir", "/tls", "--validating", ns,
                            "--health-addr", f":{HEALTH_PORT}"],
                   "ports": [{"name": "health", "containerPort": HEALTH_PORT}],
                   "readinessProbe": {"httpGet": {"path": "/readyz", "port": "health"},
                                      "periodSeconds": 2},
                   "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}],
                   "securityContext": LOCKED}
        # The rotator fills the Secret it is given: its users' manifests ship it empty.
        empty = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": SECRET, "namespace": ns}}
        return account(ns, self.name) + [empty] + webhook_deployment(
            ns, beside=[rotator], account=self.name)


class CertctlJob(Column):
    name = "certctl-job"
    title = "certctl job"
    hook = True

    def objects(self, ns):
        return webhook_deployment(ns)

    def run(self, ns):
        self.helm(ns, "job-values.yaml")


class KubeWebhookCertgen(Column):
    name = title = "kube-webhook-certgen"
    hook = True
    versus = "certctl-job"

    def objects(self, ns):
        return account(ns, self.name) + webhook_deployment(
            ns, items={"ca": "ca.crt", "cert": "tls.crt", "key": "tls.key"})

    def job(self, ns, name, args):
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"backoffLimit": 0, "template": {"spec": {
                    "serviceAccountName": self.name, "restartPolicy": "Never",
                    "securityContext": NONROOT,
                    "containers": [{"name": name, "image": self.bed.images[self.name],
                                    "imagePullPolicy": "Never", "securityContext": LOCKED,
                                    "args": args + ["--namespace", ns,
                                                    "--secret-name", SECRET]}]}}}}

    def run(self, ns):
        self.bed.run_job(self.job(ns, "create", [
            "create", "--host", f"{SERVICE},{SERVICE}.{ns}.svc"]))
        self.bed.run_job(self.job(ns, "patch", [
            "patch", "--webhook-name", ns, "--patch-mutating=false",
            "--patch-failure-policy=Fail"]))


COLUMNS = [Certctl, CertController, CertctlJob, KubeWebhookCertgen]


class Bed:
    """The node, and per install a namespace with its configuration."""

    def __init__(self, workdir, images):
        self.node = NodeCluster(os.path.join(workdir, "node"))
        self.helm_home = os.path.join(workdir, "helm")
        self.peer_binaries = images
        self.images = {}
        self.ns = None

    def __enter__(self):
        try:
            self.node.start()
            for name, binary in self.peer_binaries.items():
                self.images[name] = load_image(self.node, name, binary)
        except BaseException:
            with contextlib.suppress(NodeError):  # the first error is the one to see
                self.node.down()  # a half-started node leaves nothing behind either
            raise
        return self

    def __exit__(self, *exc):
        self.node.down()

    def new_namespace(self, ns):
        """The namespace and the configuration every ConfigMap create in it meets; the one
        before is deleted in the background (its pods stop while this install runs)."""
        if self.ns is not None:
            self.node.kubectl("delete", "namespace", self.ns, "--wait=false")
            self.node.api("DELETE", f"{ADMISSION}/{self.ns}")
        self.ns = ns
        self.node.kubectl("create", "namespace", ns)
        self.node.apply({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": ns},
            "webhooks": [{
                "name": "configmaps.bench.certctl.io", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 5,
                "clientConfig": {"service": {"name": SERVICE, "namespace": ns,
                                             "path": "/validate", "port": 443}},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                           "operations": ["CREATE"], "resources": ["configmaps"]}]}]})

    def admit(self):
        """One admission call in the current namespace: (True, "") or (False, why)."""
        try:
            status, message = dry_run_admission(self.node, self.ns, "call", timeout=30)
        except OSError as e:
            return False, str(e)
        return status == 201, message

    def until_admitted(self, began, what):
        """Seconds from `began` (monotonic) to the first admitted call."""
        answer = ""
        while time.monotonic() - began < STEP_BOUND:
            ok, answer = self.admit()
            if ok:
                return time.monotonic() - began
            time.sleep(POLL)
        raise StepFailed(f"{what}: no admission call succeeded within {STEP_BOUND:g}s: "
                         f"{answer[:300]}\n{self.describe()}")

    def run_job(self, job):
        """Creates a Job and waits for it to succeed, as Helm waits for a hook's."""
        self.node.apply(job)
        path = (f"/apis/batch/v1/namespaces/{job['metadata']['namespace']}/jobs/"
                f"{job['metadata']['name']}")
        status = {}
        deadline = time.monotonic() + STEP_BOUND
        while time.monotonic() < deadline:
            status = self.node.api("GET", path).json().get("status", {})
            if status.get("succeeded"):
                return
            if status.get("failed"):
                break
            time.sleep(0.1)
        logs = self.node.kubectl("logs", "-n", self.ns, f"job/{job['metadata']['name']}",
                                 check=False).stdout
        raise StepFailed(f"Job {job['metadata']['name']}: {status}\n{logs[-1500:]}")

    def webhook_pod(self):
        """The webhook's running pod (the only one not ending)."""
        pods = [p for p in self.node.get("pods", "-n", self.ns, "-l", WEBHOOK_PODS)["items"]
                if not p["metadata"].get("deletionTimestamp")]
        if len(pods) != 1:
            raise StepFailed(f"{len(pods)} webhook pods in {self.ns}\n{self.describe()}")
        return pods[0]

    def requests(self):
        """Requests of the namespace's service accounts (the tool's) since the last reset:
        their number, and their count by verb and resource."""
        users = f"system:serviceaccount:{self.ns}:"
        entries = [e for e in self.node.request_log()["requests"]
                   if e["user"].startswith(users)]
        return len(entries), dict(collections.Counter(f"{e['verb']} {e['resource']}"
                                                      for e in entries))

    def describe(self):
        proc = self.node.kubectl("get", "pods,jobs", "-n", self.ns, "-o", "wide", check=False)
        return proc.stdout[-1500:]


def readyz(address):
    try:
        with urllib.request.urlopen(f"http://{address}:{HEALTH_PORT}/readyz", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


# --- the steps -----------------------------------------------------------------------------

def install(bed, column, form, figures, say):
    """From a new namespace (no Secret, an empty caBundle, no pod) to the first admitted
    call: the median of form.installs installs, each in a namespace of its own."""
    totals, hooks = [], []
    for attempt in range(1, form.installs + 1):
        ns = f"{column.name}-{attempt}"
        bed.new_namespace(ns)
        bed.node.reset_request_log()
        objects = column.objects(ns)
        began = time.monotonic()
        if objects:
            bed.node.apply(objects)
        column.run(ns)
        hooks.append(time.monotonic() - began)
        totals.append(bed.until_admitted(began, f"install {ns}"))
    figures["install_s"], figures["install_attempts_s"] = statistics.median(totals), totals
    figures["install_requests"], figures["install_by_verb"] = bed.requests()
    if column.hook:
        figures["hook_s"] = statistics.median(hooks)
    say(f"{column.name} (node): first admitted call after {figures['install_s']:.2f}s "
        f"(median of {', '.join(f'{t:.2f}' for t in totals)})")


def steady(bed, column, form, figures, say):
    """The controller's container over form.steady seconds: peak RSS, CPU, requests."""
    pod = bed.webhook_pod()
    pid = bed.node.container_init_pid(bed.ns, pod["metadata"]["name"], column.container)
    bed.node.reset_request_log()
    cpu_before = cpu_seconds(pid)
    time.sleep(form.steady)
    figures["steady_cpu_s"] = cpu_seconds(pid) - cpu_before
    figures["steady_rss_kib"] = peak_rss_kib(pid)
    figures["steady_requests"], figures["steady_by_verb"] = bed.requests()
    say(f"{column.name} (node): steady {figures['steady_rss_kib']} KiB, "
        f"{figures['steady_requests']} requests in {form.steady} s")


def restart(bed, column, form, figures, say):
    """The controller's process killed (SIGKILL): the kubelet starts its container again;
    the time to its /readyz 200, and the calls that failed meanwhile (the pod leaves the
    Service's endpoints while a container of it is not ready)."""
    pod = bed.webhook_pod()
    address = pod["status"]["podIP"]
    pid = bed.node.container_init_pid(bed.ns, pod["metadata"]["name"], column.container)
    with Caller(bed) as caller:
        time.sleep(1.0)  # calls before the kill: the webhook answered them
        began = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        if wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 10, interval=0.005) is None:
            raise StepFailed(f"restart: process {pid} outlived SIGKILL")
        if wait_for(lambda: readyz(address), STEP_BOUND, interval=0.01) is None:
            raise StepFailed(f"restart: not ready within {STEP_BOUND:g}s\n{bed.describe()}")
        figures["restart_s"] = time.monotonic() - began
        # Until the pod is back in the Service's endpoints, as the API server sees them.
        bed.until_admitted(time.monotonic(), "restart")
        time.sleep(1.0)
    caller.record(figures, "restart")
    say(f"{column.name} (node): ready {figures['restart_s']:.2f}s after SIGKILL, "
        f"{caller.failed} of {caller.calls} calls failed")


CONTROLLER_STEPS = [install, steady, restart]
HOOK_STEPS = [install]


def rows(form):
    """The rows of the node backend's report, as run.rows gives the process backend's."""
    return [
        (f"install: start to the first admitted call (median of {form.installs})",
         "install_s", "s", None),
        ("install: a hook's Jobs (Helm's install), start to their end", "hook_s", "s", None),
        ("install: API requests of the tool's accounts until then", "install_requests", "",
         None),
        (f"steady: peak RSS of the tool's container ({form.steady} s)", "steady_rss_kib",
         "KiB", None),
        ("steady: CPU seconds", "steady_cpu_s", "s", None),
        ("steady: API requests", "steady_requests", "", None),
        ("restart: SIGKILL to ready (the kubelet restarts the container)", "restart_s", "s",
         None),
        ("restart: admission calls failed meanwhile", "restart_failed", "", "restart_calls")]


def measure(binaries, versions, run_form, workdir, say):
    """Every column on one node: the figures of each (by name), and the node form."""
    form = Form(run_form)
    peers = {kind.name: binary for kind, binary in binaries.items()
             if binary is not None and kind.name in ("cert-controller", "kube-webhook-certgen")}
    results = {}
    with Bed(workdir, peers) as bed:
        for column_kind in COLUMNS:
            figures = {"version": versions.get(column_kind.name, "?")}
            results[column_kind.name] = figures
            if column_kind.name not in ("certctl", "certctl-job") and \
                    column_kind.name not in bed.images:
                figures["not_built"] = True
                continue
            column = column_kind(bed)
            try:
                for step in HOOK_STEPS if column.hook else CONTROLLER_STEPS:
                    step(bed, column, form, figures, say)
            except StepFailed as e:
                figures["failed"] = str(e)
    return results, form
