#!/usr/bin/python3
"""Writes the krew plugin manifest of a certctl release.

Usage: krew-manifest.py --version 0.2.0 --url-base URL [--homepage URL] --out FILE ARCHIVE...

Each ARCHIVE is certctl-<version>-linux-<arch>.tar.gz with the executable `certctl` and
`LICENSE` at its root. The manifest (krew.googlecontainertools.github.com/v1alpha2, kind
Plugin, name certctl) gets one platform per archive: a selector on os and arch, the download
URL <url-base>/<archive name>, the archive's SHA-256, the two files and `bin: certctl`, which
krew links as kubectl-certctl. --homepage defaults to the repository when --url-base is a
GitHub release download URL. The same arguments always give the same bytes: platforms are
sorted by arch and the YAML is written with a fixed key order.
"""
import argparse
import os
import re
import sys
import tarfile

import yaml

from file_digest import sha256_hex

NAME = "certctl"
API_VERSION = "krew.googlecontainertools.github.com/v1alpha2"
# The Linux architectures krew installs for (GOARCH names).
LINUX_ARCHES = ("386", "amd64", "arm", "arm64", "ppc64le")
# Semantic versioning 2.0.0, as krew parses spec.version (after its leading "v").
SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?"
    r"(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?")
GITHUB_RELEASE = re.compile(r"(https://github\.com/[^/]+/[^/]+)/releases/download/[^/]+")

SHORT_DESCRIPTION = "Check and rotate admission webhook certificates"
DESCRIPTION = """\
certctl keeps the TLS trust between the Kubernetes API server and an admission
webhook: a self-signed CA and a server certificate in a Secret, and the CA bundle
injected into every webhook configuration, CRD conversion webhook and APIService
that calls the webhook.

As a kubectl plugin it is mostly used to check that trust from a terminal or CI:

  kubectl certctl check --secret webhook-server-cert -n my-namespace \\
      --service my-webhook --validating-webhook my-webhook

validates the pair in the Secret (SANs, expiry, key, CA), every caBundle and
whether the API server can call the webhook; it exits 0 when all is well, 1 with
one line per finding, 2 when it could not run. generate, rotate, job, run, wait
and version work the same way. certctl reads the kubeconfig itself: put
--kubeconfig, --context and -n after `certctl`.
"""


class ManifestError(Exception):
    pass


def parse_args(argv):
    parser = argparse.ArgumentParser(description="Write certctl's krew plugin manifest.")
    parser.add_argument("--version", required=True, help="release version, e.g. 0.2.0")
    parser.add_argument("--url-base", required=True,
                        help="https URL the archives are downloaded from")
    parser.add_argument("--homepage", help="project page (default: the GitHub repository "
                                           "of --url-base)")
    parser.add_argument("--out", required=True, help="manifest file to write")
    parser.add_argument("archives", nargs="+", metavar="ARCHIVE")
    return parser.parse_args(argv)


def check_version(version):
    bare = version[1:] if version.startswith("v") else version
    if not SEMVER.fullmatch(bare):
        raise ManifestError(f"--version {version!r} is not a semantic version like 0.2.0")
    return bare


def check_url_base(url_base):
    if not re.fullmatch(r"https://[^/\s]+(/\S*)?", url_base):
        raise ManifestError(f"--url-base {url_base!r} is not an https URL")
    return url_base.rstrip("/")


def homepage_for(homepage, url_base):
    if homepage:
        if not re.fullmatch(r"https://[^/\s]+(/\S*)?", homepage):
            raise ManifestError(f"--homepage {homepage!r} is not an https URL")
        return homepage
    match = GITHUB_RELEASE.match(url_base)
    if not match:
        raise ManifestError("give --homepage: it can only be derived from a GitHub release "
                            "URL (https://github.com/OWNER/REPO/releases/download/TAG)")
    return match.group(1)


def root_member(archive, name):
    """The regular file `name` at the archive's root (also written as ./name), or None."""
    for member in archive.getmembers():
        if os.path.normpath(member.name) == name:
            return member if member.isfile() else None
    return None


def check_archive(path, version):
    """The arch an archive is for, after checking its name and what krew will install."""
    base = os.path.basename(path)
    match = re.fullmatch(re.escape(f"{NAME}-{version}-linux-") + r"([0-9a-z]+)\.tar\.gz", base)
    if not match:
        raise ManifestError(f"{path}: expected the name {NAME}-{version}-linux-<arch>.tar.gz")
    arch = match.group(1)
    if arch not in LINUX_ARCHES:
        raise ManifestError(f"{path}: krew knows no linux arch {arch!r} "
                            f"(one of {', '.join(LINUX_ARCHES)})")
    try:
        with tarfile.open(path, "r:gz") as archive:
            binary = root_member(archive, NAME)
            license_file = root_member(archive, "LICENSE")
    except (OSError, tarfile.TarError) as error:
        raise ManifestError(f"{path}: not a readable .tar.gz: {error}") from error
    if binary is None:
        raise ManifestError(f"{path}: no file {NAME} at the archive's root")
    if not binary.mode & 0o111:
        raise ManifestError(f"{path}: {NAME} is not executable (mode {binary.mode:o})")
    if license_file is None:
        raise ManifestError(f"{path}: no file LICENSE at the archive's root")
    return arch


def build_manifest(version, url_base, homepage, archives):
    platforms = {}
    for path in archives:
        arch = check_archive(path, version)
        if arch in platforms:
            raise ManifestError(f"{path}: a second archive for linux/{arch}")
        platforms[arch] = {
            "selector": {"matchLabels": {"os": "linux", "arch": arch}},
            "uri": f"{url_base}/{os.path.basename(path)}",
            "sha256": sha256_hex(path),
            # Named one by one: krew copies nothing else, and its index wants the licence.
            "files": [{"from": NAME, "to": "."}, {"from": "LICENSE", "to": "."}],
            "bin": NAME,
        }
    return {
        "apiVersion": API_VERSION,
        "kind": "Plugin",
        "metadata": {"name": NAME},
        "spec": {
            "version": f"v{version}",
            "homepage": homepage,
            "shortDescription": SHORT_DESCRIPTION,
            "description": DESCRIPTION,
            "platforms": [platforms[arch] for arch in sorted(platforms)],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Keys in the order given; text of several lines as a literal block."""


def _represent_str(dumper, text):
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_str)


def render(manifest):
    return yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=False, width=100)


def write_atomically(path, text):
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, path)


def main(argv):
    args = parse_args(argv)
    try:
        version = check_version(args.version)
        url_base = check_url_base(args.url_base)
        homepage = homepage_for(args.homepage, url_base)
        manifest = build_manifest(version, url_base, homepage, args.archives)
    except ManifestError as error:
        print(f"krew-manifest.py: {error}", file=sys.stderr)
        return 1
    write_atomically(args.out, render(manifest))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
