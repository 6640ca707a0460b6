"""Which kubectl the tests run: the first `kubectl` on PATH, else the one
scripts/install-kubectl.sh installs at .tools/bin/kubectl (scripts/setup.sh installs it
when the machine has no kubectl; scripts/test.sh and scripts/demo.sh put .tools/bin on
PATH). With neither, KUBECTL is that .tools/bin path, and running it fails naming it."""

import os
import shutil

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS_KUBECTL = os.path.join(REPO, ".tools", "bin", "kubectl")


def find_kubectl():
    path = os.environ.get("PATH", os.defpath)
    found = shutil.which("kubectl", path=f"{path}{os.pathsep}{os.path.dirname(TOOLS_KUBECTL)}")
    return os.path.abspath(found) if found else TOOLS_KUBECTL


KUBECTL = find_kubectl()
