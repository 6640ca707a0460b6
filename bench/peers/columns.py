"""The columns of bench/peers/run.py: how each tool is built, started or run to its end, and
what its Secret holds; and the short-lived CA the "CA near its end" row hands each of them."""

import base64
import datetime
import hashlib
import os
import signal
import subprocess
import sys
import threading

from harness.kubelet import ContainerProcess, free_ports
from harness.naive_rotation import publish_folder

HERE = os.path.dirname(os.path.abspath(__file__))
NS = "bench"
SERVICE = "hook"
SECRET = "webhook-server-cert"
CONFIG = "hook"
SCALE_LABEL = "bench.certctl.io/scale"
STEP_BOUND = 120.0   # seconds any step may take before the tool is judged not to manage it
PROPAGATION = 1.0    # seconds from a Secret's change to its volume's (the kubelet's delay)
# kube-webhook-certgen's module is refused by the Go module proxy (README), so it is built
# from a checkout of this tag; its go.sum pins every dependency, and its hash here makes
# sure the checkout is the tag the report names.
KWC_MODULE = "github.com/jkroepke/kube-webhook-certgen"
KWC_VERSION = "v1.7.3"
KWC_GO_SUM_SHA256 = "a6e4aeb7946f94a2927be61dc99d6c1c290e1d82f1c687c4ad157ced19d1947f"
CACHE = os.path.join(os.environ.get("CERTCTL_CACHE_DIR",
                                    os.path.expanduser("~/.cache/certctl")), "peers")


class StepFailed(RuntimeError):
    pass


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def go_build(folder, name, key, ldflags=""):
    """The program of a Go module folder, built once per `key` (what identifies the source)
    and Go version into CACHE, outside this clone and the source folder; Go's own caches
    are where `go env` puts them. Static (no cgo): the node backend runs it FROM scratch."""
    goversion = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True,
                               check=True).stdout.strip()
    digest = hashlib.sha256(f"{key}\0{goversion}\0{ldflags}\0static".encode()) \
        .hexdigest()[:12]
    out = os.path.join(CACHE, f"{name}-{digest}", name)
    if not os.access(out, os.X_OK):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        print(f"peers: building {name} (once per machine)", file=sys.stderr)
        subprocess.run(["go", "build", "-mod=readonly", "-trimpath", "-ldflags", ldflags,
                        "-o", out + ".tmp", "."], cwd=folder, check=True,
                       env=dict(os.environ, CGO_ENABLED="0"))
        os.replace(out + ".tmp", out)
    return out


def cert_controller_build():
    """Our main around cert-controller (bench/peers/cert-controller), keyed by its files."""
    folder = os.path.join(HERE, "cert-controller")
    digest = hashlib.sha256()
    for file in sorted(os.listdir(folder)):
        if file.endswith((".go", ".mod", ".sum")):
            digest.update(file.encode() + b"\0" + bytes.fromhex(
                sha256_file(os.path.join(folder, file))))
    return go_build(folder, "cert-controller", digest.hexdigest())


def kwc_build(source):
    """kube-webhook-certgen from a checkout of KWC_VERSION, its version stamped in as its
    release build does; a checkout of another version is refused (ValueError)."""
    found = sha256_file(os.path.join(source, "go.sum"))
    if found != KWC_GO_SUM_SHA256:
        raise ValueError(f"{source}/go.sum has sha256 {found}, not that of "
                         f"kube-webhook-certgen {KWC_VERSION}: check out that tag")
    return go_build(source, "kube-webhook-certgen", found,
                    ldflags=f"-X {KWC_MODULE}/core.Version={KWC_VERSION}")


def module_version(folder, module):
    with open(os.path.join(folder, "go.mod"), encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if len(words) >= 2 and module in words[:2]:
                return words[words.index(module) + 1]
    return "?"


class SecretVolume:
    """The kubelet's copy of the Secret in a folder: each new resourceVersion written
    PROPAGATION seconds later, as a new folder swapped in through `..data`; `items` maps
    the Secret's keys to file names, as a volume's `items` does."""

    def __init__(self, cluster, folder, items):
        self.cluster, self.folder, self.items = cluster, folder, items
        self.version = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="secret-volume", daemon=True)

    def _run(self):
        while not self._stop.is_set():
            resp = self.cluster.api("GET", f"/api/v1/namespaces/{NS}/secrets/{SECRET}")
            if resp.status == 200:
                secret = resp.json()
                version = secret["metadata"]["resourceVersion"]
                if version != self.version and not self._stop.wait(PROPAGATION):
                    data = secret.get("data") or {}
                    publish_folder(self.folder, {self.items.get(k, k): base64.b64decode(v)
                                                 .decode() for k, v in data.items()})
                    self.version = version
            self._stop.wait(0.1)

    def start(self):
        os.makedirs(self.folder, exist_ok=True)
        self._thread.start()
        return self

    def retarget(self, folder):
        """Another (empty) folder, filled from the Secret as it is now."""
        os.makedirs(folder, exist_ok=True)
        self.folder, self.version = folder, None

    def stop(self):
        self._stop.set()
        self._thread.join(10)


class Tool:
    """One column: how the tool is started (a controller) or run to its end (a hook), the
    names of its Secret's keys, whether it writes the webhook's folder itself."""

    name = ""
    title = ""
    hook = False
    versus = None        # the certctl column this one's ratio is taken against
    # The Secret's data keys: CA, CA key (None: not kept), certificate, key.
    keys = {"ca": "ca.crt", "ca_key": "ca.key", "cert": "tls.crt", "key": "tls.key"}
    writes_cert_dir = False

    def __init__(self, cluster, workdir, binary):
        self.cluster, self.workdir, self.binary = cluster, workdir, binary
        self.user = f"system:serviceaccount:{NS}:{self.name}"
        self.cert_dir = os.path.join(workdir, "certs-0")
        self.health_port, = free_ports(1)
        self.process = None
        self.stopped = True   # stopped on purpose: its exit is no failure
        self.runs = 0
        self.volume = None
        if not self.writes_cert_dir:
            files = {self.keys["ca"]: "ca.crt", self.keys["cert"]: "tls.crt",
                     self.keys["key"]: "tls.key"}
            self.volume = SecretVolume(cluster, self.cert_dir, files).start()

    def new_cert_dir(self):
        """An empty folder for the webhook server, as a new pod gets."""
        self.cert_dir = os.path.join(self.workdir, f"certs-{self.runs}")
        if self.volume is not None:
            self.volume.retarget(self.cert_dir)

    def prepare(self, bed):
        """What the tool's own install manifests create before it starts."""

    def argv(self, scale):
        """A controller's command line; `scale`: the names of the scale row's targets."""
        raise NotImplementedError

    def hook_argvs(self, scale):
        """A hook's processes, one after another as its Jobs run."""
        raise NotImplementedError

    def env(self):
        return {"KUBECONFIG": self.cluster.kubeconfig(self.user)}

    def _spawn(self, argv):
        self.runs += 1
        self.process = ContainerProcess(argv, self.env(), self.workdir,
                                        name=f"{self.name}-{self.runs}").start()

    def start(self, scale=None):
        self._spawn(self.argv(scale))
        self.stopped = False
        return self

    def run_hook(self, scale=None):
        """The exit codes of the hook's processes; the first that fails ends the hook, as a
        failed Helm hook ends the install."""
        codes = []
        for argv in self.hook_argvs(scale):
            self._spawn(argv)
            try:
                codes.append(self.process.proc.wait(STEP_BOUND))
            except subprocess.TimeoutExpired:
                raise StepFailed(f"{self.name} ran past {STEP_BOUND:g}s\n{self.log()[-1500:]}")
            if codes[-1]:
                break
        return codes

    def ready(self):
        status, _ = self.process.get("/readyz", self.health_port)
        return status == 200

    def kill(self):
        self.process.stop(sig=signal.SIGKILL, grace=5.0)

    def stop(self):
        self.stopped = True
        if self.process is not None:
            self.process.stop()

    def close(self):
        self.stop()
        if self.volume is not None:
            self.volume.stop()

    def log(self):
        return self.process.log() if self.process else ""


class Certctl(Tool):
    name = title = "certctl"
    writes_cert_dir = True

    def __init__(self, cluster, workdir, binary):
        super().__init__(cluster, workdir, binary)
        self.version = subprocess.run([binary, "version"], capture_output=True, text=True,
                                      check=True).stdout.strip()

    def common(self, scale):
        targets = (["--webhook-selector", f"{SCALE_LABEL}=yes"] if scale else
                   ["--validating-webhook", CONFIG, "--mutating-webhook", CONFIG])
        return ["--kubeconfig", self.cluster.kubeconfig(self.user), "-n", NS,
                "--secret", SECRET, "--service", SERVICE] + targets

    def argv(self, scale):
        return [self.binary, "run"] + self.common(scale) + [
            "--cert-dir", self.cert_dir, "--health-addr", f"127.0.0.1:{self.health_port}",
            "--metrics-addr", ""]


class CertctlJob(Certctl):
    """`certctl job` (both phases in one process), read from the Secret's volume."""

    name = "certctl-job"
    title = "certctl job"
    hook = True
    writes_cert_dir = False

    def hook_argvs(self, scale):
        return [[self.binary, "job"] + self.common(scale) +
                ["--failure-policy-once-ready", "Fail"]]


class CertController(Tool):
    """open-policy-agent/cert-controller's rotator in a manager of ours
    (bench/peers/cert-controller), reading the Secret's volume."""

    name = title = "cert-controller"
    versus = "certctl"

    def __init__(self, cluster, workdir, binary):
        super().__init__(cluster, workdir, binary)
        self.version = self.version_of()

    @staticmethod
    def version_of():
        return "open-policy-agent/cert-controller " + module_version(
            os.path.join(HERE, "cert-controller"), "github.com/open-policy-agent/cert-controller")

    def prepare(self, bed):
        # The rotator fills a Secret it is given and exits without one: the manifests of
        # those who embed it (Gatekeeper's among them) ship it empty.
        bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": SECRET, "namespace": NS}})

    def argv(self, scale):
        # Its API takes a list of configurations by name: the scale row names them all.
        validating, mutating = (",".join(scale), "") if scale else (CONFIG, CONFIG)
        return [self.binary, "--namespace", NS, "--secret", SECRET, "--service", SERVICE,
                "--cert-dir", self.cert_dir, "--validating", validating,
                "--mutating", mutating, "--health-addr", f"127.0.0.1:{self.health_port}"]


class KubeWebhookCertgen(Tool):
    """kube-webhook-certgen as ingress-nginx's hook Jobs run it: `create` (the Secret with
    ca, cert and key, pre-install), then `patch` (the caBundle and failurePolicy of the
    configurations of one name, post-install). It targets one name a process, so the scale
    row runs a `patch` per configuration."""

    name = "kube-webhook-certgen"
    title = "kube-webhook-certgen"
    hook = True
    versus = "certctl-job"
    keys = {"ca": "ca", "ca_key": None, "cert": "cert", "key": "key"}
    version = f"jkroepke/kube-webhook-certgen {KWC_VERSION}"

    def hook_argvs(self, scale):
        common = ["--namespace", NS, "--secret-name", SECRET,
                  "--kubeconfig", self.cluster.kubeconfig(self.user)]
        if scale:
            return [[self.binary, "patch", "--webhook-name", name, "--patch-mutating=false",
                     "--patch-failure-policy=Fail"] + common for name in scale]
        return [[self.binary, "create", "--host", f"{SERVICE},{SERVICE}.{NS}.svc"] + common,
                [self.binary, "patch", "--webhook-name", CONFIG,
                 "--patch-failure-policy=Fail"] + common]


def short_lived_pair(secret, keys, ca_seconds):
    """The tool's Secret data with a CA that has `ca_seconds` of life left and a leaf from
    it valid for a year, in the key type, key encoding and names of the tool's own pair
    (so nothing but the CA's end asks for a change); and the CA in PEM, and its end."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    own = x509.load_pem_x509_certificate(base64.b64decode(secret["data"][keys["cert"]]))
    own_key = base64.b64decode(secret["data"][keys["key"]])
    is_rsa = isinstance(own.public_key(), rsa.RSAPublicKey)
    encoding = serialization.PrivateFormat.PKCS8 if b"BEGIN PRIVATE" in own_key else \
        serialization.PrivateFormat.TraditionalOpenSSL
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    ca_end = now + datetime.timedelta(seconds=ca_seconds)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{SERVICE}-ca-ending")])

    def issue(subject, key, signer, not_after, ca, *extensions):
        usage = x509.KeyUsage(not ca, False, not ca and is_rsa, False, False, ca, ca, False,
                              False)
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(not_after)
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), True)
                   .add_extension(usage, True))
        for extension in extensions:
            builder = builder.add_extension(extension, False)
        return builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)

    def new_key():
        return rsa.generate_private_key(65537, 2048) if is_rsa else \
            ec.generate_private_key(ec.SECP256R1())

    def key_pem(key):
        return key.private_bytes(serialization.Encoding.PEM, encoding,
                                 serialization.NoEncryption())

    ca_key, leaf_key = new_key(), new_key()
    ca = issue(ca_name, ca_key, ca_key, ca_end, True)
    leaf = issue(own.subject, leaf_key, ca_key, now + datetime.timedelta(days=365), False,
                 x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                 own.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    files = {keys["ca"]: ca, keys["cert"]: leaf, keys["key"]: key_pem(leaf_key)}
    if keys["ca_key"]:
        files[keys["ca_key"]] = key_pem(ca_key)
    return files, ca, ca_end.replace(tzinfo=datetime.timezone.utc).timestamp()
