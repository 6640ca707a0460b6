"""The node backend: a real control plane and one real node on this machine
(`scripts/kube-up.sh --node`): containerd and the kubelet run the pods, kube-controller-manager
and kube-scheduler make Deployments, Jobs and ServiceAccounts happen. One node a machine, so
the node tests run one after the other on one pytest worker (e2e/conftest.py keeps them
together).

    with NodeCluster(tmp_path) as node:
        node.kubectl("get", "pods", "-A")

`host_state()` lists what the node could leave behind on the host — processes, mounts,
network namespaces, links, iptables rules, cgroups, files in the paths containerd and the
kubelet use by default, and the kernel settings the kubelet writes — so that a test can
compare it before the node starts and after `--down`.
"""

import glob
import json
import os
import subprocess
import time

from .real_cluster import KUBE_UP, RealCluster

START_TIMEOUT = 900  # the first start on a machine builds Kubernetes and certctl's image
NODE = "certctl-node"
# What the node's programs use when nobody tells them otherwise: the test bed tells them
# otherwise, so none of these may appear.
DEFAULT_PATHS = ["/run/containerd", "/var/lib/containerd", "/var/lib/kubelet", "/var/lib/cni",
                 "/var/log/pods", "/var/log/containers", "/etc/cni/net.d", "/opt/containerd",
                 "/usr/libexec/kubernetes", "/run/netns/" + NODE]
SETTINGS = ["kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
            "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward"]
# The node's own programs by name. Its Kubernetes programs (the one executable `kube`) are
# known by the folder in their command line instead: other tests' control planes run `kube`
# too, beside the node tier.
PROGRAMS = {"containerd", "containerd-shim-runc-v2", "pause"}


def node_problem():
    """Why the node tier does not run here (None when it does): it needs root, and
    `scripts/test.sh --quick` leaves it out (E2E_NODE=0)."""
    if os.environ.get("E2E_NODE") == "0":
        return "the node tier is left out (E2E_NODE=0, as scripts/test.sh --quick sets)"
    if os.geteuid() != 0:
        return "the node backend needs root (namespaces, cgroups, routes)"
    return None


class NodeError(Exception):
    """kube-up.sh --node failed."""


class NodeCluster(RealCluster):
    """A control plane with one node in `folder`, the client side the real backend has
    (kubectl, api, users); a context manager that always takes it down. The folder stays
    (its logs) for the test's tmp_path to remove."""

    def __init__(self, folder, kubelet_sync=None):
        super().__init__()
        self.tmp = str(folder)
        self.start_seconds = None
        self.up = False
        # The kubelet's pod sync period (a Go duration), which bounds how late a changed
        # Secret reaches the pods' volumes; None: the kubelet's default, a minute.
        self.kubelet_sync = kubelet_sync

    @property
    def state_dir(self):
        return self.tmp

    def start(self):
        began = time.monotonic()
        env = dict(os.environ)
        if self.kubelet_sync:
            env["KUBE_UP_KUBELET_SYNC"] = self.kubelet_sync
        proc = subprocess.run([KUBE_UP, "--node", self.tmp], capture_output=True, text=True,
                              timeout=START_TIMEOUT, env=env)
        if proc.returncode != 0:
            raise NodeError(f"scripts/kube-up.sh --node failed ({proc.returncode}):\n"
                            f"{proc.stderr[-4000:]}")
        self.start_seconds = time.monotonic() - began
        self.up = True
        self._connect()

    def stop(self):
        self.down()

    def down(self):
        proc = subprocess.run([KUBE_UP, "--down", self.tmp], capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise NodeError(f"scripts/kube-up.sh --down failed: {proc.stderr}")
        self.up = False
        return proc

    def get(self, *args):
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, manifest):
        """Applies one object or a list of them, given as dicts."""
        objects = manifest if isinstance(manifest, list) else [manifest]
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                           "items": objects}))

    def wait(self, *args, timeout=120):
        """`kubectl wait`: an event-driven wait on the API server's watch."""
        self.kubectl("wait", *args, f"--timeout={timeout}s", timeout=timeout + 10)

    def ctr(self, *args):
        """ctr against the node's containerd (namespace k8s.io, the kubelet's), from inside
        the node's mount namespace where its socket is."""
        with open(os.path.join(self.tmp, "node-init.pid"), encoding="ascii") as f:
            init = f.read().strip()
        return subprocess.run(["nsenter", "--target", init, "--mount", "ctr", "--address",
                               "/run/containerd/containerd.sock", "-n", "k8s.io", *args],
                              capture_output=True, text=True, check=True, timeout=60).stdout

    def container_init_pid(self, namespace, pod, container):
        """The host's process id of a running container's first process (its pid 1)."""
        status = self.get("pod", "-n", namespace, pod)["status"]
        statuses = status.get("containerStatuses", []) + status.get("initContainerStatuses", [])
        (found,) = [s for s in statuses if s["name"] == container]
        pid = container_pid(found["containerID"].split("://", 1)[1])
        if pid is None:
            raise AssertionError(f"no running process of {namespace}/{pod}'s {container}")
        return pid


def container_pid(container_id, cache=None):
    """The host's process id of a container's first process (its pid 1), found by the
    container's id in the cgroup paths of /proc (cgroupfs names each container's cgroup by
    it); None when it does not run. `cache` (a dict) keeps what was found, checked on every
    use."""
    cache = {} if cache is None else cache
    pid = cache.get(container_id)
    if pid is not None and _cgroup_holds(pid, container_id):
        return pid
    cache.pop(container_id, None)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not _cgroup_holds(entry, container_id):
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8") as f:
                ns_pids = next(line for line in f if line.startswith("NSpid:")).split()
        except (OSError, StopIteration):
            continue
        if ns_pids[-1] == "1":
            cache[container_id] = int(entry)
            return int(entry)
    return None


def _cgroup_holds(pid, container_id):
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
            return container_id in f.read()
    except OSError:
        return False


def _run(*argv):
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout


def host_state(folder=None):
    """What on this machine a node could change, as a dict of sorted lists (see the module
    docstring). Mounts and processes are those of the node's programs or under `folder`."""
    state = {}
    mounts = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            point = line.split()[4]
            if (folder and point.startswith(str(folder))) or point.startswith(
                    ("/run/containerd", "/run/netns", "/var/lib/kubelet", "/var/lib/cni",
                     "/proc/sys", "/var/log")):
                mounts.append(point)
    state["mounts"] = sorted(mounts)
    processes = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            name = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if name in PROGRAMS or (folder and str(folder) in cmdline):
            processes.append(f"{name}: {cmdline.strip()}")
    state["processes"] = sorted(processes)
    state["netns"] = sorted(_run("ip", "netns", "list").split())
    state["links"] = sorted(line.split(":")[1].strip().split("@")[0]
                            for line in _run("ip", "-o", "link").splitlines())
    state["routes"] = sorted(_run("ip", "-4", "route").splitlines())
    # Rules and chains, without the counters.
    state["iptables"] = sorted(line.split(" [")[0] for line in _run("iptables-save").splitlines()
                               if not line.startswith("#"))
    state["cgroups"] = sorted(glob.glob(f"/sys/fs/cgroup/*/{NODE}"))
    state["default paths"] = sorted(p for p in DEFAULT_PATHS if os.path.lexists(p))
    settings = {}
    for setting in SETTINGS:
        with open(f"/proc/sys/{setting}", encoding="utf-8") as f:
            settings[setting] = f.read().strip()
    state["settings"] = sorted(f"{k}={v}" for k, v in settings.items())
    return state
