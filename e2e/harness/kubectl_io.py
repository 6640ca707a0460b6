"""Reading what the real kubectl prints, for the emulator's tests with kubectl."""

import json
import select

__all__ = ["get_json", "read_line"]


def get_json(cluster, *args):
    """`kubectl get ARGS -o json`, parsed."""
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def read_line(proc, timeout=10):
    """One line of a background kubectl's stdout, failing the test after `timeout`."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "kubectl printed nothing in time"
    return proc.stdout.readline().strip()
