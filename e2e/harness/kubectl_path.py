"""Which kubectl the tests run: the one scripts/install-kubectl.sh installs at
.tools/bin/kubectl (scripts/setup.sh does; kubectl 1.36, within one minor of the tests'
kube-apiserver), else the first `kubectl` on PATH. With neither, KUBECTL is that .tools/bin
path, and running it fails naming it."""

import os
import shutil

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS_KUBECTL = os.path.join(REPO, ".tools", "bin", "kubectl")


def find_kubectl():
    path = os.environ.get("PATH", os.defpath)
    found = shutil.which("kubectl", path=f"{os.path.dirname(TOOLS_KUBECTL)}{os.pathsep}{path}")
    return os.path.abspath(found) if found else TOOLS_KUBECTL


KUBECTL = find_kubectl()
