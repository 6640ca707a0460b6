"""cosign for the release tests: the one pinned in scripts/go-tools/cosign, and key pairs
made with it.

    key = generate_key(folder, password)   # cosign.key and cosign.pub in folder
    env.update(key.env())                  # CERTCTL_SIGNING_KEY, COSIGN_PASSWORD
"""

import os
import subprocess
from dataclasses import dataclass

from .helm import REPO

__all__ = ["SigningKey", "cosign_path", "generate_key"]

INSTALL_GO_TOOL = os.path.join(REPO, "scripts", "install-go-tool.sh")
COSIGN = os.path.join(REPO, ".tools", "bin", "cosign")
COSIGN_BUILD_BOUND = 900  # seconds: a first build from the Go module proxy, on a busy machine


@dataclass
class SigningKey:
    """A cosign key pair (`cosign generate-key-pair`) and the password of its private key."""
    private: str
    public: str
    password: str

    def env(self):
        return {"CERTCTL_SIGNING_KEY": self.private, "COSIGN_PASSWORD": self.password}


def cosign_path():
    """.tools/bin/cosign, built by scripts/install-go-tool.sh (scripts/setup.sh runs it)."""
    proc = subprocess.run([INSTALL_GO_TOOL, "cosign"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=COSIGN_BUILD_BOUND)
    assert proc.returncode == 0, f"scripts/install-go-tool.sh cosign failed:\n{proc.stderr}"
    return COSIGN


def generate_key(folder, password):
    os.makedirs(folder, exist_ok=True)
    proc = subprocess.run([cosign_path(), "generate-key-pair"], cwd=folder,
                          env=dict(os.environ, COSIGN_PASSWORD=password), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return SigningKey(os.path.join(folder, "cosign.key"), os.path.join(folder, "cosign.pub"),
                      password)
