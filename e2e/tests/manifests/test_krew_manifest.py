"""scripts/lib/krew-manifest.py: the krew plugin manifest of a release, checked against the
rules krew applies to a manifest (its validation and its install steps, done here offline)
for archives made at test time, and refused for archives krew could not install."""

import hashlib
import io
import os
import re
import subprocess
import tarfile

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO, "scripts", "lib", "krew-manifest.py")
URL_BASE = "https://github.com/example/certctl/releases/download/v0.2.0"

# krew's own rules (sigs.k8s.io/krew internal/index/validation and installation).
KREW_API_VERSION = "krew.googlecontainertools.github.com/v1alpha2"
SAFE_PLUGIN_NAME = re.compile(r"[\w-]+")
WINDOWS_FORBIDDEN = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                     *(f"LPT{i}" for i in range(1, 10))}
SHA256 = re.compile(r"[a-f0-9]{64}")
SEMVER = re.compile(r"v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?")
KREW_PLATFORMS = [("windows", "386"), ("windows", "amd64"), ("windows", "arm64"),
                  ("linux", "386"), ("linux", "amd64"), ("linux", "arm"), ("linux", "arm64"),
                  ("linux", "ppc64le"), ("darwin", "386"), ("darwin", "amd64"),
                  ("darwin", "arm64")]
LICENSE_NAMES = {"license", "license.txt", "license.md", "licenses", "licenses.txt",
                 "licenses.md", "copying", "copying.txt"}


def selector_matches(selector, os_name, arch):
    labels = {"os": os_name, "arch": arch}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        value, values = labels.get(expr["key"]), expr.get("values") or []
        if expr["operator"] == "In" and value not in values:
            return False
        if expr["operator"] == "NotIn" and value in values:
            return False
    return True


def krew_validate(manifest, file_name=None):
    """What `krew install --manifest` and the index's validate-krew-manifest check before
    downloading anything; returns the list of broken rules."""
    problems = []
    spec = manifest.get("spec") or {}
    name = manifest.get("metadata", {}).get("name", "")
    if manifest.get("apiVersion") != KREW_API_VERSION:
        problems.append("apiVersion")
    if manifest.get("kind") != "Plugin":
        problems.append("kind")
    if not SAFE_PLUGIN_NAME.fullmatch(name) or name.upper() in WINDOWS_FORBIDDEN:
        problems.append("unsafe name")
    if file_name is not None and file_name != f"{name}.yaml":
        problems.append("file name")
    short = spec.get("shortDescription", "")
    if not short or "\n" in short or "\r" in short:
        problems.append("shortDescription")
    if not SEMVER.fullmatch(spec.get("version", "")):
        problems.append("version")
    platforms = spec.get("platforms") or []
    if not platforms:
        problems.append("no platform")
    for i, platform in enumerate(platforms):
        if not platform.get("uri"):
            problems.append(f"platforms[{i}].uri")
        if not SHA256.fullmatch(platform.get("sha256", "")):
            problems.append(f"platforms[{i}].sha256")
        if not platform.get("bin"):
            problems.append(f"platforms[{i}].bin")
        files = platform.get("files")
        if files is not None and (not files or any(not f.get("from") or not f.get("to")
                                                   for f in files)):
            problems.append(f"platforms[{i}].files")
        selector = platform.get("selector") or {}
        keys = list(selector.get("matchLabels") or {}) + [
            e["key"] for e in selector.get("matchExpressions") or []]
        if not keys or any(k not in ("os", "arch") for k in keys):
            problems.append(f"platforms[{i}].selector")
        if not any(selector_matches(selector, *p) for p in KREW_PLATFORMS):
            problems.append(f"platforms[{i}] matches no platform")
    for os_name, arch in KREW_PLATFORMS:
        matching = [p for p in platforms if selector_matches(p.get("selector") or {}, os_name, arch)]
        if len(matching) > 1:
            problems.append(f"overlapping selectors for {os_name}/{arch}")
    return problems


def krew_install(manifest, os_name, arch, archive_path, root):
    """krew's install of the platform for os/arch from a local archive (its
    --archive override): checksum, extraction, the `files` moves, the link
    bin/kubectl-<name> to `bin`. Returns the link's path."""
    name = manifest["metadata"]["name"]
    platform = next(p for p in manifest["spec"]["platforms"]
                    if selector_matches(p["selector"], os_name, arch))
    with open(archive_path, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == platform["sha256"]
    staging = os.path.join(root, "staging")
    with tarfile.open(archive_path, "r:gz") as archive:
        for member in archive.getmembers():
            assert member.isfile() or member.isdir(), member.name
            assert not os.path.isabs(member.name) and ".." not in member.name.split("/")
        archive.extractall(staging)
    install_dir = os.path.join(root, "store", name, manifest["spec"]["version"])
    os.makedirs(install_dir)
    for op in platform.get("files") or [{"from": "*", "to": "."}]:
        assert op["to"] == os.path.normpath(op["to"]), "krew wants a clean `to`"
        source = os.path.normpath(os.path.join(staging, op["from"]))
        assert os.path.exists(source), f"no {op['from']} in the archive"
        target = os.path.join(install_dir, op["to"])
        if op["to"] == ".":
            target = os.path.join(install_dir, os.path.basename(source))
        assert os.path.commonpath([install_dir, os.path.abspath(target)]) == install_dir
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.rename(source, target)
    binary = os.path.abspath(os.path.join(install_dir, platform["bin"]))
    assert os.path.commonpath([install_dir, binary]) == install_dir, "bin outside the plugin"
    assert os.path.isfile(binary), f"bin {platform['bin']} was not installed"
    installed = {n.lower() for n in os.listdir(install_dir)}
    assert installed & LICENSE_NAMES, f"no licence among {sorted(installed)}"
    link = os.path.join(root, "bin", "kubectl-" + name.replace("-", "_"))
    os.makedirs(os.path.dirname(link))
    os.symlink(binary, link)
    return link


def make_archive(folder, arch, version="0.2.0", binary=b"#!/bin/sh\necho certctl\n",
                 members=("certctl", "LICENSE"), prefix=""):
    path = os.path.join(folder, f"certctl-{version}-linux-{arch}.tar.gz")
    # The fastest level: a debug build of certctl is some 90 MB.
    with tarfile.open(path, "w:gz", compresslevel=1) as archive:
        for member in members:
            data = binary if member == "certctl" else b"Licence text\n"
            info = tarfile.TarInfo(prefix + member)
            info.size = len(data)
            info.mode = 0o755 if member == "certctl" else 0o644
            archive.addfile(info, io.BytesIO(data))
    return path


def run_script(*args):
    return subprocess.run(["/usr/bin/python3", SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_manifest_of_two_archives(tmp_path):
    amd64 = make_archive(tmp_path, "amd64")
    arm64 = make_archive(tmp_path, "arm64", binary=b"#!/bin/sh\necho arm\n", prefix="./")
    out = tmp_path / "dist" / "certctl.krew.yaml"
    result = run_script("--version", "0.2.0", "--url-base", URL_BASE + "/", "--out", str(out),
                        arm64, amd64)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    manifest = yaml.safe_load(text)

    assert krew_validate(manifest) == []
    # The index wants plugins/<name>.yaml: the same content validates under that name.
    assert krew_validate(manifest, file_name="certctl.yaml") == []
    assert manifest["apiVersion"] == KREW_API_VERSION
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"] == {"name": "certctl"}
    spec = manifest["spec"]
    assert spec["version"] == "v0.2.0"
    assert spec["homepage"] == "https://github.com/example/certctl"
    assert 0 < len(spec["shortDescription"]) <= 50
    assert "kubectl certctl check" in spec["description"]
    assert [p["selector"] for p in spec["platforms"]] == [
        {"matchLabels": {"os": "linux", "arch": "amd64"}},
        {"matchLabels": {"os": "linux", "arch": "arm64"}}]
    for platform, archive in zip(spec["platforms"], (amd64, arm64)):
        assert platform["uri"] == f"{URL_BASE}/{os.path.basename(archive)}"
        assert platform["sha256"] == sha256_file(archive)
        assert platform["bin"] == "certctl"
        assert platform["files"] == [{"from": "certctl", "to": "."},
                                     {"from": "LICENSE", "to": "."}]
    assert spec["platforms"][0]["sha256"] != spec["platforms"][1]["sha256"]

    # Deterministic: the same arguments in another order give the same bytes.
    again = tmp_path / "again.yaml"
    assert run_script("--version", "v0.2.0", "--url-base", URL_BASE, "--out", str(again),
                      amd64, arm64).returncode == 0
    assert again.read_bytes() == out.read_bytes()
    assert text.endswith("\n") and "\t" not in text


def test_krew_install_of_a_release_archive_links_kubectl_certctl(tmp_path, certctl_binary):
    with open(certctl_binary, "rb") as f:
        archive = make_archive(tmp_path, "amd64", binary=f.read())
    out = tmp_path / "certctl.krew.yaml"
    assert run_script("--version", "0.2.0", "--url-base", URL_BASE, "--homepage",
                      "https://certctl.example", "--out", str(out),
                      archive).returncode == 0
    manifest = yaml.safe_load(out.read_text())
    assert manifest["spec"]["homepage"] == "https://certctl.example"

    link = krew_install(manifest, "linux", "amd64", archive, str(tmp_path / "krew"))
    assert os.path.basename(link) == "kubectl-certctl"
    assert sorted(os.listdir(os.path.dirname(os.path.realpath(link)))) == ["LICENSE", "certctl"]
    helped = subprocess.run([link, "check", "--help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0, helped.stderr
    assert "Usage: kubectl certctl check [OPTIONS]" in helped.stdout.splitlines()


@pytest.mark.parametrize("case, expected", [
    ("wrong-version", "expected the name certctl-0.2.0-linux-<arch>.tar.gz"),
    ("unknown-arch", "krew knows no linux arch 'sparc'"),
    ("no-binary", "no file certctl at the archive's root"),
    ("no-license", "no file LICENSE at the archive's root"),
    ("nested", "no file certctl at the archive's root"),
    ("not-executable", "certctl is not executable"),
    ("same-arch", "a second archive for linux/amd64"),
    ("bad-version", "is not a semantic version"),
    ("http", "is not an https URL"),
    ("no-homepage", "give --homepage"),
])
def test_refuses_what_krew_could_not_install(tmp_path, case, expected):
    version, url_base = "0.2.0", URL_BASE
    archives = [make_archive(tmp_path, "amd64")]
    if case == "wrong-version":
        archives = [make_archive(tmp_path, "amd64", version="0.1.0")]
    elif case == "unknown-arch":
        archives = [make_archive(tmp_path, "sparc")]
    elif case == "no-binary":
        archives = [make_archive(tmp_path, "amd64", members=("LICENSE",))]
    elif case == "no-license":
        archives = [make_archive(tmp_path, "amd64", members=("certctl",))]
    elif case == "nested":
        archives = [make_archive(tmp_path, "amd64", prefix="certctl-0.2.0/")]
    elif case == "not-executable":
        path = os.path.join(tmp_path, "certctl-0.2.0-linux-amd64.tar.gz")
        with tarfile.open(path, "w:gz", compresslevel=1) as archive:
            for member, mode in (("certctl", 0o644), ("LICENSE", 0o644)):
                info = tarfile.TarInfo(member)
                info.size, info.mode = 1, mode
                archive.addfile(info, io.BytesIO(b"x"))
        archives = [path]
    elif case == "same-arch":
        other = tmp_path / "other"
        other.mkdir()
        archives.append(make_archive(other, "amd64"))
    elif case == "bad-version":
        version = "0.2"
    elif case == "http":
        url_base = "http://example.com/download"
    elif case == "no-homepage":
        url_base = "https://downloads.example.com/certctl/0.2.0"
    out = tmp_path / "dist" / "certctl.krew.yaml"
    result = run_script("--version", version, "--url-base", url_base, "--out", str(out),
                        *archives)
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert not out.exists()


def test_the_rules_above_catch_broken_manifests():
    """The offline rules are not vacuous: each catches the mistake it is for."""
    good = {"apiVersion": KREW_API_VERSION, "kind": "Plugin", "metadata": {"name": "certctl"},
            "spec": {"version": "v0.2.0", "shortDescription": "x", "platforms": [
                {"selector": {"matchLabels": {"os": "linux", "arch": "amd64"}},
                 "uri": "https://x/a.tar.gz", "sha256": "a" * 64, "bin": "certctl"}]}}
    assert krew_validate(good) == []
    broken = yaml.safe_load(yaml.safe_dump(good))
    broken["spec"]["version"] = "0.2.0"
    broken["metadata"]["name"] = "cert.ctl"
    broken["spec"]["platforms"].append(dict(good["spec"]["platforms"][0], files=[]))
    broken["spec"]["platforms"].append({"selector": {"matchLabels": {"os": "plan9"}},
                                        "uri": "u", "sha256": "A" * 64, "bin": ""})
    assert krew_validate(broken, file_name="certctl.krew.yaml") == [
        "unsafe name", "file name", "version", "platforms[1].files", "platforms[2].sha256",
        "platforms[2].bin", "platforms[2] matches no platform",
        "overlapping selectors for linux/amd64"]
