"""Test harness: start the Kubernetes API emulator and talk to it (see cluster.Cluster)."""

from .cluster import ApiResponse, Cluster, EmulatorError

__all__ = ["ApiResponse", "Cluster", "EmulatorError"]
