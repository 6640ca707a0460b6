"""scripts/publish.sh against a real registry (Debian's docker-registry on loopback), with a
release that scripts/release.sh built for it; then the published release used as a user
uses it:

* publish.sh refuses a registry the release was not built for and pushes nothing; it pushes
  the image index with both images under its own digest and the chart as an OCI artifact,
  says what it pushed, and a second run changes nothing. The registry's HTTP API is read
  directly to check it;
* the release is signed (cosign): publish.sh refuses to push it without its key or with
  another, signs the index and the chart once, and `cosign verify` with the release's
  cosign.pub accepts both by tag while another key is refused; SHA256SUMS.sig verifies;
* `helm install` from oci://127.0.0.1:PORT/charts/certctl against the emulator, mode job (the
  hook Jobs run to completion with the certctl under test) and mode sidecar (the release's
  objects are there): every workload names the image by the index's digest;
* `podman pull` of that image for amd64 and arm64 (qemu-user-static through binfmt_misc, as
  scripts/setup-arm64.sh registers it; without it the arm64 half fails), and `certctl
  version` run from each.
"""

import hashlib
import json
import os
import subprocess
import urllib.request

import pytest
import yaml

from harness.certctl import crd, webhook_configuration
from harness.helm import REPO, Helm, by_kind, find_helm
from harness.signing import cosign_path, generate_key

PUBLISH_SH = os.path.join(REPO, "scripts", "publish.sh")
NS = "infra"           # mode job, with its hooks run
RELEASE = "rel"
SERVICE_ACCOUNT = f"system:serviceaccount:{NS}:{RELEASE}-certctl"
SIDECAR_NS = "sidecar"  # mode sidecar, in the same emulator
SIDECAR_RELEASE = "side"
# The chart values of the chart's own tests (test_helm_install.py), without `image`: the
# packaged chart's pinned image is what is under test.
JOB_VALUES = {"mode": "job", "webhook": {"service": "hook"},
              "targets": {"validatingWebhooks": ["hook"], "crds": ["widgets.hook.io"]},
              "job": {"waitForTargets": "30s"}}
SIDECAR_VALUES = {"mode": "sidecar", "webhook": {"service": "hook"},
                  "targets": {"validatingWebhooks": ["hook"], "crds": ["widgets.hook.io"]},
                  "sidecar": {"webhook": {"image": {"repository": "registry.example/hook",
                                                    "tag": "1.0"}}}}
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")
BINFMT = "/proc/sys/fs/binfmt_misc"


def publish(registry_name, dist, key):
    """publish.sh with `key` (a SigningKey) as CERTCTL_SIGNING_KEY, or with none."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CERTCTL_SIGNING_KEY", "COSIGN_PASSWORD")}
    if key is not None:
        env.update(key.env())
    return subprocess.run([PUBLISH_SH, registry_name, dist], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL, timeout=300)


def cosign(*args):
    return subprocess.run([cosign_path(), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)


def signature_tag(digest):
    """The tag under which cosign stores the signatures of `digest`."""
    return digest.replace(":", "-") + ".sig"


def registry_get(registry, path, accept=None):
    """(headers, body) of GET http://REGISTRY/v2/PATH."""
    request = urllib.request.Request(f"{registry.url}/v2/{path}",
                                     headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return resp.headers, resp.read()


def catalog(registry):
    return sorted(json.loads(registry_get(registry, "_catalog")[1])["repositories"])


def sha256(data):
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


# One test: the release is built once, and the steps depend on each other. (Under
# pytest-xdist, tests of one module may run in different workers, each with its own
# module fixtures: that would build and publish the release once per worker.)
@pytest.mark.time_limit(900)
def test_a_release_published_to_a_registry_installs_and_runs(registry_release, registry,
                                                             signing_key, cluster, kubelet,
                                                             tmp_path):
    refuses_a_registry_the_release_was_not_built_for(registry, registry_release, signing_key)
    refuses_to_push_a_signed_release_without_its_key(registry, registry_release, tmp_path)
    pushes_the_index_with_its_digest_and_the_chart(registry, registry_release, signing_key)
    verifies_with_the_releases_key_only(registry, registry_release, tmp_path)
    helm = Helm(find_helm(), tmp_path / "helm")
    os.makedirs(helm.home, exist_ok=True)
    installs_mode_job(helm, cluster, kubelet, registry_release)
    installs_mode_sidecar(helm, cluster, registry_release)
    for arch in ("amd64", "arm64"):
        runs_on(arch, registry_release)


def refuses_a_registry_the_release_was_not_built_for(registry, release, key):
    # The same registry under another name is another registry to the chart.
    refused = publish(f"localhost:{registry.port}", release.dir, key)
    assert refused.returncode == 1, refused
    assert f"built for {registry.host}" in refused.stderr, refused.stderr
    assert (f"CERTCTL_REGISTRY=localhost:{registry.port} scripts/release.sh "
            f"{release.version}") in refused.stderr, refused.stderr
    assert catalog(registry) == [], "nothing is pushed"


def refuses_to_push_a_signed_release_without_its_key(registry, release, tmp_path):
    unsigned = publish(registry.host, release.dir, None)
    assert unsigned.returncode == 1, unsigned
    assert "is signed (cosign.pub): set CERTCTL_SIGNING_KEY" in unsigned.stderr, unsigned.stderr
    other = publish(registry.host, release.dir, generate_key(str(tmp_path / "other"), "x"))
    assert other.returncode == 1, other
    assert "is not the key of the release" in other.stderr, other.stderr
    assert catalog(registry) == [], "nothing is pushed"


def signature_layers(registry, repository, digest):
    _, raw = registry_get(registry, f"{repository}/manifests/{signature_tag(digest)}",
                          accept="application/vnd.oci.image.manifest.v1+json")
    return json.loads(raw)["layers"]


def pushes_the_index_with_its_digest_and_the_chart(registry, release, key):
    first = publish(registry.host, release.dir, key)
    assert first.returncode == 0, f"publish.sh failed:\n{first.stdout}{first.stderr}"
    assert first.stdout.splitlines() == [
        f"image: {release.image} (tag {release.version}; linux/amd64 linux/arm64)",
        f"chart: {release.chart} version {release.version}",
        f"install: helm install RELEASE {release.chart} --version {release.version} "
        "--plain-http",
        "verify: cosign verify --key cosign.pub --insecure-ignore-tlog=true "
        f"--allow-http-registry {release.registry}/certctl:{release.version}"]
    chart_headers, _ = registry_get(registry, f"charts/certctl/manifests/{release.version}",
                                    accept="application/vnd.oci.image.manifest.v1+json")
    chart_digest = chart_headers["Docker-Content-Digest"]
    signatures = {"certctl": signature_layers(registry, "certctl", release.digest),
                  "charts/certctl": signature_layers(registry, "charts/certctl", chart_digest)}
    assert [len(layers) for layers in signatures.values()] == [1, 1], signatures
    # Idempotent: the second run pushes the same things, signs nothing again and says the
    # same.
    second = publish(registry.host, release.dir, key)
    assert second.returncode == 0, f"publish.sh again failed:\n{second.stderr}"
    assert second.stdout == first.stdout
    assert "signing" not in second.stderr, second.stderr
    assert signature_layers(registry, "certctl", release.digest) == signatures["certctl"]
    assert signature_layers(registry, "charts/certctl", chart_digest) == \
        signatures["charts/certctl"]

    # Read back without skopeo: the tag serves the index, byte for byte the digest.
    headers, body = registry_get(registry, f"certctl/manifests/{release.version}",
                                 accept=",".join(INDEX_TYPES))
    assert sha256(body) == release.digest
    assert headers["Docker-Content-Digest"] == release.digest
    index = json.loads(body)
    assert index["mediaType"] == INDEX_TYPES[0]
    platforms = {}
    for entry in index["manifests"]:
        _, raw = registry_get(registry, f"certctl/manifests/{entry['digest']}",
                              accept=entry["mediaType"])
        assert sha256(raw) == entry["digest"]
        manifest = json.loads(raw)
        for blob in manifest["layers"] + [manifest["config"]]:
            assert sha256(registry_get(registry, f"certctl/blobs/{blob['digest']}")[1]) == \
                blob["digest"]
        platforms[entry["platform"]["architecture"]] = entry["platform"]["os"]
    assert platforms == {"amd64": "linux", "arm64": "linux"}

    # The chart: its tag (and its signature's), and its one layer is the release's
    # packaged chart.
    tags = json.loads(registry_get(registry, "charts/certctl/tags/list")[1])["tags"]
    assert sorted(tags) == [release.version, signature_tag(chart_digest)]
    _, raw = registry_get(registry, f"charts/certctl/manifests/{release.version}",
                          accept="application/vnd.oci.image.manifest.v1+json")
    [layer] = json.loads(raw)["layers"]
    assert layer["mediaType"] == "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
    with open(os.path.join(release.dir, f"certctl-{release.version}.tgz"), "rb") as f:
        assert layer["digest"] == sha256(f.read())
    assert catalog(registry) == ["certctl", "charts/certctl"]


def verifies_with_the_releases_key_only(registry, release, tmp_path):
    """What a user does (docs/release.md): cosign verify by tag with the release's key."""
    public_key = os.path.join(release.dir, "cosign.pub")
    chart_digest = registry_get(registry, f"charts/certctl/manifests/{release.version}",
                                accept="application/vnd.oci.image.manifest.v1+json")[0][
                                    "Docker-Content-Digest"]
    stranger = generate_key(str(tmp_path / "stranger"), "y")
    for reference, digest in ((f"{registry.host}/certctl:{release.version}", release.digest),
                              (f"{registry.host}/charts/certctl:{release.version}",
                               chart_digest)):
        verified = cosign("verify", "--key", public_key, "--insecure-ignore-tlog=true",
                          "--allow-http-registry", reference)
        assert verified.returncode == 0, verified.stderr
        [claim] = json.loads(verified.stdout)
        assert claim["critical"]["image"]["docker-manifest-digest"] == digest
        assert claim["critical"]["identity"]["docker-reference"] == reference.rsplit(":", 1)[0]
        refused = cosign("verify", "--key", stranger.public, "--insecure-ignore-tlog=true",
                         "--allow-http-registry", reference)
        assert refused.returncode != 0, refused.stdout
    blob = cosign("verify-blob", "--key", public_key, "--insecure-ignore-tlog=true",
                  "--signature", os.path.join(release.dir, "SHA256SUMS.sig"),
                  os.path.join(release.dir, "SHA256SUMS"))
    assert blob.returncode == 0, blob.stderr
    with open(os.path.join(release.dir, "SHA256SUMS"), encoding="utf-8") as f:
        assert "cosign.pub" in f.read()


def install(helm, cluster, release, name, namespace, values, *extra):
    """`helm install` of the published chart, by its OCI reference, into the emulator."""
    proc = helm.run("install", name, release.chart, "--version", release.version,
                    "--plain-http", "--namespace", namespace, *extra, values=values,
                    kubeconfig=cluster.kubeconfig())
    assert proc.returncode == 0, f"helm install failed:\n{proc.stdout}{proc.stderr}"


def images(pod_spec):
    return [c["image"] for c in (pod_spec.get("initContainers") or []) +
            (pod_spec.get("containers") or [])]


def installs_mode_job(helm, cluster, kubelet, release):
    cluster.kubectl("create", "namespace", NS)
    for obj in (webhook_configuration("ValidatingWebhookConfiguration", "hook", ["a.hook.io"]),
                crd("widgets.hook.io")):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(obj))
    install(helm, cluster, release, RELEASE, NS, JOB_VALUES, "--wait", "--timeout", "25s")
    secret_job = kubelet.wait_for(f"{RELEASE}-certctl-secret")
    inject_job = kubelet.wait_for(f"{RELEASE}-certctl-inject")
    assert secret_job.succeeded and inject_job.succeeded, (secret_job.runs, inject_job.runs)
    assert [r.user for r in secret_job.runs + inject_job.runs] == [SERVICE_ACCOUNT] * 2
    assert f"created secret/{NS}/webhook-server-cert" in secret_job.runs[0].stderr
    assert "injected the CA bundle into 2 of 2" in inject_job.runs[0].stderr
    # hook-succeeded: the Jobs are gone; the release record keeps what they were.
    assert json.loads(cluster.kubectl("get", "jobs", "-n", NS, "-o", "json").stdout)[
        "items"] == []
    hooks = helm.run("get", "hooks", RELEASE, "--namespace", NS,
                     kubeconfig=cluster.kubeconfig())
    assert hooks.returncode == 0, hooks.stderr
    jobs = by_kind([doc for doc in yaml.safe_load_all(hooks.stdout) if doc], "Job")
    assert sorted(job["metadata"]["name"] for job in jobs) == [
        f"{RELEASE}-certctl-inject", f"{RELEASE}-certctl-secret"]
    for job in jobs:
        assert images(job["spec"]["template"]["spec"]) == [release.image], job["metadata"]


def installs_mode_sidecar(helm, cluster, release):
    cluster.kubectl("create", "namespace", SIDECAR_NS)
    # No --wait: the emulator stores Deployments but runs no pods.
    install(helm, cluster, release, SIDECAR_RELEASE, SIDECAR_NS, SIDECAR_VALUES)
    assert json.loads(cluster.kubectl("get", "jobs", "-n", SIDECAR_NS, "-o", "json").stdout)[
        "items"] == []
    for kind in ("service", "serviceaccount", "role", "rolebinding"):
        assert cluster.kubectl("get", kind, "-n", SIDECAR_NS, "-o", "name").stdout.strip(), kind
    pod = json.loads(cluster.kubectl("get", "deployment", "hook", "-n", SIDECAR_NS, "-o",
                                     "json").stdout)["spec"]["template"]["spec"]
    # The native sidecar (certctl), then the webhook's own container.
    assert [c["name"] for c in pod["initContainers"]] == ["certctl"]
    assert images(pod) == [release.image, "registry.example/hook:1.0"]


def binfmt_aarch64():
    """The enabled binfmt_misc entry that runs aarch64 executables, or None."""
    if not os.path.isdir(BINFMT):
        return None
    for name in sorted(os.listdir(BINFMT)):
        if name in ("register", "status"):
            continue
        try:
            with open(os.path.join(BINFMT, name), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        if lines[:1] == ["enabled"] and any(
                line.startswith("interpreter") and "aarch64" in line for line in lines):
            return name
    return None


def podman(*args, timeout=120):
    return subprocess.run(["podman", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def runs_on(arch, release):
    """`podman pull --arch` of the image by the chart's digest, then `certctl version` run
    from it; what the pull named is removed again."""
    if arch == "arm64" and binfmt_aarch64() is None:
        pytest.fail("no aarch64 interpreter is registered with binfmt_misc, so the arm64 "
                    "image cannot run here: scripts/setup-arm64.sh registers qemu-user-static")
    pulled = podman("pull", "--quiet", "--tls-verify=false", "--arch", arch, release.image)
    assert pulled.returncode == 0, pulled.stderr
    image_id = pulled.stdout.strip().splitlines()[-1]
    try:
        inspected = json.loads(podman("image", "inspect", image_id).stdout)[0]
        assert (inspected["Os"], inspected["Architecture"]) == ("linux", arch), image_id
        assert inspected["Config"]["User"] == "65532:65532"
        # By ID: the reference names whichever architecture was pulled last.
        ran = podman("run", "--rm", "--pull=never", "--network", "none", "--arch", arch,
                     image_id, "version")
        assert ran.returncode == 0, f"{arch}: {ran.stderr}"
        assert ran.stdout.startswith(f"certctl {release.version} (commit "), ran.stdout
    finally:
        # Untags what the pull named; an image that had no other name goes with it.
        podman("rmi", release.image)
