"""`certctl controller` run locally for tests, as its Deployment would run it: in-cluster
configuration as a ServiceAccount granted what the chart grants it, its own health and
metrics ports, stderr in a file. The rest of the process handling is the sidecar's (harness/sidecar.py)."""
from .rbac import controller_rules
from .sidecar import Sidecar

# What the chart grants the controller (mode controller of its permission table), released
# in certctl-system and watching every namespace.
CONTROLLER_RULES = controller_rules("certctl-system")

__all__ = ["CONTROLLER_RULES", "ClusterController"]


class ClusterController(Sidecar):
    """One `certctl controller` process; `args` are its flags beyond the ports."""

    def __init__(self, binary, cluster, workdir, name, user, args, namespace="certctl-system"):
        # Not Sidecar.__init__: a controller has no certificate folder or ready file.
        self._prepare(cluster, workdir, name, user, namespace)
        self.argv = [binary, "controller", *self.endpoint_flags(), *args]
