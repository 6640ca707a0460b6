"""kubeemu: a Kubernetes API server emulator (kube-apiserver v1.32 on the wire).

Standard library only. Run as ``python3 -m kubeemu --state-dir DIR [--policy FILE]``
with ``e2e`` on PYTHONPATH. It answers as kube-apiserver v1.32 does; e2e/README.md
lists where it simplifies.
"""
