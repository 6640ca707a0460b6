"""The Prometheus Operator's own CustomResourceDefinitions for the real API server, taken at
test time from the Operator's Go module on the module proxy (the module carries them in
example/prometheus-operator-crd/, generated from its Go types), at a pinned version whose
checksum is checked: what a cluster with the Operator has, not a hand-written copy.

    paths = operator_crds("podmonitors", "servicemonitors", "prometheusrules")

`go mod download` keeps the module in Go's module cache (outside the clone), so only the
first call on a machine downloads it.
"""

import json
import os
import subprocess
import tempfile

MODULE = "github.com/prometheus-operator/prometheus-operator"
VERSION = "v0.90.1"
SUM = "h1:n/+FkLB6WpftBxJC8IEHrWXSA6uzNTocFmwU/ACkfeg="  # go.sum's hash of that version
GROUP = "monitoring.coreos.com"


class OperatorCrdError(RuntimeError):
    pass


def operator_module_dir():
    """The Operator module's folder in Go's module cache, downloaded when missing."""
    with tempfile.TemporaryDirectory() as outside_any_module:
        proc = subprocess.run(["go", "mod", "download", "-json", f"{MODULE}@{VERSION}"],
                              capture_output=True, text=True, timeout=300,
                              cwd=outside_any_module, env=dict(os.environ, GOFLAGS="-mod=mod"))
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        raise OperatorCrdError(f"go mod download {MODULE}@{VERSION} failed: "
                               f"{proc.stderr.strip()}") from None
    if info.get("Error"):
        raise OperatorCrdError(f"go mod download {MODULE}@{VERSION}: {info['Error']}")
    if info.get("Sum") != SUM:
        raise OperatorCrdError(f"{MODULE}@{VERSION} has checksum {info.get('Sum')}, "
                               f"not the pinned {SUM}")
    return info["Dir"]


def operator_crds(*plurals):
    """Paths of the Operator's CRD files for these resources (podmonitors, ...)."""
    folder = os.path.join(operator_module_dir(), "example", "prometheus-operator-crd")
    paths = [os.path.join(folder, f"{GROUP}_{plural}.yaml") for plural in plurals]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise OperatorCrdError(f"{MODULE}@{VERSION} has no {missing}")
    return paths
