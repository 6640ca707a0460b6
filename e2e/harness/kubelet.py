"""JobRunner: the harness plays the kubelet (and the Job controller) for batch/v1 Jobs.
PodContainer (at the end): it plays the kubelet for one long-running container of a pod
template, such as the native sidecar of a Deployment.

The emulator has no kubelet, so Helm hook Jobs against it would never finish. The node tier
(tests/node/, a real kubelet) shows what pods do for the chart; this played kubelet stays
for what the node cannot serve (e2e/README.md says which: faults, a container stopped at a
chosen moment, manifests other than the chart).

A JobRunner watches Jobs in all namespaces of an emulator and runs each new one as a local
process, the way a node would run the Job's pod:

    with JobRunner(cluster, image_map={"certctl": certctl_binary}) as kubelet:
        cluster.kubectl("apply", "-f", "-", input=job_manifest)
        result = kubelet.wait_for("certctl-secret", timeout=30)
        assert result.succeeded, result.runs[-1].stderr

What one Job run does:

* the first container of spec.template.spec runs; its image maps to a local executable
  through `image_map`, keyed by the repository name without registry, tag or digest
  ("ghcr.io/x/certctl:0.1.0" -> "certctl"). `command` (when set) replaces the image's
  entrypoint; its argv[0] basename is mapped the same way ("/certctl" -> "certctl").
  `args` follow. $(VAR) references in command, args and env values are expanded as the
  kubelet does. initContainers, other containers, volumes, probes and workingDir are
  ignored (the process runs in its own folder under the cluster's temp dir);
* the environment is a scrubbed copy of the harness's own (no KUBECONFIG, KUBERNETES_*,
  POD_*, CERTCTL_*, HELM_*; HOME is the run folder), plus KUBERNETES_SERVICE_HOST/PORT of
  the emulator, HOSTNAME = the generated pod name, the container's envFrom/env
  (value; valueFrom.fieldRef for metadata.name, metadata.namespace, spec.serviceAccountName,
  metadata.uid; secretKeyRef/configMapKeyRef read from the emulator), and last
  CERTCTL_SERVICEACCOUNT_DIR: a folder with token, ca.crt and namespace, as mounted at
  /var/run/secrets/kubernetes.io/serviceaccount;
* the token belongs to the emulator user system:serviceaccount:<ns>:<sa> with the groups
  system:serviceaccounts, system:serviceaccounts:<ns>, system:authenticated, whose rules are
  exactly what the RBAC objects stored in the emulator grant that service account when the
  attempt starts (RoleBinding -> Role/ClusterRole rules limited to its namespace;
  ClusterRoleBinding -> ClusterRole rules cluster-wide; ServiceAccount, User and Group
  subjects). ClusterRole aggregation and nonResourceURLs are ignored, and there are no
  bootstrap roles (cluster-admin, edit, ... exist only if a test creates them). A service
  account other than "default" must exist, or the Job waits for it like a real one;
* the Job's status is written through the jobs/status subresource as the 1.32 Job controller
  does: startTime/active/ready while the process runs; on exit 0 succeeded: 1,
  completionTime and the conditions SuccessCriteriaMet + Complete (reason
  CompletionsReached); a failed attempt is retried (no back-off delay) until
  spec.backoffLimit retries have failed, then failed: N with FailureTarget + Failed
  (reason BackoffLimitExceeded); spec.activeDeadlineSeconds (counted from the start, across
  retries) kills the process (SIGTERM, then SIGKILL) and fails the Job with
  DeadlineExceeded. Helm's hook wait looks for Complete or Failed.
  Where a real cluster would leave the pod waiting forever (an image or command with no
  mapping, an env reference that cannot be resolved) the Job fails at once with reason
  ErrImagePull or CreateContainerConfigError and a message saying why, so a test fails fast;
* deleting the Job kills its running process (the garbage collector would delete the pod).
  No Pod objects are stored in the emulator; each attempt gets a generated pod name
  (<job>-xxxxx; kept across attempts with restartPolicy OnFailure).

What tests read: `runs` (RunRecord per attempt: namespace, job, uid, pod, attempt, argv,
env = what the Job and the in-cluster setup added, exit_code, stdout, stderr, user, rules,
killed, error, dir with the captured stdout/stderr files), `results` (JobResult per
finished Job), `wait_for(name, timeout, namespace=None, count=1)`, `runs_of(name)`, and
`log`. The `kubelet` fixture (harness/fixtures.py) maps "certctl" to the binary under test.

Jobs run one at a time in creation order, each at most once (by uid: a Job that Helm deletes
and re-creates under the same name is a new Job). Suspended Jobs and Jobs that already carry
a Complete/Failed condition are left alone. The runner talks to the emulator as admin, so
its reads and status writes (jobs/status updates) appear in the request log and in
cluster.writes() under the user "admin", and injected faults can hit its requests: scope a
fault with its path regex; the runner retries 429 and 5xx answers a few times.

On the real API server (harness/real_cluster.py) the token is a TokenRequest token of the
real ServiceAccount, so kube-apiserver's own authorizer decides on the stored RBAC objects
(`rules` records what they amount to), and the runner makes a namespace's "default"
ServiceAccount when a Job uses it, as the controller manager that does not run there would.
"""

import base64
import os
import posixpath
import random
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import traceback
import uuid

from .cluster import EmulatorError

JOBS_PATH = "/apis/batch/v1/jobs"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
POD_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
SCRUBBED_PREFIXES = ("KUBERNETES_", "POD_", "CERTCTL_", "HELM_")
SCRUBBED = ("KUBECONFIG", "KUBECACHEDIR", "HOME", "HOSTNAME")
WATCH_SECONDS = 60          # server-side timeout of one watch; it is then re-opened
POLL = 0.05                 # process and stop-flag polling interval
KILL_GRACE = 2.0            # SIGTERM -> SIGKILL
STOP_TIMEOUT = 10.0         # bound on joining the threads
STATUS_RETRIES = 20         # conflicts on the status write
TRANSIENT_RETRIES = 8       # 429/5xx answers (a test's injected faults hit the runner too)

REASON_COMPLETE = ("CompletionsReached", "Reached expected number of succeeded pods")
REASON_BACKOFF = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
REASON_DEADLINE = ("DeadlineExceeded", "Job was active longer than specified deadline")


class ConfigError(Exception):
    """The pod cannot start: (reason, message) as the kubelet would report them."""

    def __init__(self, reason, message):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class RunRecord:
    """One attempt (one pod) of a Job."""

    def __init__(self, namespace, job, uid, pod, attempt, user):
        self.namespace = namespace
        self.job = job
        self.uid = uid
        self.pod = pod
        self.attempt = attempt
        self.user = user
        self.pod_uid = str(uuid.uuid4())
        self.rules = []        # the emulator rules the token carried
        self.argv = []
        self.env = {}          # what the Job and the in-cluster setup put in (not the base env)
        self.exit_code = None  # None: never started (config error) or killed before exit
        self.stdout = ""
        self.stderr = ""
        self.killed = None     # "DeadlineExceeded", "JobDeleted", "RunnerStopped"
        self.error = None      # ConfigError text when the process never started
        self.dir = None
        self.started = None
        self.finished = None

    def __repr__(self):
        return (f"RunRecord({self.namespace}/{self.job} attempt {self.attempt}, "
                f"exit {self.exit_code}, killed={self.killed}, error={self.error})")


class JobResult:
    """The outcome of one Job (one uid)."""

    def __init__(self, namespace, name, uid, succeeded, reason, message, runs):
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.succeeded = succeeded
        self.reason = reason
        self.message = message
        self.runs = runs

    def __repr__(self):
        return (f"JobResult({self.namespace}/{self.name}, succeeded={self.succeeded}, "
                f"reason={self.reason!r}, runs={len(self.runs)})")


# --- pure helpers (unit-testable) --------------------------------------------------------

def image_repository(image):
    """'ghcr.io/x/certctl:0.1.0@sha256:..' -> 'certctl' (no registry, path, tag, digest)."""
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[0]


def expand(text, env):
    """Kubernetes $(VAR) expansion: $$ -> $, unknown or unterminated references stay."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2:end]
                    out.append(env[name] if name in env else text[i:end + 1])
                    i = end + 1
                    continue
        out.append(c)
        i += 1
    return "".join(out)


def subject_matches(subject, binding_namespace, user, groups, sa_namespace, sa_name):
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        # rbac: a ServiceAccount subject without namespace means the binding's namespace.
        ns = subject.get("namespace") or binding_namespace
        return subject.get("name") == sa_name and ns == sa_namespace
    if kind == "User":
        return subject.get("name") == user
    if kind == "Group":
        return subject.get("name") in groups
    return False


def translate_rule(rule, namespace=None):
    """An rbac/v1 PolicyRule as an emulator policy rule (None for nonResourceURLs only)."""
    if not rule.get("resources"):
        return None
    out = {"verbs": list(rule.get("verbs") or []),
           "apiGroups": list(rule.get("apiGroups") or []),
           "resources": list(rule["resources"])}
    if rule.get("resourceNames"):
        out["resourceNames"] = list(rule["resourceNames"])
    if namespace is not None:
        out["namespaces"] = [namespace]
    return out


def service_account_rules(sa_namespace, sa_name, roles, cluster_roles, role_bindings,
                          cluster_role_bindings):
    """The emulator rules that the given RBAC objects grant system:serviceaccount:ns:name.
    A real API server's own default bindings (labelled kubernetes.io/bootstrapping:
    rbac-defaults: discovery and self-review for every authenticated user) are the
    cluster's, not a chart's grant, and are left out."""
    user = f"system:serviceaccount:{sa_namespace}:{sa_name}"
    role_bindings = [b for b in role_bindings if not _bootstrap(b)]
    cluster_role_bindings = [b for b in cluster_role_bindings if not _bootstrap(b)]
    groups = service_account_groups(sa_namespace)
    by_role = {(r["metadata"].get("namespace", ""), r["metadata"]["name"]): r for r in roles}
    by_cluster_role = {r["metadata"]["name"]: r for r in cluster_roles}
    rules = []

    def add(rule_list, namespace):
        for rule in rule_list or []:
            out = translate_rule(rule, namespace)
            if out is not None and out not in rules:
                rules.append(out)

    for rb in role_bindings:
        ns = rb["metadata"].get("namespace", "")
        if not any(subject_matches(s, ns, user, groups, sa_namespace, sa_name)
                   for s in rb.get("subjects") or []):
            continue
        ref = rb.get("roleRef") or {}
        if ref.get("kind") == "Role":
            role = by_role.get((ns, ref.get("name")))
        else:
            role = by_cluster_role.get(ref.get("name"))
        if role is not None:
            add(role.get("rules"), ns)
    for crb in cluster_role_bindings:
        if not any(subject_matches(s, "", user, groups, sa_namespace, sa_name)
                   for s in crb.get("subjects") or []):
            continue
        ref = crb.get("roleRef") or {}
        role = by_cluster_role.get(ref.get("name")) if ref.get("kind") == "ClusterRole" else None
        if role is not None:
            add(role.get("rules"), None)
    return rules


def _bootstrap(binding):
    labels = binding["metadata"].get("labels") or {}
    return labels.get("kubernetes.io/bootstrapping") == "rbac-defaults"


def service_account_groups(namespace):
    return ["system:serviceaccounts", f"system:serviceaccounts:{namespace}",
            "system:authenticated"]


def _stamp():
    t = time.time()
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d}"


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _terminal(job):
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _conditions(pair, reason_message):
    now = _now()
    reason, message = reason_message
    return [{"type": t, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
             "reason": reason, "message": message} for t in pair]


# --- the runner ---------------------------------------------------------------------------

class JobRunner:
    """Runs the emulator's Jobs as local processes; a context manager (start/stop)."""

    def __init__(self, cluster, image_map, retry_delay=0.0, kill_grace=KILL_GRACE):
        self.cluster = cluster
        # Paths resolve against the harness's cwd (the process runs in its own folder).
        self.image_map = {k: os.path.abspath(v) if os.path.exists(v) else v
                          for k, v in image_map.items()}
        self.retry_delay = retry_delay
        self.kill_grace = kill_grace
        self.dir = os.path.join(cluster.tmp, "kubelet")
        self.runs = []       # RunRecord, in start order
        self.results = []    # JobResult, in finish order
        self.log = []        # what the runner did, for failure messages
        self.errors = []     # tracebacks of runner bugs; stop() raises them
        self._cond = threading.Condition()
        self._queue = []     # [(namespace, name, uid)] waiting to run, creation order
        self._seen = set()   # uids queued or run: never twice
        self._deleted = set()
        self._tokens = {}    # (namespace, service account) -> token
        self._stop = threading.Event()
        self._stream = None
        self._stream_lock = threading.Lock()
        self._threads = []

    # --- lifecycle ------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop(raise_errors=exc_type is None)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        for target, name in ((self._watch_loop, "kubelet-watch"), (self._run_loop, "kubelet-run")):
            t = threading.Thread(target=self._guard(target), name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, raise_errors=True):
        """Kill a running process, end the watch, join both threads (bounded)."""
        self._stop.set()
        with self._stream_lock:
            self._shutdown_stream()
        with self._cond:
            self._cond.notify_all()
        deadline = time.monotonic() + STOP_TIMEOUT
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        self._threads = []
        if alive:
            self.errors.append(f"threads still running after {STOP_TIMEOUT}s: {alive}")
        if raise_errors and self.errors:
            raise RuntimeError("JobRunner failed:\n" + "\n".join(self.errors))

    def _guard(self, fn):
        def run():
            try:
                fn()
            except Exception:  # a harness bug: remember it, stop() reports it
                if not self._stop.is_set():
                    self.errors.append(traceback.format_exc())
                    self._note(f"runner thread crashed: {traceback.format_exc()}")
        return run

    def _note(self, text):
        with self._cond:
            self.log.append(f"{_stamp()} {text}")

    # --- what tests use -------------------------------------------------------------------

    def wait_for(self, job_name, timeout=30.0, namespace=None, count=1):
        """Block until `count` Jobs named job_name have finished; returns the last JobResult.

        Raises AssertionError (with the runner's log) after `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                done = [r for r in self.results if r.name == job_name and
                        (namespace is None or r.namespace == namespace)]
                if len(done) >= count:
                    return done[count - 1]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.errors:
                    break
                self._cond.wait(min(remaining, 0.5))
            log = "\n".join(self.log[-40:])
        raise AssertionError(f"job {job_name!r} did not finish {count} time(s) within "
                             f"{timeout:g}s; runner errors: {self.errors}; runner log:\n{log}")

    def runs_of(self, job_name, namespace=None):
        with self._cond:
            return [r for r in self.runs if r.job == job_name and
                    (namespace is None or r.namespace == namespace)]

    # --- emulator access (admin) ----------------------------------------------------------

    def _api(self, method, path, body=None, **kwargs):
        """cluster.api, retrying what a controller retries: 429 and 5xx (injected faults)."""
        for attempt in range(TRANSIENT_RETRIES):
            resp = self.cluster.api(method, path, body, **kwargs)
            if resp.status != 429 and resp.status < 500:
                break
            self._note(f"{method} {path}: HTTP {resp.status}; retrying")
            self._stop.wait(0.05 * (attempt + 1))
        return resp

    def _get(self, path):
        resp = self._api("GET", path)
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise EmulatorError(f"GET {path}: {resp.status} {resp.body[:300]!r}")
        return resp.json()

    def _items(self, path):
        return (self._get(path) or {}).get("items") or []

    @staticmethod
    def _job_path(namespace, name):
        return f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"

    # --- watching -------------------------------------------------------------------------

    def _shutdown_stream(self):
        stream = self._stream
        if stream is not None:
            sock = getattr(stream._conn, "sock", None)
            try:
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _watch_loop(self):
        rv = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    listing = self._get(JOBS_PATH)
                    items = sorted(listing["items"], key=lambda j: (
                        j["metadata"].get("creationTimestamp", ""),
                        int(j["metadata"].get("resourceVersion", "0"))))
                    for job in items:
                        self._consider("ADDED", job)
                    rv = listing["metadata"]["resourceVersion"]
                rv = self._watch_once(rv)
            except (OSError, EmulatorError, ValueError, KeyError, TypeError) as e:
                if self._stop.is_set():
                    return
                self._note(f"watch failed ({type(e).__name__}: {e}); retrying")
                self._stop.wait(0.2)

    def _watch_once(self, rv):
        """One watch from rv; returns the last revision seen (None: relist after a 410)."""
        stream = self.cluster.watch(JOBS_PATH, timeout=WATCH_SECONDS + 30,
                                    resourceVersion=rv, allowWatchBookmarks="true",
                                    timeoutSeconds=str(WATCH_SECONDS))
        with self._stream_lock:
            if self._stop.is_set():
                stream.close()
                return rv
            self._stream = stream
        try:
            if stream.status != 200:
                raise EmulatorError(f"watch jobs: HTTP {stream.status}")
            for event in stream:
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    self._note(f"watch ERROR {obj.get('message')}; relisting")
                    return None
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                if event.get("type") != "BOOKMARK":
                    self._consider(event["type"], obj)
            return rv
        finally:
            with self._stream_lock:
                self._stream = None
            stream.close()

    def _consider(self, type_, job):
        meta = job["metadata"]
        uid = meta["uid"]
        with self._cond:
            if type_ == "DELETED":
                self._deleted.add(uid)
                self._cond.notify_all()
                return
            if uid in self._seen or meta.get("deletionTimestamp") or _terminal(job) or \
                    (job.get("spec") or {}).get("suspend"):
                return
            self._seen.add(uid)
            self._queue.append((meta["namespace"], meta["name"], uid))
            self.log.append(f"{_stamp()} queued job "
                            f"{meta['namespace']}/{meta['name']} ({uid})")
            self._cond.notify_all()

    # --- running --------------------------------------------------------------------------

    def _run_loop(self):
        while True:
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait(0.5)
                if self._stop.is_set():
                    return
                namespace, name, uid = self._queue.pop(0)
            try:
                self._run_job(namespace, name, uid)
            except Exception:  # report it (stop() raises), keep serving the other Jobs
                if self._stop.is_set():
                    return
                self.errors.append(f"job {namespace}/{name}: {traceback.format_exc()}")
                self._note(f"job {namespace}/{name}: runner error {traceback.format_exc()}")

    def _gone(self, uid):
        with self._cond:
            return uid in self._deleted

    def _run_job(self, namespace, name, uid):
        job = self._get(self._job_path(namespace, name))
        if job is None or job["metadata"]["uid"] != uid or _terminal(job):
            self._note(f"job {namespace}/{name} ({uid}) is gone or finished; skipped")
            return
        spec = job.get("spec") or {}
        pod_spec = (spec.get("template") or {}).get("spec") or {}
        backoff_limit = spec.get("backoffLimit", 6)
        deadline_seconds = spec.get("activeDeadlineSeconds")
        started = time.monotonic()
        deadline = started + deadline_seconds if deadline_seconds is not None else None
        start_time = _now()
        sa = pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount") or "default"
        self._set_status(namespace, name, uid, lambda st: st.update(
            startTime=start_time, ready=0, terminating=0, uncountedTerminatedPods={}))
        self._note(f"job {namespace}/{name}: started (backoffLimit {backoff_limit}, "
                   f"activeDeadlineSeconds {deadline_seconds})")
        runs, failed = [], 0
        pod = None
        while True:
            if not self._await_service_account(namespace, sa, uid, deadline):
                if self._stop.is_set() or self._gone(uid):
                    return
                return self._finish(namespace, name, uid, runs, failed, REASON_DEADLINE)
            if pod is None or pod_spec.get("restartPolicy") != "OnFailure":
                pod = f"{name[:57]}-" + "".join(random.choice(POD_NAME_CHARS) for _ in range(5))
            record = RunRecord(namespace, name, uid, pod, len(runs) + 1,
                               f"system:serviceaccount:{namespace}:{sa}")
            with self._cond:
                self.runs.append(record)
            runs.append(record)
            try:
                self._prepare(record, pod_spec, sa)
            except ConfigError as e:
                record.error = str(e)
                self._note(f"job {namespace}/{name}: {e}")
                return self._finish(namespace, name, uid, runs, failed + 1,
                                    (e.reason, e.message))
            self._set_status(namespace, name, uid, lambda st: st.update(active=1, ready=1))
            outcome = self._execute(record, uid, deadline)
            if outcome in ("JobDeleted", "RunnerStopped"):
                self._note(f"job {namespace}/{name}: {outcome}, process killed")
                return
            if outcome == "DeadlineExceeded":
                return self._finish(namespace, name, uid, runs, failed + 1, REASON_DEADLINE)
            if record.exit_code == 0:
                return self._finish(namespace, name, uid, runs, failed, None)
            failed += 1
            self._note(f"job {namespace}/{name}: attempt {record.attempt} exited "
                       f"{record.exit_code}")
            if failed > backoff_limit:
                return self._finish(namespace, name, uid, runs, failed, REASON_BACKOFF)
            count = failed

            def between_attempts(st):
                st.pop("active", None)  # an omitempty int32: 0 is never on the wire
                st.update(failed=count, ready=0)
            self._set_status(namespace, name, uid, between_attempts)
            if self._stop.wait(self.retry_delay) or self._gone(uid):
                return
            if deadline is not None and time.monotonic() >= deadline:
                return self._finish(namespace, name, uid, runs, failed, REASON_DEADLINE)

    def _await_service_account(self, namespace, sa, uid, deadline):
        """False when the stop flag, a deletion or the deadline comes first."""
        if sa == "default":
            if self.cluster.backend == "real":  # no controller manager: make it as it would
                self._api("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {
                    "apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": namespace}})
            return True  # the service account controller makes it in every namespace
        noted = False
        while not self._stop.is_set() and not self._gone(uid):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if self._get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}") is not None:
                return True
            if not noted:
                self._note(f"job in {namespace}: waiting for serviceaccount {sa!r}")
                noted = True
            self._stop.wait(0.1)
        return False

    def _finish(self, namespace, name, uid, runs, failed, reason):
        def mutate(st):
            st.pop("active", None)
            st.update(ready=0, terminating=0, uncountedTerminatedPods={})
            if reason is None:
                st["succeeded"] = 1
                st["completionTime"] = _now()
                st["conditions"] = (st.get("conditions") or []) + _conditions(
                    ("SuccessCriteriaMet", "Complete"), REASON_COMPLETE)
            else:
                if failed:
                    st["failed"] = failed
                st["conditions"] = (st.get("conditions") or []) + _conditions(
                    ("FailureTarget", "Failed"), reason)
        self._set_status(namespace, name, uid, mutate)
        result = JobResult(namespace, name, uid, reason is None,
                           REASON_COMPLETE[0] if reason is None else reason[0],
                           REASON_COMPLETE[1] if reason is None else reason[1], runs)
        with self._cond:
            self.results.append(result)
            self.log.append(f"{_stamp()} job {namespace}/{name}: "
                            f"{'Complete' if reason is None else 'Failed ' + reason[0]}")
            self._cond.notify_all()

    def _set_status(self, namespace, name, uid, mutate):
        """Read-modify-write of the status subresource; retries on conflicts."""
        path = self._job_path(namespace, name)
        for _ in range(STATUS_RETRIES):
            job = self._get(path)
            if job is None or job["metadata"]["uid"] != uid:
                return None
            status = dict(job.get("status") or {})
            mutate(status)
            job["status"] = status
            resp = self._api("PUT", path + "/status", job,
                                    headers={"User-Agent": "kube-controller-manager/v1.32.0 "
                                                           "(linux/amd64) kubernetes/harness/"
                                                           "job-controller"})
            if resp.status == 200:
                return resp.json()
            if resp.status in (404, 409):
                if resp.status == 404:
                    return None
                continue
            raise EmulatorError(f"PUT {path}/status: {resp.status} {resp.body[:300]!r}")
        raise EmulatorError(f"PUT {path}/status: still conflicting after {STATUS_RETRIES} tries")

    # --- one pod --------------------------------------------------------------------------

    def _map_executable(self, what, name):
        key = image_repository(name) if what == "image" else posixpath.basename(name)
        path = self.image_map.get(key)
        if path is None:
            raise ConfigError("ErrImagePull", f"kubelet emulation: no local executable for "
                                              f"{what} {name!r} (image_map has "
                                              f"{sorted(self.image_map)})")
        return path

    def _prepare(self, record, pod_spec, sa):
        containers = pod_spec.get("containers") or []
        if not containers:
            raise ConfigError("CreateContainerConfigError", "the pod template has no containers")
        container = containers[0]
        namespace = record.namespace
        record.dir = os.path.join(self.dir, f"{namespace}_{record.pod}_{record.attempt}")
        os.makedirs(record.dir, exist_ok=True)

        env = self._container_env(container, pod_spec, record)
        command, args = container.get("command") or [], container.get("args") or []
        command = [expand(a, env) for a in command]
        args = [expand(a, env) for a in args]
        if command:
            argv = [self._map_executable("command", command[0])] + command[1:] + args
        else:
            argv = [self._map_executable("image", container.get("image", ""))] + args
        record.argv = argv

        rules = self._rules(namespace, sa)
        if self.cluster.backend == "real":
            # A real token of the real account: the API server's authorizer decides, on the
            # RBAC objects stored there (`rules` is what they amount to, for the record).
            token = self.cluster.service_account_token(record.user)
        else:
            token = self._tokens.setdefault((namespace, sa), secrets.token_hex(16))
            resp = self._api("POST", "/_emulator/users", {
                "name": record.user, "groups": service_account_groups(namespace),
                "rules": rules, "token": token})
            if resp.status >= 300:
                raise EmulatorError(f"register {record.user}: {resp.status} {resp.body!r}")
        sa_dir = os.path.join(record.dir, "serviceaccount")
        os.makedirs(sa_dir, exist_ok=True)
        for fname, content in (("token", token), ("namespace", namespace)):
            with open(os.path.join(sa_dir, fname), "w", encoding="utf-8") as f:
                f.write(content)
        shutil.copyfile(self.cluster.ca_path, os.path.join(sa_dir, "ca.crt"))
        record.rules = rules
        env["CERTCTL_SERVICEACCOUNT_DIR"] = sa_dir  # where the token would be mounted
        record.env = env

    def _rules(self, namespace, sa):
        return service_account_rules(
            namespace, sa, self._items(f"{RBAC}/roles"), self._items(f"{RBAC}/clusterroles"),
            self._items(f"{RBAC}/rolebindings"), self._items(f"{RBAC}/clusterrolebindings"))

    def _container_env(self, container, pod_spec, record):
        """In-cluster variables, then envFrom, then env (later entries win), expanded."""
        namespace = record.namespace
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
               "KUBERNETES_SERVICE_PORT": str(self.cluster.port),
               "HOSTNAME": record.pod}
        for source in container.get("envFrom") or []:
            prefix = source.get("prefix", "")
            for kind, ref in (("secrets", source.get("secretRef")),
                              ("configmaps", source.get("configMapRef"))):
                if not ref:
                    continue
                data = self._key_source(namespace, kind, ref.get("name", ""),
                                        ref.get("optional"), "envFrom")
                for key, value in (data or {}).items():
                    env[prefix + key] = value
        fields = {"metadata.name": record.pod, "metadata.namespace": namespace,
                  "spec.serviceAccountName": pod_spec.get("serviceAccountName") or
                  pod_spec.get("serviceAccount") or "default",
                  "metadata.uid": record.pod_uid}
        for item in container.get("env") or []:
            name = item.get("name", "")
            source = item.get("valueFrom")
            if source is None:
                env[name] = expand(item.get("value", ""), env)
                continue
            if "fieldRef" in source:
                path = (source["fieldRef"] or {}).get("fieldPath", "")
                if path not in fields:
                    raise ConfigError("CreateContainerConfigError",
                                      f"kubelet emulation: env {name}: fieldRef {path!r} is not "
                                      f"supported (only {sorted(fields)})")
                env[name] = fields[path]
            elif "secretKeyRef" in source or "configMapKeyRef" in source:
                kind = "secrets" if "secretKeyRef" in source else "configmaps"
                ref = source.get("secretKeyRef") or source.get("configMapKeyRef") or {}
                data = self._key_source(namespace, kind, ref.get("name", ""),
                                        ref.get("optional"), f"env {name}")
                key = ref.get("key", "")
                if data is None or key not in data:
                    if ref.get("optional"):
                        continue
                    raise ConfigError("CreateContainerConfigError",
                                      f"couldn't find key {key} in {kind[:-1]} "
                                      f"{namespace}/{ref.get('name', '')}")
                env[name] = data[key]
            else:
                raise ConfigError("CreateContainerConfigError",
                                  f"kubelet emulation: env {name}: valueFrom "
                                  f"{sorted(source)} is not supported")
        return env

    def _key_source(self, namespace, kind, name, optional, what):
        obj = self._get(f"/api/v1/namespaces/{namespace}/{kind}/{name}")
        if obj is None:
            if optional:
                return None
            raise ConfigError("CreateContainerConfigError",
                              f"{what}: {kind[:-1]} {name!r} not found")
        if kind == "secrets":
            return {k: base64.b64decode(v).decode("utf-8", "replace")
                    for k, v in (obj.get("data") or {}).items()}
        return dict(obj.get("data") or {})

    def _base_env(self):
        return {k: v for k, v in os.environ.items()
                if k not in SCRUBBED and not k.startswith(SCRUBBED_PREFIXES)}

    def _execute(self, record, uid, deadline):
        """Run the process; returns None (exited), or why it was killed."""
        env = self._base_env()
        env["HOME"] = record.dir
        env.update(record.env)
        out_path = os.path.join(record.dir, "stdout")
        err_path = os.path.join(record.dir, "stderr")
        record.started = time.time()
        self._note(f"job {record.namespace}/{record.job}: attempt {record.attempt} as "
                   f"{record.user}: {record.argv}")
        outcome = None
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                proc = subprocess.Popen(record.argv, env=env, cwd=record.dir,
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        start_new_session=True)
            except OSError as e:
                err.write(f"kubelet emulation: cannot start {record.argv[0]}: {e}\n".encode())
                record.exit_code = 128  # what a container runtime's StartError exit code is
                proc = None
            while proc is not None:
                if proc.poll() is not None:
                    record.exit_code = proc.returncode
                    self._kill_group(proc)  # the container ends with its main process
                    break
                if self._stop.is_set():
                    outcome = "RunnerStopped"
                elif self._gone(uid):
                    outcome = "JobDeleted"
                elif deadline is not None and time.monotonic() >= deadline:
                    outcome = "DeadlineExceeded"
                if outcome:
                    record.killed = outcome
                    self._kill(proc)
                    break
                time.sleep(POLL)
        record.finished = time.time()
        with open(out_path, encoding="utf-8", errors="replace") as f:
            record.stdout = f.read()
        with open(err_path, encoding="utf-8", errors="replace") as f:
            record.stderr = f.read()
        return outcome

    def _kill(self, proc):
        """SIGTERM to the process group, SIGKILL after the grace period; always reaped."""
        for sig, wait in ((signal.SIGTERM, self.kill_grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self._kill_group(proc)

    @staticmethod
    def _kill_group(proc):
        """SIGKILL what is left of the process group (a shell's background children)."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# --- one long-running container of a pod template -------------------------------------------


def stored_rbac_rules(cluster, namespace, service_account):
    """The emulator rules that the RBAC objects stored in the emulator grant
    system:serviceaccount:<namespace>:<service_account> (see service_account_rules)."""
    def items(resource):
        resp = cluster.api("GET", f"{RBAC}/{resource}")
        if resp.status != 200:
            raise EmulatorError(f"GET {RBAC}/{resource}: {resp.status} {resp.body[:300]!r}")
        return resp.json().get("items") or []
    return service_account_rules(namespace, service_account, items("roles"),
                                 items("clusterroles"), items("rolebindings"),
                                 items("clusterrolebindings"))


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count):
    """`count` distinct free ports (bindable on every address, so on node-ip too), chosen
    at random below the kernel's ephemeral range: a port picked there and released could be
    taken by any outgoing connection (the API servers make many) before the test binds it."""
    low, _ = _ephemeral_range()
    floor = 10000 if low > 12000 else 1024
    chosen = []
    while len(chosen) < count:
        port = random.randrange(floor, low)
        if port in chosen:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("", port))
            except OSError:
                continue
        chosen.append(port)
    return chosen


class ContainerProcess:
    """A long-running container as a local process: `argv` with `env` added to a scrubbed
    copy of the harness's environment (as JobRunner scrubs it), its own folder `dir`
    (cwd and HOME), stdout and stderr in files there. `get(path, port)` asks its HTTP
    endpoints; `stop()` sends SIGTERM and kills after a grace period. A context manager:
    nothing outlives the `with`."""

    def __init__(self, argv, env, dir, name="container"):
        self.argv = list(argv)
        self.env = dict(env)
        self.dir = dir
        self.name = name
        self.proc = None
        os.makedirs(dir, exist_ok=True)
        self.stdout_path = os.path.join(dir, f"{name}.stdout")
        self.stderr_path = os.path.join(dir, f"{name}.stderr")

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        self.stop()

    def start(self):
        env = {k: v for k, v in os.environ.items()
               if k not in SCRUBBED and not k.startswith(SCRUBBED_PREFIXES)}
        env["HOME"] = self.dir
        env.update(self.env)
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv, env=env, cwd=self.dir,
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         start_new_session=True)
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def get(self, path, port):
        """(status, body) of GET http://127.0.0.1:port/path; (None, why) when nothing
        answers."""
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        except OSError as e:
            return None, f"{type(e).__name__}: {e}"
        finally:
            conn.close()

    def stop(self, sig=signal.SIGTERM, grace=5.0):
        """Signal the process group, wait up to `grace` seconds, then SIGKILL; returns the
        exit code (negative: killed by a signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        return self.proc.returncode


def pod_container(cluster, pod_spec, container_name, namespace, image_map, dir,
                  pod_name=None, args=None):
    """The container `container_name` of a pod template (containers or initContainers, so
    a native sidecar too) as a ContainerProcess, not started, the way a kubelet would run
    it in a pod of `namespace`:

    * argv: the image (or command[0]) mapped to a local executable through `image_map` as
      JobRunner maps it, then command[1:] and the args; `args(list) -> list` may rewrite
      them first (a local folder for a mounted volume, free ports for the container's);
    * env: KUBERNETES_SERVICE_HOST/PORT of the emulator, HOSTNAME = the pod name, the
      container's env (value, with $(VAR) expansion; valueFrom.fieldRef metadata.name,
      metadata.namespace, metadata.uid, spec.serviceAccountName), and
      CERTCTL_SERVICEACCOUNT_DIR, a folder laid out as the mounted service-account token;
    * the token is that of system:serviceaccount:<namespace>:<serviceAccountName> with
      exactly the rules the RBAC objects stored in the emulator grant it now
      (stored_rbac_rules), registered in the emulator under that name.

    Anything else of the pod (probes, volumes, securityContext) is the caller's to check."""
    containers = (pod_spec.get("initContainers") or []) + (pod_spec.get("containers") or [])
    found = [c for c in containers if c.get("name") == container_name]
    if len(found) != 1:
        raise ConfigError("CreateContainerConfigError",
                          f"expected one container {container_name!r}, found {len(found)}")
    container = found[0]
    sa = pod_spec.get("serviceAccountName") or "default"
    pod_name = pod_name or f"{container_name}-" + "".join(
        random.choice(POD_NAME_CHARS) for _ in range(5))
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace,
              "metadata.uid": str(uuid.uuid4()), "spec.serviceAccountName": sa}
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": str(cluster.port), "HOSTNAME": pod_name}
    for item in container.get("env") or []:
        source = item.get("valueFrom")
        if source is None:
            env[item["name"]] = expand(item.get("value", ""), env)
        elif (source.get("fieldRef") or {}).get("fieldPath") in fields:
            env[item["name"]] = fields[source["fieldRef"]["fieldPath"]]
        else:
            raise ConfigError("CreateContainerConfigError",
                              f"kubelet emulation: env {item['name']}: valueFrom {source} "
                              f"is not supported")
    command = [expand(a, env) for a in container.get("command") or []]
    argv_args = [expand(a, env) for a in container.get("args") or []]
    if command:
        executable = image_map.get(posixpath.basename(command[0]))
        rest = command[1:] + argv_args
    else:
        executable = image_map.get(image_repository(container.get("image", "")))
        rest = argv_args
    if executable is None:
        raise ConfigError("ErrImagePull", f"kubelet emulation: no local executable for "
                                          f"{command[:1] or container.get('image')!r}")
    if args is not None:
        rest = args(list(rest))

    user = f"system:serviceaccount:{namespace}:{sa}"
    rules = stored_rbac_rules(cluster, namespace, sa)
    if cluster.backend == "real":  # the real account's token: the real authorizer decides
        token = cluster.service_account_token(user)
    else:
        token = secrets.token_hex(16)
        resp = cluster.api("POST", "/_emulator/users", {
            "name": user, "groups": service_account_groups(namespace), "rules": rules,
            "token": token})
        if resp.status >= 300:
            raise EmulatorError(f"register {user}: {resp.status} {resp.body!r}")
    sa_dir = os.path.join(dir, "serviceaccount")
    os.makedirs(sa_dir, exist_ok=True)
    for fname, content in (("token", token), ("namespace", namespace)):
        with open(os.path.join(sa_dir, fname), "w", encoding="utf-8") as f:
            f.write(content)
    shutil.copyfile(cluster.ca_path, os.path.join(sa_dir, "ca.crt"))
    env["CERTCTL_SERVICEACCOUNT_DIR"] = sa_dir
    process = ContainerProcess([os.path.abspath(executable), *rest], env, dir,
                               name=container_name)
    process.user = user
    process.rules = rules
    process.pod_name = pod_name
    return process


def rewrite_flags(args, values):
    """`args` with the value of each flag in `values` replaced ({"--cert-dir": "/tmp/x"}):
    what a local process needs instead of a mounted folder or a container port. Each flag
    must be there exactly once, as `--flag value` or `--flag=value`; nothing else changes."""
    out, seen, i = [], {}, 0
    while i < len(args):
        arg = args[i]
        name, eq, _ = arg.partition("=")
        if eq and name in values:
            out.append(f"{name}={values[name]}")
            seen[name] = seen.get(name, 0) + 1
        elif arg in values and i + 1 < len(args):
            out += [arg, values[arg]]
            seen[arg] = seen.get(arg, 0) + 1
            i += 1
        else:
            out.append(arg)
        i += 1
    wrong = {flag: seen.get(flag, 0) for flag in values if seen.get(flag, 0) != 1}
    if wrong:
        raise ConfigError("CreateContainerConfigError",
                          f"expected each flag once in {args}, found {wrong}")
    return out
