"""RealCluster: a real etcd and kube-apiserver v1.37 (scripts/kube-up.sh) in a temporary
folder, with the client side of `Cluster` (harness/cluster.py): kubectl(), api(), watch(),
users with RBAC, service-account folders. A test written against that interface runs on
either backend (conftest.py's `backends` marker); the emulator's controls (faults, the
request log, policies) exist only there.

    with RealCluster() as c:
        c.kubectl("create", "namespace", "infra")
        c.add_user("system:serviceaccount:infra:certctl", rules)   # a real ServiceAccount,
        env = c.in_cluster_env("system:serviceaccount:infra:certctl", "infra")  # its token

The request log is the API server's audit log (scripts/kube-up.sh writes DIR/audit.log):
request_log(), reset_request_log() and writes() give its entries in the emulator's shape
(user, verb, apiGroup, resource, subresource, namespace, name, code, dryRun, query, time),
so a test's "zero writes" or "never refused" holds on both backends. The admin is "admin"
there, and a plain user name ("checker") its own name, as on the emulator.

Users are ServiceAccounts: add_user creates the account, a Role per namespace its rules
name and a ClusterRole for the rest, binds them, and asks the TokenRequest API for a token,
so every request certctl makes with it is authenticated and authorized by the API server
itself. A name that is not system:serviceaccount:NS:NAME (a test's "checker") becomes the
account of that name in the namespace e2e-users. The admin is a client certificate in the
group system:masters.
"""

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse

from kubeemu.admin import summarise

from .cluster import ClusterClient, EmulatorError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KUBE_UP = os.path.join(REPO, "scripts", "kube-up.sh")
START_TIMEOUT = 600  # the first start on a machine builds kube-apiserver
TOKEN_SECONDS = 3600
SA_PREFIX = "system:serviceaccount:"
ADMIN = "kube-up-admin"  # the CN of the admin's client certificate
METHODS = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT",
           "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE"}
USERS_NAMESPACE = "e2e-users"  # where the accounts of plain user names live


class ClusterError(EmulatorError):
    """The real control plane did not start, or refused a set-up request."""


class RealCluster(ClusterClient):
    """A real control plane for one test; a context manager that always stops it."""

    backend = "real"
    context_name = "kube-up"

    def __init__(self):
        self.tmp = None
        self.url = None
        self.port = None
        self.node_ip = None
        self._tokens = {}
        self._log_offset = 0

    # --- lifecycle --------------------------------------------------------------------

    @property
    def state_dir(self):
        return os.path.join(self.tmp, "kube")

    @property
    def ca_path(self):
        return os.path.join(self.state_dir, "pki", "ca.crt")

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="kube-")
        proc = subprocess.run([KUBE_UP, self.state_dir], capture_output=True, text=True,
                              timeout=START_TIMEOUT)
        if proc.returncode != 0:
            output = proc.stdout + proc.stderr
            self.stop()
            raise ClusterError(f"scripts/kube-up.sh failed ({proc.returncode}): {output}")
        self._connect()

    def _connect(self):
        """The client side of a control plane kube-up.sh started in state_dir."""
        with open(os.path.join(self.state_dir, "port"), encoding="ascii") as f:
            self.port = int(f.read())
        with open(os.path.join(self.state_dir, "node-ip"), encoding="ascii") as f:
            self.node_ip = f.read().strip()
        self.url = f"https://127.0.0.1:{self.port}"
        self._ssl = ssl.create_default_context(cafile=self.ca_path)
        self._admin_ssl = ssl.create_default_context(cafile=self.ca_path)
        pki = os.path.join(self.state_dir, "pki")
        self._admin_ssl.load_cert_chain(os.path.join(pki, "admin.crt"),
                                        os.path.join(pki, "admin.key"))
        shutil.copyfile(os.path.join(self.state_dir, "kubeconfig"),
                        os.path.join(self.state_dir, "admin.kubeconfig"))

    def stop(self):
        if self.tmp:
            subprocess.run([KUBE_UP, "--down", self.state_dir], capture_output=True,
                           timeout=60)
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def log(self):
        """The API server's log so far."""
        with open(os.path.join(self.state_dir, "kube-apiserver.log"), encoding="utf-8",
                  errors="replace") as f:
            return f.read()

    # --- users and credentials --------------------------------------------------------

    def username(self, user):
        """The name the API server knows `user` by (in its 403 messages, say)."""
        namespace, account = self._account(user)
        return f"{SA_PREFIX}{namespace}:{account}"

    def add_user(self, name, rules, groups=()):
        """A ServiceAccount `system:serviceaccount:NS:NAME` (its namespace is created when
        missing; a plain name is an account in e2e-users) granted `rules`: rules with
        `namespaces` (the emulator's form) go to a Role in each of those namespaces, the
        others to a ClusterRole. Returns its token."""
        if groups:
            raise ValueError("the real backend's users are ServiceAccounts: their groups "
                             "are the API server's, not the test's")
        namespace, account = self._account(name)
        self._ensure_namespace(namespace)
        self._create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                     {"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": account, "namespace": namespace}})
        role = f"e2e-{namespace}-{account}"
        subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
        by_namespace, cluster_rules = {}, []
        for rule in rules:
            rule = dict(rule)
            namespaces = rule.pop("namespaces", None)
            if namespaces is None:
                cluster_rules.append(rule)
            for ns in namespaces or ():
                by_namespace.setdefault(ns, []).append(rule)
        for ns, ns_rules in by_namespace.items():
            self._ensure_namespace(ns)
            rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
            self._create_or_replace(f"{rbac}/roles", {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": role, "namespace": ns}, "rules": ns_rules})
            self._create_or_replace(f"{rbac}/rolebindings", {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": role, "namespace": ns}, "subjects": subject,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": role}})
        if cluster_rules:
            rbac = "/apis/rbac.authorization.k8s.io/v1"
            self._create_or_replace(f"{rbac}/clusterroles", {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": role}, "rules": cluster_rules})
            self._create_or_replace(f"{rbac}/clusterrolebindings", {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": role}, "subjects": subject,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": role}})
        return self.service_account_token(name)

    def revoke_user(self, name):
        """Deletes the bindings add_user made for `name` (its Roles, ClusterRole and token
        stay), so that every request of it is refused; add_user again restores them."""
        namespace, account = self._account(name)
        binding = f"e2e-{namespace}-{account}"
        self.kubectl("delete", "rolebinding", "-A", "--field-selector",
                     f"metadata.name={binding}", "--ignore-not-found")
        self.kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")

    def service_account_token(self, name):
        """A token from the TokenRequest API for an existing ServiceAccount `name`
        (system:serviceaccount:NS:NAME), kept as that user's credential."""
        namespace, account = self._account(name)
        reply = self._create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": TOKEN_SECONDS}}, exist_ok=False)
        token = reply["status"]["token"]
        self._tokens[name] = token
        self._write_kubeconfig(name, token)
        return token

    @staticmethod
    def _account(name):
        """(namespace, name) of the ServiceAccount behind user `name`."""
        if name.startswith(SA_PREFIX):
            namespace, account = name[len(SA_PREFIX):].split(":", 1)
            return namespace, account
        return USERS_NAMESPACE, name

    def _ensure_namespace(self, namespace):
        self._create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": namespace}})

    def _create_or_replace(self, path, obj):
        """A user added again gets the rules given now."""
        resp = self.api("POST", path, obj)
        if resp.status == 409:
            resp = self.api("PUT", f"{path}/{obj['metadata']['name']}", obj)
        if resp.status >= 300:
            raise ClusterError(f"PUT {path}: {resp.status} {resp.body[:500]!r}")

    def _create(self, path, obj, exist_ok=True):
        resp = self.api("POST", path, obj)
        if resp.status == 409 and exist_ok:
            return None
        if resp.status >= 300:
            raise ClusterError(f"POST {path}: {resp.status} {resp.body[:500]!r}")
        return resp.json()

    def _tls_context(self, user):
        return self._admin_ssl if user == "admin" else self._ssl

    # --- the request log: the API server's audit log -----------------------------------

    def _user_name(self, username):
        """The audit log's user as the emulator's log names it."""
        if username == ADMIN:
            return "admin"
        users = f"{SA_PREFIX}{USERS_NAMESPACE}:"
        return username[len(users):] if username.startswith(users) else username

    def _entry(self, event):
        """One audit event in the emulator's request-log shape. `name` is the one the request
        was authorized for, as the API server's RequestInfo has it: none for a create on a
        collection (the audit log adds the new object's name there)."""
        ref = event.get("objectRef") or {}
        name = ref.get("name", "")
        if event.get("verb") == "create" and not ref.get("subresource"):
            name = ""
        uri = urllib.parse.urlsplit(event.get("requestURI", ""))
        query = urllib.parse.parse_qs(uri.query)
        return {"user": self._user_name((event.get("user") or {}).get("username", "")),
                "verb": event.get("verb", ""), "path": uri.path, "query": uri.query,
                "method": METHODS.get(event.get("verb", ""), ""),
                "apiGroup": ref.get("apiGroup", ""), "resource": ref.get("resource", ""),
                "subresource": ref.get("subresource", ""),
                "namespace": ref.get("namespace", ""), "name": name,
                "userAgent": event.get("userAgent", ""), "dryRun": bool(query.get("dryRun")),
                "code": (event.get("responseStatus") or {}).get("code", 0),
                "time": event.get("stageTimestamp", "").replace("Z", "")[:26] + "Z"}

    def request_log(self):
        """{"requests": [...], "counts": {verb: {resource: n}}, "writes": [...]} since the
        last reset, from the audit log: a watch counts when its stream starts (stage
        ResponseStarted), every other request when it is answered (ResponseComplete)."""
        time.sleep(0.05)  # the audit event of an answer just sent is written right after it
        entries = []
        with open(os.path.join(self.state_dir, "audit.log"), encoding="utf-8") as f:
            f.seek(self._log_offset)
            for line in f:
                if not line.endswith("\n"):
                    break  # an event still being written: the next look has it
                event = json.loads(line)
                stage = event.get("stage")
                watch = event.get("verb") == "watch"
                if stage == ("ResponseStarted" if watch else "ResponseComplete") or \
                        stage == "Panic":
                    entries.append(self._entry(event))
        return summarise(entries)

    def reset_request_log(self):
        time.sleep(0.05)
        self._log_offset = os.path.getsize(os.path.join(self.state_dir, "audit.log"))

    def writes(self):
        return self.request_log()["writes"]

    def __getattr__(self, name):
        # Only reached for what this class lacks: say why rather than a bare AttributeError.
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"{name}() is the emulator's control; the real API server has "
                             f"none (keep such a test on the emulator backend)")


class WarmSpare:
    """Real control planes handed out one per test, the next already started: `take()`
    returns the spare started in the background (or starts one, the first time or when the
    spare failed) and starts the next while the test runs, so a real test does not wait the
    seconds kube-apiserver takes to come up. Each is used once; `close()` stops the spare
    left at the end."""

    def __init__(self):
        self._thread = None
        self._spare = None

    def _start(self):
        cluster = RealCluster()
        try:
            cluster.start()
        except ClusterError as e:
            self._spare = e
        else:
            self._spare = cluster

    def _prime(self):
        self._spare = None
        self._thread = threading.Thread(target=self._start, name="spare control plane",
                                        daemon=True)
        self._thread.start()

    def take(self):
        cluster = None
        if self._thread is not None:
            self._thread.join()
            if isinstance(self._spare, RealCluster):
                cluster = self._spare
        if cluster is None:  # none started yet, or it failed: start one here, errors shown
            cluster = RealCluster()
            cluster.start()
        self._prime()
        return cluster

    def close(self):
        if self._thread is not None:
            self._thread.join()
            if isinstance(self._spare, RealCluster):
                self._spare.stop()
            self._thread = self._spare = None
