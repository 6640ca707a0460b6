"""A CA rotation done the way most tools do it, for the control run of the rotation test only
(never a product feature): a new CA and server certificate are made together, the Secret is
replaced whole, every caBundle is set to the new CA alone, and the pod sees the new files
when the kubelet gets round to updating its Secret volume (`propagation` seconds later; in
real clusters 30-100 s, here 1 s). In between, the webhook serves a certificate its callers
no longer trust: the failure the invariant test must be able to see.
"""

import base64
import json
import os
import subprocess
import tempfile
import time

__all__ = ["naive_rotation", "publish_folder"]


def publish_folder(cert_dir, files):
    """Writes `files` (name -> text) as a new timestamped set and swaps `..data` to it, the
    way the kubelet updates a Secret volume."""
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.") + f"{time.time_ns() % 10**9:09d}"
    target = os.path.join(cert_dir, stamp)
    os.mkdir(target)
    for name, text in files.items():
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            f.write(text)
    link = os.path.join(cert_dir, "..data_tmp")
    os.symlink(stamp, link)
    os.rename(link, os.path.join(cert_dir, "..data"))
    for name in files:
        path = os.path.join(cert_dir, name)
        if not os.path.islink(path):
            os.symlink(os.path.join("..data", name), path)


def naive_rotation(cluster, binary, namespace, service, secret, target_paths, cert_dir,
                   propagation=1.0):
    """Replaces CA, leaf and every bundle at once; the folder follows after `propagation`."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([binary, "generate", "--service", service, "-n", namespace,
                        "--out-dir", out], check=True, capture_output=True)
        files = {}
        for name in ("ca.crt", "ca.key", "tls.crt", "tls.key"):
            with open(os.path.join(out, name), encoding="utf-8") as f:
                files[name] = f.read()
    path = f"/api/v1/namespaces/{namespace}/secrets/{secret}"
    current = cluster.api("GET", path).json()
    current["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}
    resp = cluster.api("PUT", path, current)
    assert resp.status == 200, resp
    bundle = base64.b64encode(files["ca.crt"].encode()).decode()
    for target in target_paths:
        obj = cluster.api("GET", target).json()
        ops = [{"op": "replace", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
               for i in range(len(obj["webhooks"]))]
        resp = cluster.api("PATCH", target, json.dumps(ops),
                           content_type="application/json-patch+json")
        assert resp.status == 200, resp
    time.sleep(propagation)  # the kubelet's sync period, much shortened
    publish_folder(cert_dir, {k: files[k] for k in ("ca.crt", "tls.crt", "tls.key")})
