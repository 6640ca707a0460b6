"""`certctl controller` run locally for tests, as its Deployment would run it: in-cluster
configuration as a ServiceAccount granted SPEC 9b's rules, its own health and metrics ports,
stderr in a file. The rest of the process handling is the sidecar's (harness/sidecar.py)."""
import os

from .sidecar import SCRUBBED, Sidecar, free_ports

# What the controller may do (SPEC 9b), cluster-wide.
CONTROLLER_RULES = [
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["secrets"],
     "verbs": ["get", "list", "watch", "create", "update", "patch"]},
    {"apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
     "verbs": ["get", "list", "watch", "patch", "update"]},
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
     "verbs": ["get", "list", "watch", "patch", "update"]},
    {"apiGroups": ["apiregistration.k8s.io"], "resources": ["apiservices"],
     "verbs": ["get", "list", "watch", "patch", "update"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "verbs": ["get", "create", "update"]},
]

__all__ = ["CONTROLLER_RULES", "ClusterController"]


class ClusterController(Sidecar):
    """One `certctl controller` process; `args` are its flags beyond the ports."""

    def __init__(self, binary, cluster, workdir, name, user, args, namespace="certctl-system"):
        self.name = name
        self.user = user
        self.stderr_path = os.path.join(workdir, f"{name}.stderr")
        self.stdout_path = os.path.join(workdir, f"{name}.stdout")
        self.health_port, self.metrics_port = free_ports(2)
        self.argv = [binary, "controller",
                     "--health-addr", f"127.0.0.1:{self.health_port}",
                     "--metrics-addr", f"127.0.0.1:{self.metrics_port}", *args]
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env.update(cluster.in_cluster_env(user, namespace))
        self.env = env
        self.proc = None
        self.started_at = None
