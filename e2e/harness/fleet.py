"""`certctl controller` run locally for tests, as its Deployment would run it: in-cluster
configuration as a ServiceAccount granted SPEC 9b's rules, its own health and metrics ports,
stderr in a file. The rest of the process handling is the sidecar's (harness/sidecar.py)."""
from .sidecar import Sidecar

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
    # For certctl.io/failure-policy-once-ready: whether a Service has a ready endpoint.
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "verbs": ["get", "create", "update"]},
]

__all__ = ["CONTROLLER_RULES", "ClusterController"]


class ClusterController(Sidecar):
    """One `certctl controller` process; `args` are its flags beyond the ports."""

    def __init__(self, binary, cluster, workdir, name, user, args, namespace="certctl-system"):
        # Not Sidecar.__init__: a controller has no certificate folder or ready file.
        self._prepare(cluster, workdir, name, user, namespace)
        self.argv = [binary, "controller", *self.endpoint_flags(), *args]
