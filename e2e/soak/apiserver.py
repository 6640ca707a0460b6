"""The API server's side of every admission call, in a loop (`AdmissionCaller`): it keeps the
webhook configurations by watch, as the API server's own cache does (so it goes on calling
while the API is unavailable to certctl), and about every 20 ms calls every webhook entry the
way kube-apiserver does: the host it verifies is the name the entry calls
(`clientConfig.service` -> NAME.NAMESPACE.svc), the only trust is the entry's caBundle, the
connection goes to one ready endpoint of that Service (kube-proxy's choice, here round-robin),
and an AdmissionReview is posted over it. Every call is counted; a failed one is kept with
its cause:

    unknown-authority  the served chain does not verify against the caBundle
    name-mismatch      the served certificate does not name the host the entry calls
    expired            a certificate of the served chain is outside its validity
    no-bundle          the entry has no caBundle
    no-endpoints       the Service has no ready endpoint (the API server: "no endpoints
                       available for service")
    refused, timeout   the endpoint did not accept, or did not answer in time
    bad-answer         a TLS session, but no proper AdmissionReview answer

On a real API server (`KubeApiServerCaller`) kube-apiserver makes the calls itself: the soak
sends it a dry-run ConfigMap create, which every entry matches, and reads the cause from its
answer (`failed calling webhook "NAME": ...`); `metrics()` reads what it counted in
`apiserver_admission_webhook_*`.
"""

import base64
import collections
import hashlib
import http.client
import itertools
import re
import socket
import ssl
import threading
import time

from harness.api_server import admission_call, dry_run_admission
from harness.api_server import bundle_fingerprints as fingerprints
from soak.background import Background

__all__ = ["AdmissionCaller", "CachedView", "Call", "KubeApiServerCaller", "classify",
           "classify_answer", "entries", "fingerprints"]

HOSTNAME_MISMATCH = 62            # X509_V_ERR_HOSTNAME_MISMATCH
UNKNOWN_ISSUER = {2, 18, 19, 20, 21}
EXPIRED = {9, 10}                 # not yet valid, expired


class Call:
    """One failed admission call; `at` is when it started (monotonic), `until` when its
    answer came when someone else made it in between (kube-apiserver, some time while the
    request the soak sent was on its way)."""

    __slots__ = ("at", "until", "target", "host", "pod", "cause", "detail", "trusted", "served")

    def __init__(self, at, target, host, pod, cause, detail, trusted=(), served=None,
                 until=None):
        self.at, self.target, self.host, self.pod = at, target, host, pod
        self.until = at if until is None else until
        self.cause, self.detail, self.trusted, self.served = cause, detail, trusted, served

    def describe(self):
        return (f"{self.target} -> {self.host} via {self.pod}: {self.cause} ({self.detail}); "
                f"trusting {list(self.trusted)}, served {self.served}")


def classify(error):
    """The cause of a failed call from the exception it raised."""
    if isinstance(error, ssl.SSLCertVerificationError):
        code = error.verify_code
        if code == HOSTNAME_MISMATCH:
            return "name-mismatch"
        if code in UNKNOWN_ISSUER:
            return "unknown-authority"
        if code in EXPIRED:
            return "expired"
        return "unknown-authority"
    if isinstance(error, ConnectionRefusedError):
        return "refused"
    if isinstance(error, (socket.timeout, TimeoutError)):
        return "timeout"
    return "bad-answer"


def entries(obj):
    """(label, service namespace, service name, caBundle PEM) of each webhook entry."""
    kind = obj.get("kind", "").replace("WebhookConfiguration", "").lower() or "webhook"
    out = []
    for i, hook in enumerate(obj.get("webhooks") or []):
        config = hook.get("clientConfig") or {}
        service = config.get("service") or {}
        bundle = base64.b64decode(config.get("caBundle") or "").decode(errors="replace")
        out.append((f"{kind}/{obj['metadata']['name']}[{i}]", service.get("namespace"),
                    service.get("name"), bundle))
    return out


class CachedView(Background):
    """What the API server's own cache of an informer's objects holds: each version becomes
    visible `delay` seconds after the watch delivered it (one API server among several, its
    cache a little behind; real ones lag by milliseconds to seconds)."""

    def __init__(self, informer, delay):
        super().__init__("api-server-cache", 0.01)
        self.informer, self.delay = informer, delay
        self._history = collections.deque()   # (monotonic, items)
        self._lock = threading.Lock()
        self._last = None

    def step(self):
        items = self.informer.items()
        if items != self._last:
            with self._lock:
                self._history.append((time.monotonic(), items))
            self._last = items

    def items(self):
        cutoff = time.monotonic() - self.delay
        with self._lock:
            while len(self._history) > 1 and self._history[1][0] <= cutoff:
                self._history.popleft()
            if not self._history or self._history[0][0] > cutoff:
                return []
            return self._history[0][1]


class AdmissionCaller(Background):
    """Calls every entry of every object the informers in `targets` hold, through
    `router(namespace, service) -> [(pod, port), ...]` (the ready endpoints), every
    `interval` seconds, until stopped. `timeout` is the webhook's own default (timeoutSeconds
    10). `on_failure(Call)` and `on_success(target)` are called
    on its thread."""

    def __init__(self, targets, router, on_failure, on_success, interval=0.02, timeout=10.0):
        super().__init__("admission-caller", interval)
        self.targets, self.router = targets, router
        self.on_failure, self.on_success = on_failure, on_success
        self.timeout = timeout
        self._turn = itertools.count()
        self._contexts = {}

    def _context(self, bundle):
        context = self._contexts.get(bundle)
        if context is None:
            context = ssl.create_default_context(cadata=bundle)
            if len(self._contexts) > 64:
                self._contexts.clear()
            self._contexts[bundle] = context
        return context

    def _served(self, port, host):
        """The leaf an endpoint serves (no verification), to explain a failure."""
        try:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            with socket.create_connection(("127.0.0.1", port), timeout=1.0) as raw:
                with context.wrap_socket(raw, server_hostname=host) as tls:
                    der = tls.getpeercert(binary_form=True)
                    return hashlib.sha256(der).hexdigest()[:12]
        except (OSError, ValueError):
            return None

    def step(self):
        for informer in self.targets:
            for obj in informer.items():
                for label, namespace, service, bundle in entries(obj):
                    self._call_entry(label, namespace, service, bundle)

    def _call_entry(self, label, namespace, service, bundle):
        host = f"{service}.{namespace}.svc"
        now = time.monotonic()
        try:
            trusted = fingerprints(bundle)
        except ValueError:  # not PEM the API server could load either
            trusted = ["unparsable"]
        # kube-apiserver resolves the Service's endpoint before any handshake: with neither
        # an endpoint nor a bundle, its call fails for the endpoint.
        endpoints = self.router(namespace, service)
        if not endpoints:
            self.on_failure(Call(now, label, host, None, "no-endpoints",
                                 f"no endpoints available for service {service!r}", trusted))
            return
        if not trusted:
            self.on_failure(Call(now, label, host, None, "no-bundle", "empty caBundle"))
            return
        pod, port = endpoints[next(self._turn) % len(endpoints)]
        try:
            admission_call(port, host, self._context(bundle), timeout=self.timeout)
        except (OSError, ValueError, KeyError, http.client.HTTPException) as e:
            detail = f"{type(e).__name__}: {e}"
            self.on_failure(Call(now, label, host, pod, classify(e), detail, trusted,
                                 self._served(port, host)))
        else:
            self.on_success(label)


# kube-apiserver's words for each cause, in the order they are tried (its webhook client's
# errors: Go's crypto/x509 and net, the service resolver's).
ANSWER_CAUSES = [
    ("x509: certificate signed by unknown authority", "unknown-authority"),
    ("x509: certificate is valid for", "name-mismatch"),
    ("x509: certificate is not valid for any names", "name-mismatch"),
    ("x509: certificate has expired or is not yet valid", "expired"),
    ("no endpoints available for service", "no-endpoints"),
    (re.compile(r'services? "[^"]+" not found'), "no-endpoints"),
    ("connection refused", "refused"),
    ("context deadline exceeded", "timeout"),
    ("i/o timeout", "timeout"),
]
FAILED_CALL = re.compile(r'failed calling webhook "([^"]+)": (.*)', re.S)
CALLED_HOST = re.compile(r'https://([^/:"]+)')


def classify_answer(text):
    """The cause of a failed call from kube-apiserver's words for it."""
    for words, cause in ANSWER_CAUSES:
        if (words.search(text) if hasattr(words, "search") else words in text):
            return cause
    return "bad-answer"


class KubeApiServerCaller(Background):
    """The real backend's admission calls: every `interval` seconds a dry-run ConfigMap create
    in `namespace`, which kube-apiserver sends through every entry of the targets (mutating
    ones in turn, then the validating ones); `targets` are the informers of the
    configurations, read for the entries' names. An answer 201 is one successful call per
    entry; an answer naming a webhook it failed calling is one failed call of that entry
    (the mutating entries before it succeeded); any other answer is a failed call with the
    cause `api-server`. `failed` counts the failed calls per webhook name, for `metrics()`."""

    def __init__(self, cluster, targets, namespace, on_failure, on_success, interval=0.05,
                 timeout=15.0):
        super().__init__("admission-caller", interval)
        self.cluster, self.targets = cluster, targets
        self.on_failure, self.on_success = on_failure, on_success
        self.namespace, self.timeout = namespace, timeout
        self.failed = collections.Counter()

    def _entries(self):
        """[(webhook name, label, caBundle PEM)], mutating ones first."""
        out = []
        for informer in sorted(self.targets, key=lambda i: "mutating" not in i.path):
            for obj in sorted(informer.items(), key=lambda o: o["metadata"]["name"]):
                for (label, _, _, bundle), hook in zip(entries(obj), obj.get("webhooks") or []):
                    out.append((hook.get("name", ""), label, bundle))
        return out

    def step(self):
        known = self._entries()
        now = time.monotonic()
        try:
            status, text = dry_run_admission(self.cluster, self.namespace, "soak", self.timeout)
        except (OSError, http.client.HTTPException) as e:
            self.on_failure(Call(now, "configmaps", "kube-apiserver", None, "api-server",
                                 f"{type(e).__name__}: {e}", until=time.monotonic()))
            return
        answered = time.monotonic()
        if status == 201:
            for _, label, _ in known:
                self.on_success(label)
            return
        failed = FAILED_CALL.search(text)
        if failed is None:
            self.on_failure(Call(now, "configmaps", "kube-apiserver", None, "api-server",
                                 f"{status}: {text[:300]}", until=answered))
            return
        name, reason = failed.groups()
        self.failed[name] += 1
        label, bundle = name, None
        for hook, hook_label, hook_bundle in known:
            if hook == name:
                label, bundle = hook_label, hook_bundle
                break
            if hook_label.startswith("mutating/"):
                self.on_success(hook_label)  # called, and admitted, before the one that failed
        cause = classify_answer(reason)
        if cause == "unknown-authority" and bundle == "":
            cause = "no-bundle"  # no caBundle: it trusted the system roots, which never sign
        try:
            trusted = fingerprints(bundle or "")
        except ValueError:
            trusted = ["unparsable"]
        host = CALLED_HOST.search(reason)
        self.on_failure(Call(now, label, host.group(1) if host else "?", None, cause,
                             f"{status}: {reason[:300]}", trusted, until=answered))

    def metrics(self):
        """{webhook name: (calls, failed calls)} as kube-apiserver's own metrics count them:
        apiserver_admission_webhook_request_total, and _rejection_count with error_type
        calling_webhook_error."""
        resp = self.cluster.api("GET", "/metrics", timeout=30)
        if resp.status != 200:
            raise RuntimeError(f"GET /metrics: {resp.status}")
        calls, failed = collections.Counter(), collections.Counter()
        for line in resp.body.decode().splitlines():
            for family, counter in (("apiserver_admission_webhook_request_total{", calls),
                                    ("apiserver_admission_webhook_rejection_count{", failed)):
                if not line.startswith(family):
                    continue
                labels_text, value = line[len(family):].rsplit("} ", 1)
                labels = dict(re.findall(r'(\w+)="([^"]*)"', labels_text))
                if counter is failed and labels.get("error_type") != "calling_webhook_error":
                    continue
                counter[labels.get("name", "")] += int(float(value))
        return {name: (calls[name], failed[name]) for name in set(calls) | set(failed)}
