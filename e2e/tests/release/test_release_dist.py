"""What scripts/release.sh wrote into dist/, read as a user and a registry would read it:
the checksums, both executables, the two-architecture OCI index and its images, the chart
pinned by digest, the SBOMs and licences, the krew manifest.

The release is the one in CERTCTL_DIST (default dist/), which scripts/test.sh builds before
the end-to-end tests; without one, these tests skip naming the reason.
"""

import glob
import hashlib
import io
import json
import os
import subprocess
import tarfile

import pytest
import yaml

from harness.helm import REPO

DIST = os.environ.get("CERTCTL_DIST", os.path.join(REPO, "dist"))
ARCHES = {"amd64": "x86-64", "arm64": "aarch64"}  # Debian's name: file(1)'s machine name
IMAGE_LIMIT = 10_000_000  # bytes, uncompressed, each image


@pytest.fixture(scope="module")
def dist():
    charts = glob.glob(os.path.join(DIST, "certctl-*.tgz"))
    if not charts:
        pytest.skip(f"no release in {DIST} (scripts/release.sh VERSION)")
    version = os.path.basename(charts[0])[len("certctl-"):-len(".tgz")]
    return DIST, version


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def test_the_checksums_cover_every_file_and_hold(dist):
    folder, _ = dist
    listed = {}
    for line in read(os.path.join(folder, "SHA256SUMS"), "r").splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    on_disk = {os.path.relpath(os.path.join(d, f), folder)
               for d, _, files in os.walk(folder) for f in files} - {"SHA256SUMS",
                                                                     "SHA256SUMS.sig"}
    assert set(listed) == on_disk
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=folder, check=True,
                   timeout=120)


def test_each_executable_is_static_for_its_architecture_and_reports_the_version(dist):
    folder, version = dist
    for arch, machine in ARCHES.items():
        path = os.path.join(folder, f"certctl-{version}-linux-{arch}")
        described = subprocess.run(["file", "-b", path], capture_output=True, text=True,
                                   check=True, timeout=30).stdout
        assert machine in described and "static-pie" in described, described
        runner = [] if arch == "amd64" else ["qemu-aarch64-static"]
        out = subprocess.run(runner + [path, "version", "-o", "json"], capture_output=True,
                             text=True, check=True, timeout=60).stdout
        assert json.loads(out)["version"] == version
        # The plugin archive holds the same executable and the licence.
        with tarfile.open(os.path.join(folder, f"certctl-{version}-linux-{arch}.tar.gz")) as tar:
            assert sorted(tar.getnames()) == ["LICENSE", "certctl"]
            assert tar.extractfile("certctl").read() == read(path)
            assert tar.getmember("certctl").mode & 0o111


def oci_layout(path):
    """{blob digest: bytes} and index.json of an OCI archive."""
    blobs = {}
    with tarfile.open(path) as tar:
        index = json.load(tar.extractfile("index.json"))
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith("blobs/sha256/"):
                blobs["sha256:" + member.name.rsplit("/", 1)[1]] = tar.extractfile(member).read()
    return index, blobs


def test_the_oci_archive_holds_one_index_of_two_small_non_root_images(dist):
    folder, version = dist
    index, blobs = oci_layout(os.path.join(folder, f"certctl-{version}.oci.tar"))
    (entry,) = index["manifests"]
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == version
    digest = read(os.path.join(folder, f"certctl-{version}.index-digest"), "r").strip()
    assert entry["digest"] == digest
    for digest_, blob in blobs.items():
        assert sha256(blob) == digest_.split(":")[1]
    image_index = json.loads(blobs[digest])
    assert image_index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    platforms = {m["platform"]["architecture"]: m for m in image_index["manifests"]}
    assert set(platforms) == set(ARCHES)
    for arch, descriptor in platforms.items():
        assert descriptor["platform"]["os"] == "linux"
        manifest = json.loads(blobs[descriptor["digest"]])
        config = json.loads(blobs[manifest["config"]["digest"]])
        assert config["architecture"] == arch and config["os"] == "linux"
        assert config["config"]["User"] == "65532:65532"
        assert config["config"]["Entrypoint"] == ["/usr/local/bin/certctl"]
        labels = config["config"]["Labels"]
        assert labels["org.opencontainers.image.version"] == version
        assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
        assert labels["org.opencontainers.image.source"].startswith("https://")
        assert len(labels["org.opencontainers.image.revision"]) >= 40
        (layer,) = manifest["layers"]
        with tarfile.open(fileobj=io.BytesIO(blobs[layer["digest"]])) as tar:
            files = {m.name.lstrip("./"): m for m in tar.getmembers() if m.isfile()}
            executable = tar.extractfile(files["usr/local/bin/certctl"]).read()
        assert sum(m.size for m in files.values()) < IMAGE_LIMIT
        # The image holds the very executable published beside it, and the licences.
        assert executable == read(os.path.join(folder, f"certctl-{version}-linux-{arch}"))
        assert any(name.startswith("licenses/") for name in files)


def test_the_chart_pins_the_index_by_digest(dist):
    folder, version = dist
    digest = read(os.path.join(folder, f"certctl-{version}.index-digest"), "r").strip()
    with tarfile.open(os.path.join(folder, f"certctl-{version}.tgz")) as tar:
        chart = yaml.safe_load(tar.extractfile("certctl/Chart.yaml"))
        values = yaml.safe_load(tar.extractfile("certctl/values.yaml"))
    assert chart["version"] == version and chart["appVersion"] == version
    assert values["image"]["digest"] == digest
    assert values["image"]["repository"].endswith("/certctl")
    # Artifact Hub lists the same image, and finds the chart's home and sources.
    images = yaml.safe_load(chart["annotations"]["artifacthub.io/images"])
    assert images == [{"name": "certctl",
                       "image": f"{values['image']['repository']}@{digest}"}], images
    assert chart["home"] and chart["sources"] and chart["icon"] and chart["maintainers"]


def test_each_executable_has_an_sbom_naming_it_and_licence_texts(dist):
    folder, version = dist
    for arch in ARCHES:
        document = json.loads(read(os.path.join(folder, f"certctl-{version}-linux-{arch}.spdx.json")))
        assert document["spdxVersion"] == "SPDX-2.3"
        executable = sha256(read(os.path.join(folder, f"certctl-{version}-linux-{arch}")))
        checksums = [c["checksumValue"] for p in document["packages"]
                     for c in p.get("checksums", []) if c["algorithm"] == "SHA256"]
        assert executable in checksums
        names = {p["name"] for p in document["packages"]}
        assert {"openssl", "curl", "yaml-cpp"} <= names, names
        licences = glob.glob(os.path.join(folder, "licenses", f"linux-{arch}", "*"))
        assert len(licences) >= len(names) - 1 and all(os.path.getsize(p) > 100 for p in licences)


def test_the_krew_manifest_names_both_archives_with_their_checksums(dist):
    folder, version = dist
    manifest = yaml.safe_load(read(os.path.join(folder, "certctl.krew.yaml"), "r"))
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "certctl"
    assert manifest["spec"]["version"] == f"v{version}"
    platforms = manifest["spec"]["platforms"]
    assert {p["selector"]["matchLabels"]["arch"] for p in platforms} == set(ARCHES)
    for platform in platforms:
        arch = platform["selector"]["matchLabels"]["arch"]
        archive = f"certctl-{version}-linux-{arch}.tar.gz"
        assert platform["uri"].endswith(f"/v{version}/{archive}")
        assert platform["sha256"] == sha256(read(os.path.join(folder, archive)))
