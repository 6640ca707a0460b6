"""The columns of bench/fleet/run.py: `certctl controller` (as its Deployment runs it: in-cluster
configuration as a ServiceAccount with harness.fleet.CONTROLLER_RULES) and cert-manager's
cainjector (bench/fleet/cainjector, built from the Go module proxy into CERTCTL_CACHE_DIR on
first use, run with a kubeconfig of a ServiceAccount with the same rules). Each knows how to
start, be killed, and tell from its own metrics that it has gone through every object it
serves once since it started ("verified")."""

import hashlib
import os
import re
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "e2e"))
sys.path.insert(1, os.path.join(REPO, "bench", "peers"))

from columns import go_build, module_version, sha256_file  # noqa: E402
from harness.fleet import ClusterController  # noqa: E402
from harness.kubelet import ContainerProcess, free_ports  # noqa: E402

CAINJECTOR = os.path.join(HERE, "cainjector")
CM_MODULE = "github.com/cert-manager/cert-manager"
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_metrics(text):
    """[(name, labels text, value)] of a Prometheus text page."""
    samples = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            try:
                samples.append((match.group(1), match.group(2) or "", float(match.group(3))))
            except ValueError:
                pass
    return samples


def total(samples, name, label=""):
    """The sum of the samples named `name` whose labels contain `label`."""
    return sum(v for n, labels, v in samples if n == name and label in labels)


def cainjector_build():
    """Our main around cainjector (bench/fleet/cainjector), keyed by its files, with the
    version stamped in as cert-manager's release build does."""
    digest = hashlib.sha256()
    for file in sorted(os.listdir(CAINJECTOR)):
        if file.endswith((".go", ".mod", ".sum")):
            digest.update(file.encode() + b"\0" + bytes.fromhex(
                sha256_file(os.path.join(CAINJECTOR, file))))
    version = module_version(CAINJECTOR, CM_MODULE)
    return go_build(CAINJECTOR, "cainjector", digest.hexdigest(),
                    ldflags=f"-X {CM_MODULE}/pkg/util.AppVersion={version}")


class Tool:
    """One column's process: start() a new one, kill() it with SIGKILL, pid, metrics()."""

    name = title = ""
    account = ""        # the ServiceAccount: system:serviceaccount:NS:NAME
    style = ""          # the annotations its bed carries (bed.fleet_objects)
    issues = False      # it issues the Secrets (else they are there before it starts)
    has_readiness = True  # its /readyz means something (cainjector's is a ping)

    def __init__(self, cluster, workdir, binary):
        self.cluster, self.workdir, self.binary = cluster, workdir, binary
        self.runs = 0
        self.process = None
        os.makedirs(workdir, exist_ok=True)

    @property
    def user(self):
        return self.account

    @property
    def pid(self):
        return self.process.proc.pid

    def alive(self):
        return self.process is not None and self.process.alive()

    def stop(self):
        if self.process is not None:
            self.process.stop()

    def log(self):
        return self.process.log() if self.process else ""

    def units(self, plan):
        """How many reconciles mean every object it serves was gone through once."""
        raise NotImplementedError

    def verified(self, samples, plan):
        raise NotImplementedError


class Certctl(Tool):
    name = "certctl"
    title = "certctl controller"
    account = "system:serviceaccount:certctl-system:certctl-controller"
    style = "certctl"
    issues = True
    extra = []

    def __init__(self, cluster, workdir, binary, given=()):
        super().__init__(cluster, workdir, binary)
        self.given = list(given)   # --certctl-args of the driver
        self.version = subprocess.run([binary, "version"], capture_output=True, text=True,
                                      check=True).stdout.strip()

    def start(self):
        self.runs += 1
        self.process = ClusterController(self.binary, self.cluster, self.workdir,
                                         f"{self.name}-{self.runs}", self.account,
                                         list(self.extra) + list(self.given)).start()
        return self

    def kill(self):
        self.process.send(signal.SIGKILL)
        self.process.reap()

    def ready(self):
        return self.process.readyz()[0] == 200

    def metrics(self):
        status, body, _ = self.process.get("/metrics", port=self.process.metrics_port)
        return parse_metrics(body) if status == 200 else []

    def units(self, plan):
        return len(plan.secrets)   # a reconcile is of one Secret and its targets

    def verified(self, samples, plan):
        """Every watch listed, a reconcile per Secret done, none waiting to be."""
        return (total(samples, "certctl_ready") == 1 and
                total(samples, "certctl_controller_reconcile_total", 'result="done"') >=
                self.units(plan) and
                total(samples, "certctl_controller_queue", 'state="ready"') == 0)


class CertctlUnthrottled(Certctl):
    """certctl controller without its client-side rate limit (1,000 a second by default),
    as controller-runtime v0.24 leaves cainjector's client: the same bed as `certctl`."""

    name = "certctl-qps"
    title = "certctl controller --kube-api-qps 100000"
    extra = ["--kube-api-qps", "100000"]


class CertctlCertManager(Certctl):
    """certctl controller on cainjector's bed: cert-manager's annotation, Secrets that are
    there before it starts."""

    name = "certctl-cm"
    title = "certctl controller --cert-manager-annotations"
    style = "cert-manager"
    issues = False
    extra = ["--cert-manager-annotations"]


class Cainjector(Tool):
    name = "cainjector"
    title = "cert-manager cainjector"
    account = "system:serviceaccount:cert-manager:cainjector"
    style = "cert-manager"
    has_readiness = False

    def __init__(self, cluster, workdir, binary):
        super().__init__(cluster, workdir, binary)
        self.health_port, self.metrics_port = free_ports(2)
        self.version = f"cert-manager {module_version(CAINJECTOR, CM_MODULE)} " \
                       "(pkg/controller/cainjector, bench/fleet/cainjector)"

    def start(self):
        self.runs += 1
        self.process = ContainerProcess(
            [self.binary, "--health-addr", f"127.0.0.1:{self.health_port}",
             "--metrics-addr", f"127.0.0.1:{self.metrics_port}"],
            {"KUBECONFIG": self.cluster.kubeconfig(self.account)}, self.workdir,
            name=f"{self.name}-{self.runs}").start()
        return self

    def kill(self):
        self.process.stop(sig=signal.SIGKILL)

    def ready(self):
        return self.process.get("/readyz", self.health_port)[0] == 200

    def metrics(self):
        status, body = self.process.get("/metrics", self.metrics_port)
        return parse_metrics(body) if status == 200 else []

    def units(self, plan):
        return len(plan.configurations)   # a reconcile is of one configuration

    def verified(self, samples, plan):
        """A reconcile per configuration done, nothing queued or being worked on."""
        return (total(samples, "controller_runtime_reconcile_total", 'result="success"') >=
                self.units(plan) and
                total(samples, "workqueue_depth") == 0 and
                total(samples, "controller_runtime_active_workers") == 0)


COLUMNS = {tool.name: tool for tool in (Certctl, CertctlUnthrottled, CertctlCertManager,
                                        Cainjector)}
