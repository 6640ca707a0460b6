"""The SHA-256 of a file, read in blocks: shared by the release's Python helpers
(sbom.py, krew-manifest.py), which run with this folder first on sys.path."""

import hashlib


def sha256_hex(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
