"""The fleet of bench/fleet/run.py on one control plane: what it holds (`Plan`), the objects
made from it (the annotated Services and configurations, the CA Secrets a cainjector column
injects from, and the bystanders nobody annotated), and what the driver reads back: a watch
of the annotated configurations and their Secrets (`Tracker`), and `verify`, which reads
every annotated object again and compares each caBundle with its Secret's ca.crt."""

import base64
import collections
import concurrent.futures
import datetime
import os
import threading
import time
import urllib.parse

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
KINDS = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")
KIND_OF = {"validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
           "mutatingwebhookconfigurations": "MutatingWebhookConfiguration"}
# On the configurations a tool must inject, and on the CA Secrets the driver creates: what the
# driver's own watches select. The tools never look at it.
FLEET_LABEL = "bench.certctl.io/fleet"
ISSUED_LABEL = "certctl.io/serving-cert-for"   # on the Secrets `certctl controller` issues
CERTCTL_SERVING = "certctl.io/serving-cert-secret"
CERTCTL_INJECT = "certctl.io/inject-ca-from"
CM_INJECT = "cert-manager.io/inject-ca-from-secret"
CM_ALLOW = "cert-manager.io/allow-direct-injection"
CREATE_WORKERS = 8
BYSTANDER_SECRET_BYTES = 1024


class BedError(RuntimeError):
    pass


class Sizes:
    """How many of each object; the issue's counts by default."""

    FULL = {"namespaces": 100, "services": 1000, "configurations": 1000,
            "other_services": 5000, "other_secrets": 5000, "other_configurations": 2000,
            "drift": 100}
    QUICK = {"namespaces": 4, "services": 20, "configurations": 20, "other_services": 40,
             "other_secrets": 40, "other_configurations": 20, "drift": 5}

    def __init__(self, quick=False, **given):
        for key, default in (self.QUICK if quick else self.FULL).items():
            value = given.get(key)
            setattr(self, key, default if value is None else value)
        if self.namespaces < 1 or self.services < 1 or self.configurations < 1:
            raise ValueError("at least one namespace, Service and configuration")
        self.drift = min(self.drift, self.configurations)

    def as_dict(self):
        return {key: getattr(self, key) for key in self.FULL}


class Plan:
    """Names: Service i (`svc-NNNN`, namespace i mod N) asks for the Secret `svc-NNNN-tls`;
    configuration i (`fleet-NNNN`, validating when i is even, mutating when odd, one entry
    calling Service i mod S) injects from that Service's Secret. Bystanders are named
    `other-NNNNN`."""

    def __init__(self, sizes):
        self.sizes = sizes
        self.namespaces = [f"fleet-{i:03d}" for i in range(sizes.namespaces)]
        self.services = [(self.namespaces[i % sizes.namespaces], f"svc-{i:04d}")
                         for i in range(sizes.services)]
        self.secrets = [(ns, f"{name}-tls") for ns, name in self.services]
        self.configurations = []   # (resource, name, namespace, service, secret key)
        for i in range(sizes.configurations):
            ns, service = self.services[i % sizes.services]
            self.configurations.append((KINDS[i % 2], f"fleet-{i:04d}", ns, service,
                                        f"{ns}/{service}-tls"))

    def secret_keys(self):
        return [f"{ns}/{name}" for ns, name in self.secrets]

    def configuration_keys(self):
        return [f"{resource}/{name}" for resource, name, *_ in self.configurations]


# --- objects -----------------------------------------------------------------------------

def service(ns, name, annotations=None):
    """A headless Service (the bed's Service range has room for 253 cluster IPs only)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"clusterIP": "None", "selector": {"app": name},
                     "ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}


def configuration(resource, name, ns, service_name, annotations=None, labels=None,
                  ca_bundle=None):
    """A configuration with one entry calling `service_name`, for a resource nothing creates
    (the API server never calls it) and failurePolicy Ignore."""
    client = {"service": {"namespace": ns, "name": service_name, "path": "/admit",
                          "port": 443}}
    if ca_bundle:
        client["caBundle"] = base64.b64encode(ca_bundle).decode()
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": KIND_OF[resource],
            "metadata": {"name": name, "annotations": annotations or {},
                         "labels": labels or {}},
            "webhooks": [{"name": f"{service_name}.{ns}.bench.certctl.io",
                          "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Ignore", "timeoutSeconds": 5,
                          "clientConfig": client,
                          "rules": [{"apiGroups": ["bench.certctl.io"], "apiVersions": ["v1"],
                                     "operations": ["CREATE"], "resources": ["nothings"]}]}]}


def ca_pairs(plan):
    """A CA and a server certificate from it for each Secret of the plan, as `certctl
    controller` would issue them (ECDSA P-256, the CA `<service>-ca`, the leaf naming the
    Service's four names): {"ns/name": {"ca.crt", "tls.crt", "tls.key"}} in PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=3650)
    pairs = {}
    for (ns, service_name), (_, secret) in zip(plan.services, plan.secrets):
        ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
            ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service_name}-ca")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
              .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(start).not_valid_after(end)
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
              .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                           False, False), True)
              .sign(ca_key, hashes.SHA256()))
        names = [f"{service_name}.{ns}.svc", service_name, f"{service_name}.{ns}",
                 f"{service_name}.{ns}.svc.cluster.local"]
        leaf = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
                .issuer_name(ca_name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
                .add_extension(x509.KeyUsage(True, False, False, False, False, False, False,
                                             False, False), True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                               False)
                .sign(ca_key, hashes.SHA256()))
        pem = serialization.Encoding.PEM
        pairs[f"{ns}/{secret}"] = {
            "ca.crt": ca.public_bytes(pem), "tls.crt": leaf.public_bytes(pem),
            "tls.key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())}
    return pairs


def fleet_objects(plan, style, pairs, bystander_ca):
    """(path, object) of everything the bed holds before the tool starts. `style`:
    "certctl" annotates the Services and configurations for `certctl controller`;
    "cert-manager" annotates the configurations with cainjector's annotation and adds the
    CA Secrets (`pairs`) they inject from, allowing direct injection. The configurations
    nobody annotated trust `bystander_ca`, as installed webhooks do."""
    sizes = plan.sizes
    out = []
    for ns, name in plan.services:
        annotations = {CERTCTL_SERVING: f"{name}-tls"} if style == "certctl" else {}
        out.append((f"/api/v1/namespaces/{ns}/services", service(ns, name, annotations)))
    if style == "cert-manager":
        for key, files in pairs.items():
            ns, name = key.split("/")
            out.append((f"/api/v1/namespaces/{ns}/secrets", {
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": name, "namespace": ns,
                             "annotations": {CM_ALLOW: "true"},
                             "labels": {FLEET_LABEL: "source"}},
                "data": {k: base64.b64encode(v).decode() for k, v in files.items()}}))
    annotation = CERTCTL_INJECT if style == "certctl" else CM_INJECT
    for resource, name, ns, service_name, secret in plan.configurations:
        out.append((f"{ADMISSION}/{resource}", configuration(
            resource, name, ns, service_name, {annotation: secret}, {FLEET_LABEL: "annotated"})))
    # Nobody annotated these: what every cluster holds besides.
    for j in range(sizes.other_services):
        ns = plan.namespaces[j % sizes.namespaces]
        out.append((f"/api/v1/namespaces/{ns}/services", service(ns, f"other-{j:05d}")))
    for j in range(sizes.other_secrets):
        ns = plan.namespaces[j % sizes.namespaces]
        out.append((f"/api/v1/namespaces/{ns}/secrets", {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": f"other-{j:05d}", "namespace": ns},
            "data": {"blob": base64.b64encode(os.urandom(BYSTANDER_SECRET_BYTES)).decode()}}))
    for j in range(sizes.other_configurations):
        resource = KINDS[j % 2]
        ns = plan.namespaces[j % sizes.namespaces]
        out.append((f"{ADMISSION}/{resource}", configuration(
            resource, f"other-{j:05d}", ns, f"other-{j:05d}", ca_bundle=bystander_ca)))
    return out


def create(cluster, plan, objects):
    """The namespaces, then every object, 8 requests at a time (not measured)."""
    def post(item):
        path, obj = item
        for attempt in range(5):
            resp = cluster.api("POST", path, obj, timeout=60)
            if resp.status in (201, 409):
                return
            if resp.status not in (429, 500, 503, 504):
                break
            time.sleep(0.2 * (attempt + 1))
        raise BedError(f"POST {path} {obj['metadata']['name']}: {resp.status} "
                       f"{resp.body[:300]!r}")

    with concurrent.futures.ThreadPoolExecutor(CREATE_WORKERS) as pool:
        list(pool.map(post, [("/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for ns in plan.namespaces]))
        list(pool.map(post, objects))


def list_all(cluster, path, **params):
    """Every item of a collection, 500 a page."""
    items, token = [], ""
    while True:
        query = dict(params, limit="500")
        if token:
            query["continue"] = token
        resp = cluster.api("GET", f"{path}?{urllib.parse.urlencode(query)}", timeout=120)
        if resp.status != 200:
            raise BedError(f"LIST {path}: {resp.status} {resp.body[:300]!r}")
        page = resp.json()
        items += page.get("items") or []
        token = page.get("metadata", {}).get("continue")
        if not token:
            return items


# --- what the driver reads back ------------------------------------------------------------

def certificates(pem):
    """The certificates of a PEM bundle, as a frozenset of their base64 bodies."""
    text = pem.decode("ascii", "replace") if isinstance(pem, bytes) else pem
    return frozenset("".join(block.split("-----")[0].split())
                     for block in text.split("-----BEGIN CERTIFICATE-----")[1:])


def bundles_of(obj):
    return [base64.b64decode(w.get("clientConfig", {}).get("caBundle", "") or "")
            for w in obj.get("webhooks") or []]


class Tracker:
    """Watches the annotated configurations (both kinds) and the Secrets they inject from
    (`secret_selector`), and keeps when each Secret was first seen issued and when each
    configuration last came to hold its Secret's CA in every entry. `arm(keys)` starts a
    drift: from then on an armed configuration counts as repaired at the first event that
    shows it holding its CA again after one that showed it without."""

    def __init__(self, cluster, plan, secret_selector):
        self.cluster, self.plan = cluster, plan
        self.secret_selector = secret_selector
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.source = {f"{r}/{n}": s for r, n, _, _, s in plan.configurations}
        self.users = collections.defaultdict(set)   # Secret key -> configuration keys
        for config, secret in self.source.items():
            self.users[secret].add(config)
        self.cas = {}             # Secret key -> frozenset of its ca.crt's certificates
        self.issued_at = {}       # Secret key -> monotonic time first seen with a pair
        self.bundles = {}         # configuration key -> [frozenset per entry]
        self.injected_at = {}     # configuration key -> monotonic time it came to match
        self.versions = collections.Counter()  # configuration key -> MODIFIED events seen
        self.armed = {}           # configuration key -> [seen without, repaired at]
        self.streams = []
        self.threads = []
        self.stopping = False
        self.failure = None

    # -- the watches --
    def start(self):
        specs = [(f"{ADMISSION}/{r}", f"{FLEET_LABEL}=annotated", self._config_event(r))
                 for r in KINDS]
        specs.append(("/api/v1/secrets", self.secret_selector, self._secret_event))
        for path, selector, handle in specs:
            # The first list is taken here, so that start() returns with the state known.
            version = self._list(path, selector, handle)
            thread = threading.Thread(target=self._watch, args=(path, selector, handle, version),
                                      name=f"tracker {path}", daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def stop(self):
        self.stopping = True
        for stream in list(self.streams):
            stream.close()
        for thread in self.threads:
            thread.join(10)

    def _list(self, path, selector, handle):
        resp = self.cluster.api("GET", f"{path}?labelSelector={urllib.parse.quote(selector)}",
                                timeout=120)
        if resp.status != 200:
            raise BedError(f"LIST {path}: {resp.status} {resp.body[:300]!r}")
        page = resp.json()
        now = time.monotonic()
        for item in page.get("items") or []:
            handle(item, now, listed=True)
        return page["metadata"]["resourceVersion"]

    def _watch(self, path, selector, handle, version):
        while not self.stopping:
            try:
                stream = self.cluster.watch(path, timeout=None, labelSelector=selector,
                                            resourceVersion=version,
                                            allowWatchBookmarks="true")
            except OSError as e:
                self.failure = f"watch {path}: {e}"
                time.sleep(0.5)
                continue
            self.streams.append(stream)
            if stream.status != 200:
                stream.close()
                # Expired (410): list again, and watch from there.
                version = self._list(path, selector, handle)
                continue
            try:
                for event in stream:
                    now = time.monotonic()
                    obj = event.get("object") or {}
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event.get("type") == "ERROR":
                        version = self._list(path, selector, handle)
                        break
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        handle(obj, now)
            except (AttributeError, ValueError):
                # http.client, when stop() closes the stream under the reader
                if not self.stopping:
                    raise
            stream.close()
            self.streams.remove(stream)

    def _secret_event(self, obj, now, listed=False):
        meta = obj.get("metadata", {})
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        data = obj.get("data") or {}
        if not all(data.get(k) for k in ("ca.crt", "tls.crt", "tls.key")):
            return
        with self.lock:
            self.cas[key] = certificates(base64.b64decode(data["ca.crt"]))
            self.issued_at.setdefault(key, now)
            for config in self.users.get(key, ()):
                self._judge(config, now)
            self.changed.notify_all()

    def _config_event(self, resource):
        def handle(obj, now, listed=False):
            key = f"{resource}/{obj['metadata']['name']}"
            with self.lock:
                self.bundles[key] = [certificates(b) for b in bundles_of(obj)]
                if not listed:
                    self.versions[key] += 1
                self._judge(key, now)
                self.changed.notify_all()
        return handle

    def _matches(self, config):
        ca = self.cas.get(self.source.get(config))
        bundles = self.bundles.get(config)
        return bool(ca) and bool(bundles) and all(b == ca for b in bundles)

    def _judge(self, config, now):
        """Under the lock: note when `config` came to hold its CA (or lost it)."""
        matches = self._matches(config)
        if matches:
            self.injected_at.setdefault(config, now)
        else:
            self.injected_at.pop(config, None)
        armed = self.armed.get(config)
        if armed is not None:
            if not matches:
                armed[0] = True
            elif armed[0] and armed[1] is None:
                armed[1] = now

    # -- what the driver asks --
    def counts(self):
        with self.lock:
            return len(self.issued_at), len(self.injected_at)

    def wait(self, predicate, bound):
        """Waits until predicate() (called under the lock) holds; False after `bound` s."""
        deadline = time.monotonic() + bound
        with self.lock:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.5))
        return True

    def all_in(self, secrets, configurations):
        return len(self.issued_at) >= secrets and len(self.injected_at) >= configurations

    def last_issued(self):
        with self.lock:
            return max(self.issued_at.values(), default=None)

    def last_injected(self):
        with self.lock:
            return max(self.injected_at.values(), default=None)

    def arm(self, configs):
        with self.lock:
            self.armed = {c: [False, None] for c in configs}

    def repaired(self):
        """(configurations repaired, their repair times) since arm()."""
        with self.lock:
            times = [at for _, at in self.armed.values() if at is not None]
            return len(times), times

    def all_repaired(self):
        return all(at is not None for _, at in self.armed.values())

    def modified(self):
        """MODIFIED events seen per configuration so far (a Counter)."""
        with self.lock:
            return collections.Counter(self.versions)


def verify(cluster, plan, secret_selector, issued):
    """Reads every annotated configuration and the Secrets again: how many configurations
    hold their Secret's ca.crt in every entry, byte for byte and as a set of certificates;
    with `issued`, how many of the plan's Secrets exist as `certctl controller` issues them
    (kubernetes.io/tls, a CA and a leaf for the Service's name)."""
    from cryptography import x509
    secrets = {f"{s['metadata']['namespace']}/{s['metadata']['name']}": s
               for s in list_all(cluster, "/api/v1/secrets", labelSelector=secret_selector)}
    sources = {f"{r}/{n}": s for r, n, _, _, s in plan.configurations}
    found = {"configurations": 0, "bytes_equal": 0, "certificates_equal": 0,
             "secrets": 0, "secrets_valid": 0, "mismatched": []}
    for resource in KINDS:
        for obj in list_all(cluster, f"{ADMISSION}/{resource}",
                            labelSelector=f"{FLEET_LABEL}=annotated"):
            key = f"{resource}/{obj['metadata']['name']}"
            source = sources.get(key)
            found["configurations"] += 1
            secret = secrets.get(source)
            ca = base64.b64decode((secret or {}).get("data", {}).get("ca.crt", "") or "")
            bundles = bundles_of(obj)
            if ca and bundles and all(b == ca for b in bundles):
                found["bytes_equal"] += 1
            if ca and bundles and all(certificates(b) == certificates(ca) for b in bundles):
                found["certificates_equal"] += 1
            elif len(found["mismatched"]) < 5:
                found["mismatched"].append(key)
    for key in plan.secret_keys():
        secret = secrets.get(key)
        if secret is None:
            continue
        found["secrets"] += 1
        if not issued:
            continue
        data = secret.get("data") or {}
        try:
            leaf = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
            names = leaf.extensions.get_extension_for_class(
                x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
            ns, name = key.split("/")
            service_name = name[:-len("-tls")]
            ok = (secret.get("type") == "kubernetes.io/tls" and data.get("ca.crt")
                  and data.get("tls.key") and f"{service_name}.{ns}.svc" in names)
        except (KeyError, ValueError, x509.ExtensionNotFound):
            ok = False
        found["secrets_valid"] += bool(ok)
    return found


def open_watches(cluster):
    """Watches kube-apiserver holds open now (its apiserver_longrunning_requests)."""
    resp = cluster.api("GET", "/metrics", timeout=60)
    total = 0.0
    for line in resp.body.decode(errors="replace").splitlines():
        if line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)
