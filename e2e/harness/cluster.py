"""Cluster: one emulator process in a temporary directory, plus clients for tests.

    with Cluster() as c:
        c.kubectl("apply", "-f", "manifest.yaml")
        token = c.add_user("ctrl", rules=[...])
        c.inject_fault(method="PUT", path="/secrets/", status=409)
"""

import base64
import http.client
import json
import os
import select
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.parse

from .kubectl_path import KUBECTL

E2E_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0


class EmulatorError(RuntimeError):
    pass


class ApiResponse:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        return self.headers.get(name)

    def __repr__(self):
        return f"ApiResponse({self.status}, {self.body[:200]!r})"


class WatchStream:
    """An open watch: iterate events (dicts); ends when the server closes the stream."""

    def __init__(self, conn, response):
        self._conn = conn
        self.response = response
        self.status = response.status

    def __iter__(self):
        return self

    def __next__(self):
        try:
            line = self.response.readline()
        except (OSError, http.client.HTTPException):
            raise StopIteration from None
        if not line:
            raise StopIteration
        return json.loads(line)

    def close(self):
        """Safe from another thread: a reader blocked on the stream sees its end at once
        (closing alone leaves the response's reference to the socket open, and the reader
        blocked until the watch's timeout)."""
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _replace_file(path, content):
    """Write `path` by renaming a finished file over it, so no reader sees it half written."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    # mkstemp's 0600 would lock out a container that runs as another user (the image tests).
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(content)
    os.replace(tmp, path)


def node_address():
    """This machine's first non-loopback IPv4 address (what scripts/kube-up.sh writes to
    node-ip): an address EndpointSlice validation accepts, where webhook servers listen."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        return line.split()[3].split("/")[0]
    raise EmulatorError("this machine has no non-loopback IPv4 address (see ip addr)")


class ClusterClient:
    """The client side both backends share (harness/real_cluster.py is the other): users'
    kubeconfigs and service-account folders, kubectl, raw requests and watches. A backend
    sets tmp, state_dir, ca_path, url, port, _ssl (trusting its CA), _tokens and
    context_name."""

    context_name = "kubeemu"

    def __enter__(self):  # start() and stop() are the backend's
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def _kubeconfig_path(self, user):
        # KUBECONFIG is a colon-separated list: a service account's name (system:...:...)
        # must not put colons into the file's path.
        return os.path.join(self.state_dir, f"{user.replace(':', '_')}.kubeconfig")

    def kubeconfig(self, user="admin"):
        path = self._kubeconfig_path(user)
        if not os.path.exists(path):
            raise KeyError(f"no user {user!r}; add it with add_user()")
        return path

    def token(self, user="admin"):
        return self._tokens[user]

    def username(self, user):
        """The name the API server knows `user` by (in its 403 messages, say)."""
        return user

    def _write_kubeconfig(self, user, token):
        with open(self.ca_path, "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        name = self.context_name
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": name,
               "clusters": [{"name": name, "cluster": {
                   "server": self.url, "certificate-authority-data": ca}}],
               "users": [{"name": user, "user": {"token": token}}],
               "contexts": [{"name": name, "context": {
                   "cluster": name, "user": user, "namespace": "default"}}]}
        path = self._kubeconfig_path(user)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)  # JSON is valid YAML for every kubeconfig loader
        os.chmod(path, 0o600)

    def service_account_dir(self, user, namespace):
        """A folder laid out like /var/run/secrets/kubernetes.io/serviceaccount."""
        path = os.path.join(self.tmp, "serviceaccounts", f"{user}-{namespace}")
        os.makedirs(path, exist_ok=True)
        # No trailing newline: the Python in-cluster loader does not trim the token.
        # Each file is replaced whole: a process started from another thread may be reading it.
        for name, content in (("token", self._tokens[user]), ("namespace", namespace)):
            _replace_file(os.path.join(path, name), content)
        with open(self.ca_path, encoding="utf-8") as f:
            _replace_file(os.path.join(path, "ca.crt"), f.read())
        return path

    def in_cluster_env(self, user, namespace):
        """Environment for a process that should believe it runs in a pod as `user`."""
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                "KUBERNETES_SERVICE_PORT": str(self.port),
                "CERTCTL_SERVICEACCOUNT_DIR": self.service_account_dir(user, namespace)}

    # --- clients ----------------------------------------------------------------------

    def _kubectl_env(self, user):
        # A cache per user and API server: kubectl keeps discovery for 6 h otherwise.
        return dict(os.environ, KUBECONFIG=self.kubeconfig(user),
                    KUBECACHEDIR=os.path.join(self.tmp, f"kubecache-{user}"), HOME=self.tmp)

    def kubectl(self, *args, user="admin", input=None, check=True, timeout=30):
        """Run the real kubectl (harness/kubectl_path.py: on PATH, else .tools/bin) as `user`."""
        proc = subprocess.run([KUBECTL, *args], input=input, capture_output=True, text=True,
                              env=self._kubectl_env(user), timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}{proc.stderr}")
        return proc

    def kubectl_background(self, *args, user="admin"):
        """Start kubectl without waiting (e.g. `get -w`); the caller must stop it."""
        return subprocess.Popen([KUBECTL, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=self._kubectl_env(user))

    def _tls_context(self, user):
        """The TLS context of `user`'s requests (the real backend's admin adds its client
        certificate)."""
        return self._ssl

    def _connection(self, timeout, user=None):
        return http.client.HTTPSConnection("127.0.0.1", self.port,
                                           context=self._tls_context(user), timeout=timeout)

    def api(self, method, path, body=None, user="admin", content_type="application/json",
            headers=None, timeout=30, token=None):
        """A raw request; body may be bytes, str or a JSON-serialisable value."""
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        hdrs = {"Accept": "application/json"}
        auth = token if token is not None else self._tokens.get(user)
        if auth is not None:
            hdrs["Authorization"] = f"Bearer {auth}"
        if body is not None:
            hdrs["Content-Type"] = content_type
        hdrs.update(headers or {})
        conn = self._connection(timeout, user if token is None else None)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            return ApiResponse(resp.status, dict(resp.getheaders()), resp.read())
        finally:
            conn.close()

    def watch(self, path, user="admin", timeout=30, **params):
        """Open a watch: path is a collection, params are query parameters."""
        query = urllib.parse.urlencode({"watch": "true", **params})
        conn = self._connection(timeout, user)
        headers = {}
        if user in self._tokens:
            headers["Authorization"] = f"Bearer {self._tokens[user]}"
        conn.request("GET", f"{path}?{query}", headers=headers)
        return WatchStream(conn, conn.getresponse())

class Cluster(ClusterClient):
    """An emulator process; a context manager that starts it and always stops it."""

    backend = "emulator"

    def __init__(self, policy_path=None, bookmark_interval=None):
        self.policy_path = policy_path
        self.bookmark_interval = bookmark_interval
        self.proc = None
        self.tmp = None
        self.url = None
        self.port = None
        self._tokens = {}

    # --- lifecycle --------------------------------------------------------------------

    @property
    def state_dir(self):
        return os.path.join(self.tmp, "state")

    @property
    def node_ip(self):
        return node_address()

    @property
    def ca_path(self):
        return os.path.join(self.state_dir, "ca.crt")

    @property
    def admin_token(self):
        return self._tokens["admin"]

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="kubeemu-")
        cmd = [PYTHON, "-m", "kubeemu", "--state-dir", self.state_dir]
        if self.policy_path:
            cmd += ["--policy", self.policy_path]
        if self.bookmark_interval is not None:
            cmd += ["--bookmark-interval", str(self.bookmark_interval)]
        env = dict(os.environ, PYTHONPATH=E2E_DIR, PYTHONDONTWRITEBYTECODE="1")
        self._stderr = open(os.path.join(self.tmp, "emulator.log"), "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=env, cwd=self.tmp)
        line = self._read_ready_line()
        if not line.startswith("READY https://127.0.0.1:"):
            self.stop()
            raise EmulatorError(f"emulator did not start: {line!r}; log: {self.log()}")
        self.url = line.split()[1]
        self.port = int(self.url.rsplit(":", 1)[1])
        with open(os.path.join(self.state_dir, "admin.token"), encoding="ascii") as f:
            self._tokens["admin"] = f.read()
        self._ssl = ssl.create_default_context(cafile=self.ca_path)

    def _read_ready_line(self):
        deadline = time.monotonic() + START_TIMEOUT
        fd = self.proc.stdout.fileno()
        buf = b""
        while b"\n" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.proc.poll() is not None:
                return buf.decode(errors="replace")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    return buf.decode(errors="replace")
                buf += chunk
        return buf.split(b"\n", 1)[0].decode()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT)
        if self.proc is not None:
            self.proc.stdout.close()
            self._stderr.close()
        self.proc = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def log(self):
        """The emulator's stderr so far (tracebacks of emulator bugs land here)."""
        with open(os.path.join(self.tmp, "emulator.log"), encoding="utf-8",
                  errors="replace") as f:
            return f.read()

    # --- users and credentials --------------------------------------------------------

    def add_user(self, name, rules, groups=()):
        """Register a bearer token for `name` with RBAC rules; writes <name>.kubeconfig."""
        reply = self._admin("POST", "/_emulator/users",
                            {"name": name, "groups": list(groups), "rules": rules})
        token = reply["token"]
        self._tokens[name] = token
        self._write_kubeconfig(name, token)
        return token

    # --- emulator controls ------------------------------------------------------------

    def _admin(self, method, path, body=None):
        resp = self.api(method, path, body)
        if resp.status >= 300:
            raise EmulatorError(f"{method} {path}: {resp.status} {resp.body!r}")
        return resp.json()

    def inject_fault(self, method="*", path=".*", status=None, count=1, retry_after=None,
                     latency=0.0, watch=None, format="apf"):
        """Make the next `count` matching requests fail with `status` and/or wait `latency`.

        path is a regular expression searched in the URL path; watch=True/False restricts
        the fault to (non-)watch requests; format="status" answers a 429 with a Status
        instead of the text/plain body priority & fairness sends.
        """
        spec = {"method": method, "path": path, "status": status, "count": count,
                "latency": latency, "watch": watch, "format": format}
        if retry_after is not None:
            spec["retryAfter"] = retry_after
        return self._admin("POST", "/_emulator/faults", spec)

    def clear_faults(self):
        self._admin("DELETE", "/_emulator/faults")

    def drop_watches(self, abrupt=False):
        """End every open watch: cleanly (terminating chunk) or by resetting the connection."""
        self._admin("POST", "/_emulator/watches/drop", {"abrupt": abrupt})

    def compact(self):
        """Forget the watch history; returns the compacted revision."""
        return int(self._admin("POST", "/_emulator/compact")["compactedRevision"])

    def resource_version(self):
        return int(self._admin("GET", "/_emulator/state")["resourceVersion"])

    def request_log(self):
        """{"requests": [...], "counts": {verb: {resource: n}}, "writes": [...]}"""
        return self._admin("GET", "/_emulator/requests")

    def reset_request_log(self):
        self._admin("DELETE", "/_emulator/requests")

    def writes(self):
        """Successful, non-dry-run create/update/patch/delete requests since the last reset."""
        return self.request_log()["writes"]

    def set_policy(self, policy):
        return self._admin("PUT", "/_emulator/policy", policy)
