"""The emulator's CA and serving certificate, made with the openssl CLI at start-up."""

import os
import subprocess

# Names a client may dial: loopback by name and address, and the in-cluster service name.
SERVER_SANS = ["DNS:localhost", "DNS:kubernetes.default.svc", "DNS:kubernetes.default",
               "DNS:kubernetes", "IP:127.0.0.1", "IP:::1"]

_CONFIG = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = {sans}
"""


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, timeout=60)


def generate(state_dir):
    """Write ca.crt/ca.key and server.crt/server.key into state_dir; returns their paths."""
    cfg = os.path.join(state_dir, "openssl.cnf")
    with open(cfg, "w", encoding="ascii") as f:
        f.write(_CONFIG.format(sans=",".join(SERVER_SANS)))
    p = {name: os.path.join(state_dir, name)
         for name in ("ca.crt", "ca.key", "server.crt", "server.key")}
    common = ["-x509", "-new", "-nodes", "-config", cfg, "-days", "30",
              "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    _openssl("req", *common, "-extensions", "ca_ext", "-subj", "/CN=kubeemu-ca",
             "-keyout", p["ca.key"], "-out", p["ca.crt"])
    _openssl("req", *common, "-extensions", "server_ext", "-subj", "/CN=kube-apiserver",
             "-CA", p["ca.crt"], "-CAkey", p["ca.key"],
             "-keyout", p["server.key"], "-out", p["server.crt"])
    os.remove(cfg)
    return p
