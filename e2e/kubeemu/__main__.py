"""python3 -m kubeemu --state-dir DIR [--policy FILE] [--bookmark-interval S]

Writes ca.crt, admin.token and admin.kubeconfig into DIR, then prints
"READY https://127.0.0.1:PORT" on stdout. SIGTERM or SIGINT: close every watch cleanly,
stop serving and exit 0.
"""

import argparse
import base64
import os
import secrets
import signal
import sys
import threading

from . import server, tlsgen
from .auth import Authenticator
from .store import Store


def write_kubeconfig(path, url, ca_path, token, user):
    with open(ca_path, "rb") as f:
        ca_data = base64.b64encode(f.read()).decode("ascii")
    text = f"""apiVersion: v1
kind: Config
current-context: kubeemu
clusters:
- name: kubeemu
  cluster:
    server: {url}
    certificate-authority-data: {ca_data}
users:
- name: {user}
  user:
    token: {token}
contexts:
- name: kubeemu
  context:
    cluster: kubeemu
    user: {user}
    namespace: default
"""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="kubeemu", description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--policy", help="RBAC policy file (JSON), re-read on change")
    parser.add_argument("--bookmark-interval", type=float, default=60.0,
                        help="seconds between watch BOOKMARK events (real server: ~60)")
    args = parser.parse_args(argv)

    os.makedirs(args.state_dir, exist_ok=True)
    paths = tlsgen.generate(args.state_dir)
    admin_token = secrets.token_hex(24)
    token_path = os.path.join(args.state_dir, "admin.token")
    fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(admin_token)  # no trailing newline: the in-cluster Python loader keeps it

    store = Store()
    emulator = server.Emulator(store, Authenticator(admin_token, args.policy), admin_token,
                               args.bookmark_interval)
    httpd = server.Server(emulator, server.make_ssl_context(paths["server.crt"],
                                                            paths["server.key"]))
    url = f"https://127.0.0.1:{httpd.server_address[1]}"
    write_kubeconfig(os.path.join(args.state_dir, "admin.kubeconfig"), url, paths["ca.crt"],
                     admin_token, "admin")

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    serving = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                               name="serve", daemon=True)
    serving.start()
    print(f"READY {url}", flush=True)
    stop.wait()
    store.close()  # ends every watch with its terminating chunk
    httpd.shutdown()
    httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
