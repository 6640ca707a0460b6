"""The image as built, read without running it: its configuration and every file in it."""

import hashlib
import io
import json
import os
import subprocess
import tarfile

from harness.image import BINARY_LABEL, STATIC_BINARY, sha256

LIMIT = 10_000_000  # bytes


def inspect(image):
    out = subprocess.run(["podman", "image", "inspect", image], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return json.loads(out)[0]


def exported_files(image):
    """{path: TarInfo, ...} and {path: bytes} of regular files, from a created (never
    started) container's file system."""
    created = subprocess.run(["podman", "create", image], capture_output=True, text=True,
                             check=True, timeout=60).stdout.strip()
    try:
        tar = subprocess.run(["podman", "export", created], capture_output=True, check=True,
                             timeout=60).stdout
    finally:
        subprocess.run(["podman", "rm", "--force", created], capture_output=True, timeout=60)
    members, contents = {}, {}
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        for member in archive.getmembers():
            members[member.name.lstrip("./")] = member
            if member.isfile():
                contents[member.name.lstrip("./")] = archive.extractfile(member).read()
    return members, contents


def test_configuration(image):
    config = inspect(image)
    assert config["Config"]["User"] == "65532:65532"
    assert config["Config"]["Entrypoint"] == ["/usr/local/bin/certctl"]
    assert not config["Config"].get("Cmd")
    assert len(config["RootFS"]["Layers"]) == 1
    assert config["Size"] < LIMIT, config["Size"]
    labels = config["Config"]["Labels"]
    assert labels["org.opencontainers.image.title"] == "certctl"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert len(labels["org.opencontainers.image.revision"]) >= 40
    assert len(labels[BINARY_LABEL]) == 64
    if os.path.isfile(STATIC_BINARY):
        reported = json.loads(subprocess.run([STATIC_BINARY, "version", "-o", "json"],
                                             capture_output=True, text=True, check=True,
                                             timeout=30).stdout)
        assert labels["org.opencontainers.image.version"] == reported["version"]


def test_the_executable_the_ca_bundle_the_licences_and_nothing_else(image):
    members, contents = exported_files(image)
    licences = sorted(name for name in contents if name.startswith("licenses/"))
    assert sorted(set(contents) - set(licences)) == [
        "etc/ssl/certs/ca-certificates.crt", "usr/local/bin/certctl"]
    # certctl's own licence and one for each library compiled into it, none empty.
    assert "licenses/certctl.txt" in licences, licences
    assert {"licenses/openssl.txt", "licenses/curl.txt"} <= set(licences), licences
    assert all(len(contents[name]) > 100 for name in licences)
    assert b"Apache License" in contents["licenses/certctl.txt"]
    # The GPL texts glibc and the GCC runtime refer to, once, beside the files naming them.
    assert b"common-licenses/GPL-3" in contents["licenses/libstdc++.txt"]
    assert b"GNU GENERAL PUBLIC LICENSE" in contents["licenses/common-licenses/GPL-3"]
    assert b"common-licenses/LGPL-2.1" in contents["licenses/glibc.txt"]
    binary = members["usr/local/bin/certctl"]
    assert (binary.uid, binary.gid, binary.mode & 0o7777) == (0, 0, 0o755)
    digest = hashlib.sha256(contents["usr/local/bin/certctl"]).hexdigest()
    assert digest == inspect(image)["Config"]["Labels"][BINARY_LABEL]
    if os.path.isfile(STATIC_BINARY):
        assert digest == sha256(STATIC_BINARY)
    bundle = contents["etc/ssl/certs/ca-certificates.crt"].decode()
    assert bundle.count("-----BEGIN CERTIFICATE-----") > 50
    # Nothing else but the folders on the way to them (the container was never started, so
    # no mount point of the runtime's shows either).
    others = {name for name in members if name not in contents}
    assert others == {"usr", "usr/local", "usr/local/bin", "etc", "etc/ssl", "etc/ssl/certs",
                      "licenses", "licenses/common-licenses"}
