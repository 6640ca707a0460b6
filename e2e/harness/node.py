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

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KUBE_UP = os.path.join(REPO, "scripts", "kube-up.sh")
START_TIMEOUT = 900  # the first start on a machine builds Kubernetes and certctl's image
NODE = "certctl-node"
# What the node's programs use when nobody tells them otherwise: the test bed tells them
# otherwise, so none of these may appear.
DEFAULT_PATHS = ["/run/containerd", "/var/lib/containerd", "/var/lib/kubelet", "/var/lib/cni",
                 "/var/log/pods", "/var/log/containers", "/etc/cni/net.d", "/opt/containerd",
                 "/usr/libexec/kubernetes", "/run/netns/" + NODE]
SETTINGS = ["kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
            "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward"]
PROGRAMS = {"kube", "kubelet", "containerd", "containerd-shim-runc-v2", "pause"}


def node_problem():
    """Why the node cannot run here (None when it can): it needs root."""
    if os.geteuid() != 0:
        return "the node backend needs root (namespaces, cgroups, routes)"
    return None


class NodeError(Exception):
    """kube-up.sh --node failed."""


class NodeCluster:
    """A control plane with one node in `folder`; a context manager that always takes it
    down."""

    def __init__(self, folder):
        self.dir = str(folder)
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.start_seconds = None

    def __enter__(self):
        began = time.monotonic()
        proc = subprocess.run([KUBE_UP, "--node", self.dir], capture_output=True, text=True,
                              timeout=START_TIMEOUT)
        if proc.returncode != 0:
            raise NodeError(f"scripts/kube-up.sh --node failed ({proc.returncode}):\n"
                            f"{proc.stderr[-4000:]}")
        self.start_seconds = time.monotonic() - began
        return self

    def __exit__(self, *exc):
        self.down()

    def down(self):
        proc = subprocess.run([KUBE_UP, "--down", self.dir], capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise NodeError(f"scripts/kube-up.sh --down failed: {proc.stderr}")
        return proc

    def kubectl(self, *args, check=True, timeout=60, stdin=None):
        proc = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, *args],
                              capture_output=True, text=True, timeout=timeout, input=stdin)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def get(self, *args):
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, manifest):
        """Applies one object or a list of them, given as dicts."""
        objects = manifest if isinstance(manifest, list) else [manifest]
        self.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                           "items": objects}))

    def wait(self, *args, timeout=120):
        """`kubectl wait`: an event-driven wait on the API server's watch."""
        self.kubectl("wait", *args, f"--timeout={timeout}s", timeout=timeout + 10)

    def log_path(self, name):
        for candidate in (os.path.join(self.dir, f"{name}.log"),
                          os.path.join(self.dir, "node", f"{name}.log")):
            if os.path.exists(candidate):
                return candidate
        return None


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
