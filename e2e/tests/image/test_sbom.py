"""The software bill of materials of the static executable (scripts/lib/sbom.py): an SPDX 2.3
document that follows the specification's rules, names every library certctl is made of at
the version dpkg has installed, and licence files that hold the complete texts.

The libraries expected are named here and their versions asked from dpkg by package name,
apart from how sbom.py finds them (the build's files); license expressions are checked with
Debian's python3-license-expression and its copy of the SPDX licence list.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import urllib.parse

import pytest

from harness.helm import REPO
from harness.image import STATIC_BINARY

SBOM = os.path.join(REPO, "scripts", "lib", "sbom.py")
ARM64_BINARY = os.environ.get("CERTCTL_STATIC_ARM64_BINARY",
                              os.path.join(REPO, "build", "static-arm64", "certctl"))
LIBRARIES = ["glibc", "libstdc++", "libgcc", "openssl", "yaml-cpp", "curl", "nlohmann-json",
             "spdlog", "fmt", "CLI11", "tl-expected"]
VERSION = "0.2.0"
EPOCH = "1700000000"  # 2023-11-14T22:13:20Z

# SPDX 2.3: the values a field may take (clauses 6-11 of the specification).
CHECKSUM_LENGTHS = {"SHA1": 40, "SHA224": 56, "SHA256": 64, "SHA384": 96, "SHA512": 128,
                    "SHA3-256": 64, "SHA3-384": 96, "SHA3-512": 128, "MD5": 32}
PURPOSES = {"APPLICATION", "FRAMEWORK", "LIBRARY", "CONTAINER", "OPERATING-SYSTEM", "DEVICE",
            "FIRMWARE", "SOURCE", "ARCHIVE", "FILE", "INSTALL", "OTHER"}
REF_CATEGORIES = {"SECURITY", "PACKAGE-MANAGER", "PERSISTENT-ID", "OTHER"}
RELATIONSHIPS = {
    "DESCRIBES", "DESCRIBED_BY", "CONTAINS", "CONTAINED_BY", "DEPENDS_ON", "DEPENDENCY_OF",
    "DEPENDENCY_MANIFEST_OF", "BUILD_DEPENDENCY_OF", "DEV_DEPENDENCY_OF",
    "OPTIONAL_DEPENDENCY_OF", "PROVIDED_DEPENDENCY_OF", "TEST_DEPENDENCY_OF",
    "RUNTIME_DEPENDENCY_OF", "EXAMPLE_OF", "GENERATES", "GENERATED_FROM", "ANCESTOR_OF",
    "DESCENDANT_OF", "VARIANT_OF", "DISTRIBUTION_ARTIFACT", "PATCH_FOR", "PATCH_APPLIED",
    "COPY_OF", "FILE_ADDED", "FILE_DELETED", "FILE_MODIFIED", "EXPANDED_FROM_ARCHIVE",
    "DYNAMIC_LINK", "STATIC_LINK", "DATA_FILE_OF", "TEST_CASE_OF", "BUILD_TOOL_OF",
    "DEV_TOOL_OF", "TEST_OF", "TEST_TOOL_OF", "DOCUMENTATION_OF", "OPTIONAL_COMPONENT_OF",
    "METAFILE_OF", "PACKAGE_OF", "AMENDS", "PREREQUISITE_FOR", "HAS_PREREQUISITE",
    "REQUIREMENT_DESCRIPTION_FOR", "SPECIFICATION_FOR", "OTHER"}
SPDX_ID = re.compile(r"SPDXRef-[A-Za-z0-9.-]+")
LICENSE_REF = re.compile(r"LicenseRef-[A-Za-z0-9.-]+")
CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
ACTOR = re.compile(r"(Person|Organization|Tool): \S.*")


def gcc_major():
    return subprocess.run(["c++", "-dumpversion"], capture_output=True, text=True,
                          check=True).stdout.strip().split(".")[0]


def expected_libraries():
    """{SBOM package name: (Debian binary package the amd64 build takes it from, or None when
    it is built from its Debian source package, and then the package whose version it is)}."""
    gcc = gcc_major()
    return {
        "glibc": "libc6-dev", "libstdc++": f"libstdc++-{gcc}-dev", "libgcc": f"libgcc-{gcc}-dev",
        "openssl": "libssl-dev", "yaml-cpp": "libyaml-cpp-dev",
        "nlohmann-json": "nlohmann-json3-dev", "spdlog": "libspdlog-dev", "fmt": "libfmt-dev",
        "CLI11": "libcli11-dev", "tl-expected": "libexpected-dev",
        # Built from the source package of the same version as these (scripts/build-static.sh).
        "curl": "libcurl4-openssl-dev",
    }


def dpkg(package, field, arch="amd64"):
    """A field of an installed package; of a package installed for several architectures
    (libssl-dev:amd64 and :arm64), the one of ARCH (or arch-independent)."""
    out = subprocess.run(["dpkg-query", "-W", "-f", f"${{Architecture}}\t${{{field}}}\n",
                          package], capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t", 1) for line in out.splitlines()]
    chosen = [value for a, value in rows if a in (arch, "all")] or [value for _, value in rows]
    assert len(chosen) == 1, (package, rows)
    return chosen[0]


def purl(name, version, arch, upstream=None):
    """The canonical purl (deb type): letters, digits, `.-_~` and `:` as they are, the rest
    percent-encoded; qualifiers sorted by key."""
    def encode(text):
        return "".join(c if c.isascii() and (c.isalnum() or c in ".-_~:") else
                       "".join(f"%{b:02X}" for b in c.encode()) for c in text)
    qualifiers = [f"arch={arch}", "distro=debian-12"]
    if upstream:
        qualifiers.append(f"upstream={encode(upstream)}")
    return f"pkg:deb/debian/{encode(name)}@{encode(version)}?{'&'.join(qualifiers)}"


def test_the_purl_of_a_version_with_a_plus_and_an_epoch_is_canonical():
    # The deb type's own example: `+` is encoded, `:` is not.
    assert purl("attr", "1:2.4.47-2+b1", "amd64") == \
        "pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64&distro=debian-12"


def version_problems(doc, binary):
    """Packages whose version is not what dpkg reports for the package their sourceInfo names
    (or, for those built from a Debian source package, not the one deps.txt names)."""
    with open(os.path.join(os.path.dirname(binary), "deps.txt"), encoding="utf-8") as f:
        built = dict(line.split() for line in f if line.strip())
    problems = []
    for package in doc["packages"]:
        if package["name"] == "certctl":
            continue
        match = re.match(r"Debian binary package (\S+) (\S+)( \(unpacked at [^)]*\))?,",
                         package.get("sourceInfo", ""))
        if match:
            # An unpacked package of another architecture is taken at the version installed
            # for this one (scripts/build-static.sh).
            installed = match.group(1).split(":")[0] if match.group(3) else match.group(1)
            want = dpkg(installed, "Version")
            if not package["versionInfo"] == match.group(2) == want:
                problems.append(f"{package['name']}: {package['versionInfo']}, dpkg: {want}")
        elif package["versionInfo"] != built.get(package["name"]):
            problems.append(f"{package['name']}: {package['versionInfo']}, deps.txt: "
                            f"{built.get(package['name'])}")
    return problems


def run_sbom(binary, out_dir, arch="amd64"):
    out = os.path.join(out_dir, "certctl.spdx.json")
    licenses = os.path.join(out_dir, "licenses")
    env = dict(os.environ, SOURCE_DATE_EPOCH=EPOCH)
    done = subprocess.run(
        ["/usr/bin/python3", SBOM, "--arch", arch, "--executable", binary,
         "--build-dir", os.path.dirname(binary), "--version", VERSION, "--out", out,
         "--licenses-dir", licenses], capture_output=True, text=True, env=env, timeout=120)
    return done, out, licenses


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The document and licence folder for build/static/certctl, made once for the module."""
    if not os.path.isfile(STATIC_BINARY):
        pytest.skip(f"{STATIC_BINARY} not built (scripts/build-static.sh)")
    done, out, licenses = run_sbom(STATIC_BINARY, str(tmp_path_factory.mktemp("sbom")))
    assert done.returncode == 0, done.stderr
    with open(out, encoding="utf-8") as f:
        return STATIC_BINARY, json.load(f), out, licenses


def license_problems(expression, known_refs):
    """Why an SPDX license expression is not valid (empty when it is)."""
    if expression in ("NONE", "NOASSERTION"):
        return []
    try:
        from license_expression import get_spdx_licensing
    except ImportError:
        pytest.fail("python3-license-expression is not installed (apt-get install "
                    "python3-license-expression): it holds the SPDX licence list")
    try:
        info = get_spdx_licensing().validate(expression, strict=True)
    except Exception as error:  # the library raises on some malformed expressions
        return [f"{expression!r}: {error}"]
    unknown = [s for s in info.invalid_symbols if not LICENSE_REF.fullmatch(s)]
    undeclared = [s for s in info.invalid_symbols
                  if LICENSE_REF.fullmatch(s) and s not in known_refs]
    problems = [f"{expression!r}: unknown {s}" for s in unknown]
    problems += [f"{expression!r}: {s} not in hasExtractedLicensingInfos" for s in undeclared]
    if not info.invalid_symbols:
        problems += [f"{expression!r}: {e}" for e in info.errors]
    return problems


def spdx_problems(doc):
    """The ways a document breaks SPDX 2.3's required fields and rules (empty when none)."""
    problems = []

    def need(ok, what):
        if not ok:
            problems.append(what)

    need(doc.get("spdxVersion") == "SPDX-2.3", "spdxVersion is not SPDX-2.3")
    need(doc.get("dataLicense") == "CC0-1.0", "dataLicense is not CC0-1.0")
    need(doc.get("SPDXID") == "SPDXRef-DOCUMENT", "the document's SPDXID")
    need(bool(doc.get("name")), "the document has no name")
    namespace = urllib.parse.urlparse(doc.get("documentNamespace", ""))
    need(namespace.scheme in ("http", "https") and namespace.netloc
         and "#" not in doc["documentNamespace"], "documentNamespace is not a URI without #")
    info = doc.get("creationInfo", {})
    need(bool(CREATED.fullmatch(info.get("created", ""))), "creationInfo.created format")
    need(bool(info.get("creators")) and all(ACTOR.fullmatch(c) for c in info["creators"]),
         "creationInfo.creators")

    extracted = doc.get("hasExtractedLicensingInfos", [])
    refs = {e.get("licenseId") for e in extracted}
    for entry in extracted:
        need(bool(LICENSE_REF.fullmatch(entry.get("licenseId", ""))),
             f"licenseId {entry.get('licenseId')!r}")
        need(bool(entry.get("extractedText")), f"{entry.get('licenseId')} has no extractedText")

    ids = [doc.get("SPDXID")]
    for package in doc.get("packages", []):
        pid = package.get("SPDXID", "")
        ids.append(pid)
        need(bool(SPDX_ID.fullmatch(pid)), f"package SPDXID {pid!r}")
        need(bool(package.get("name")), f"{pid} has no name")
        location = package.get("downloadLocation")
        need(location in ("NONE", "NOASSERTION") or bool(urllib.parse.urlparse(location or "")
                                                           .scheme), f"{pid} downloadLocation")
        if package.get("filesAnalyzed", True):
            need("packageVerificationCode" in package and package.get("hasFiles"),
                 f"{pid}: filesAnalyzed needs packageVerificationCode and files")
        for checksum in package.get("checksums", []):
            length = CHECKSUM_LENGTHS.get(checksum.get("algorithm"))
            need(length is not None and re.fullmatch(f"[0-9a-f]{{{length}}}",
                                                     checksum.get("checksumValue", "")),
                 f"{pid} checksum {checksum}")
        for field in ("supplier", "originator"):
            if field in package:
                need(package[field] == "NOASSERTION"
                     or re.fullmatch(r"(Person|Organization): \S.*", package[field]),
                     f"{pid} {field} {package[field]!r}")
        for field in ("licenseConcluded", "licenseDeclared"):
            if field in package:
                problems += [f"{pid} {field}: {p}"
                             for p in license_problems(package[field], refs)]
        need(package.get("primaryPackagePurpose", "OTHER") in PURPOSES, f"{pid} purpose")
        for ref in package.get("externalRefs", []):
            need(ref.get("referenceCategory") in REF_CATEGORIES, f"{pid} referenceCategory")
            need(bool(ref.get("referenceType")) and bool(ref.get("referenceLocator"))
                 and " " not in ref["referenceLocator"], f"{pid} externalRef {ref}")
            if ref.get("referenceType") == "purl":
                need(bool(re.fullmatch(r"pkg:[a-z.+-]+/[^@?#]+@[^?#]+(\?[^#]*)?",
                                       ref["referenceLocator"])), f"{pid} purl")
    need(len(ids) == len(set(ids)), f"SPDXIDs are not unique: {sorted(ids)}")

    known = set(ids)
    relationships = doc.get("relationships", [])
    for rel in relationships:
        need(rel.get("relationshipType") in RELATIONSHIPS, f"relationship type {rel}")
        for end in (rel.get("spdxElementId"), rel.get("relatedSpdxElement")):
            need(end in known or end in ("NONE", "NOASSERTION"), f"relationship end {end!r}")
    need(any(r.get("spdxElementId") == "SPDXRef-DOCUMENT"
             and r.get("relationshipType") == "DESCRIBES" for r in relationships),
         "the document DESCRIBES nothing")
    return problems


def test_follows_spdx_2_3(generated):
    binary, doc, _, _ = generated
    assert spdx_problems(doc) == []
    assert version_problems(doc, binary) == []


def test_the_validator_catches_broken_documents(generated):
    """The checks above reject what they are there to reject."""
    _, doc, _, _ = generated
    broken = json.loads(json.dumps(doc))
    broken["dataLicense"] = "MIT"
    broken["packages"][1]["SPDXID"] = broken["packages"][2]["SPDXID"]
    broken["packages"][3]["licenseDeclared"] = "Not-A-Licence-1.0"
    broken["packages"][4]["licenseDeclared"] = "LicenseRef-Nowhere"
    broken["relationships"].append({"spdxElementId": "SPDXRef-Package-certctl",
                                    "relationshipType": "STATIC_LINK",
                                    "relatedSpdxElement": "SPDXRef-Package-missing"})
    problems = "\n".join(spdx_problems(broken))
    for expected in ("dataLicense", "not unique", "Not-A-Licence-1.0", "LicenseRef-Nowhere",
                     "SPDXRef-Package-missing"):
        assert expected in problems, problems


def test_certctl_is_described_with_its_checksum(generated):
    binary, doc, _, _ = generated
    described = [r["relatedSpdxElement"] for r in doc["relationships"]
                 if r["spdxElementId"] == "SPDXRef-DOCUMENT"
                 and r["relationshipType"] == "DESCRIBES"]
    certctl = next(p for p in doc["packages"] if p["SPDXID"] in described)
    assert certctl["name"] == "certctl"
    assert certctl["versionInfo"] == VERSION
    assert certctl["licenseDeclared"] == "Apache-2.0"
    with open(binary, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    assert certctl["checksums"] == [{"algorithm": "SHA256", "checksumValue": digest}]
    assert digest in doc["documentNamespace"] and VERSION in doc["documentNamespace"]
    assert doc["creationInfo"]["created"] == "2023-11-14T22:13:20Z"  # SOURCE_DATE_EPOCH


def test_every_library_at_its_installed_debian_version(generated):
    binary, doc, _, _ = generated
    packages = {p["name"]: p for p in doc["packages"]}
    with open(os.path.join(os.path.dirname(binary), "deps.txt"), encoding="utf-8") as f:
        built = dict(line.split() for line in f if line.strip())
    linked = {r["relatedSpdxElement"]: r["relationshipType"] for r in doc["relationships"]
              if r["spdxElementId"] == "SPDXRef-Package-certctl"}
    assert sorted(expected_libraries()) == sorted(LIBRARIES)
    for name, binary_package in expected_libraries().items():
        assert name in packages, f"{name} is missing"
        package = packages[name]
        source = dpkg(binary_package, "source:Package")
        source_version = dpkg(binary_package, "source:Version")
        if name == "curl":
            assert package["versionInfo"] == built[name] == source_version, name
        else:
            assert package["versionInfo"] == dpkg(binary_package, "Version"), name
            assert binary_package in package["sourceInfo"], package["sourceInfo"]
        assert f"{source} {source_version}" in package["sourceInfo"], package["sourceInfo"]
        # curl was built here from its source package; the rest come from binary packages.
        if name == "curl":
            wanted = purl(source, source_version, "source")
        else:
            version = dpkg(binary_package, "Version")
            wanted = purl(dpkg(binary_package, "Package"), version,
                          dpkg(binary_package, "Architecture"),
                          source if version == source_version else f"{source}@{source_version}")
        assert [r["referenceLocator"] for r in package["externalRefs"]] == [wanted], name
        assert package["supplier"] != "NOASSERTION", name
        assert package["licenseDeclared"] != "NOASSERTION", name
        assert package["copyrightText"] != "NOASSERTION", name
        assert linked.get(package["SPDXID"]) in ("STATIC_LINK", "CONTAINS"), name
    assert set(linked) == {p["SPDXID"] for p in doc["packages"]} - {"SPDXRef-Package-certctl"}


def test_licences_read_from_debian(generated):
    """A few licences as the Debian copyright files state them, mapped to SPDX ids."""
    _, doc, _, _ = generated
    declared = {p["name"]: p["licenseDeclared"] for p in doc["packages"]}
    assert declared["openssl"] == "Apache-2.0"
    assert declared["curl"] == "curl"
    assert declared["nlohmann-json"] == "MIT"  # Debian's "Expat"
    assert declared["tl-expected"] == "CC0-1.0"
    assert declared["glibc"] == "LGPL-2.1-or-later"
    assert declared["libstdc++"] == "GPL-3.0-or-later WITH GCC-exception-3.1"


def test_licence_files_are_complete(generated):
    _, doc, _, licenses = generated
    names = sorted(n for n in os.listdir(licenses) if n.endswith(".txt"))
    for package in doc["packages"]:
        path = os.path.join(licenses, re.sub(r"[^a-z0-9.+-]", "-", package["name"].lower())
                            + ".txt")
        assert os.path.isfile(path), f"{package['name']}: no {path} in {names}"
        assert os.path.getsize(path) > 0, path
    with open(os.path.join(licenses, "certctl.txt"), encoding="utf-8") as f:
        own = f.read()
    with open(os.path.join(REPO, "LICENSE"), encoding="utf-8") as f:
        assert own == f.read()
    # Debian's copyright file is in the file; every common-licenses text it refers to is in
    # common-licenses/ beside it, named at the file's end, and each text is there once.
    common_dir = os.path.join(licenses, "common-licenses")
    wanted = set()
    for name, binary_package in (("openssl", "libssl-dev"), ("glibc", "libc6-dev"),
                                 ("libstdc++", f"libstdc++-{gcc_major()}-dev")):
        with open(os.path.join(licenses, f"{name}.txt"), encoding="utf-8") as f:
            text = f.read()
        with open(f"/usr/share/doc/{binary_package}/copyright", encoding="utf-8") as f:
            debian = f.read()
        assert debian.rstrip() in text, name
        for ref in set(re.findall(r"/usr/share/common-licenses/([A-Za-z0-9.+_-]*[A-Za-z0-9])",
                                  debian)):
            common = os.path.realpath(f"/usr/share/common-licenses/{ref}")
            if os.path.isfile(common):
                kept = os.path.basename(common)
                wanted.add(kept)
                assert f"common-licenses/{kept}" in text.rsplit("=====", 1)[1], f"{name}: {kept}"
                with open(common, encoding="utf-8") as f, \
                        open(os.path.join(common_dir, kept), encoding="utf-8") as g:
                    assert g.read() == f.read(), f"{name}: {common}"
    assert {"GPL-2", "GPL-3", "LGPL-2.1"} <= wanted
    commons = {}
    for kept in os.listdir(common_dir):
        with open(os.path.join(common_dir, kept), encoding="utf-8") as f:
            commons[kept] = f.read().rstrip()
    for name in set(names) - {"certctl.txt"}:  # certctl's LICENSE is the Apache-2.0 text
        with open(os.path.join(licenses, name), encoding="utf-8") as f:
            text = f.read()
        assert not [kept for kept, common in commons.items() if common in text], name
    with open(os.path.join(licenses, "curl.txt"), encoding="utf-8") as f:
        assert "COPYRIGHT AND PERMISSION NOTICE" in f.read()  # curl's own COPYING


def test_same_inputs_same_bytes(generated, tmp_path):
    binary, _, out, licenses = generated
    done, again, again_licenses = run_sbom(binary, str(tmp_path))
    assert done.returncode == 0, done.stderr
    with open(out, "rb") as a, open(again, "rb") as b:
        assert a.read() == b.read()
    names = sorted(os.path.relpath(os.path.join(d, f), licenses)
                   for d, _, files in os.walk(licenses) for f in files)
    assert names == sorted(os.path.relpath(os.path.join(d, f), again_licenses)
                           for d, _, files in os.walk(again_licenses) for f in files)
    for name in names:
        with open(os.path.join(licenses, name), "rb") as a, \
                open(os.path.join(again_licenses, name), "rb") as b:
            assert a.read() == b.read(), name


def test_refuses_an_executable_of_another_architecture(generated, tmp_path):
    binary, _, _, _ = generated
    done, _, _ = run_sbom(binary, str(tmp_path), arch="arm64")
    assert done.returncode != 0
    assert "is not an arm64 executable" in done.stderr


def test_a_library_left_out_is_refused(generated, tmp_path):
    """A header the build compiled from a package the document would not describe stops
    sbom.py: here its list of libraries without tl-expected."""
    binary, _, _, _ = generated
    program = (
        "import sys\n"
        f"sys.path.insert(0, {os.path.dirname(SBOM)!r})\n"
        "import sbom\n"
        "sbom.LIBRARIES = [l for l in sbom.LIBRARIES if l['name'] != 'tl-expected']\n"
        "sbom.main()\n")
    done = subprocess.run(
        ["/usr/bin/python3", "-c", program, "--arch", "amd64", "--executable", binary,
         "--build-dir", os.path.dirname(binary), "--version", VERSION,
         "--out", str(tmp_path / "sbom.json"), "--licenses-dir", str(tmp_path / "licenses")],
        capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "libexpected-dev (/usr/include/tl/expected.hpp)" in done.stderr, done.stderr
    assert not (tmp_path / "sbom.json").exists()


def test_refuses_an_executable_older_than_its_libraries(generated, tmp_path):
    """An executable linked before a library's package was upgraded does not contain the
    version dpkg now reports: no document is written for it."""
    binary, _, _, _ = generated
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(binary, old / "certctl")
    shutil.copy(os.path.join(os.path.dirname(binary), "deps.txt"), old / "deps.txt")
    os.utime(old / "certctl", (1_000_000_000, 1_000_000_000))  # 2001
    env = dict(os.environ, SOURCE_DATE_EPOCH=EPOCH)
    done = subprocess.run(
        ["/usr/bin/python3", SBOM, "--arch", "amd64", "--executable", str(old / "certctl"),
         "--build-dir", os.path.dirname(binary), "--version", VERSION,
         "--out", str(tmp_path / "sbom.json"), "--licenses-dir", str(tmp_path / "licenses")],
        capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert "was linked (a package upgrade?)" in done.stderr, done.stderr
    assert not (tmp_path / "sbom.json").exists()


def test_arm64_executable(tmp_path):
    """build/static-arm64/certctl, cross-built: the same rules, every library, each at the
    version dpkg reports for the package (or the -cross package) its files came from."""
    if not os.path.isfile(ARM64_BINARY):
        pytest.skip(f"{ARM64_BINARY} not built (scripts/build-static.sh --arch arm64)")
    done, out, licenses = run_sbom(ARM64_BINARY, str(tmp_path), arch="arm64")
    assert done.returncode == 0, done.stderr
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    assert spdx_problems(doc) == []
    assert version_problems(doc, ARM64_BINARY) == []
    packages = {p["name"]: p for p in doc["packages"]}
    assert sorted(packages) == sorted(LIBRARIES + ["certctl"])
    for package in packages.values():
        for ref in package.get("externalRefs", []):
            assert re.search(r"\?arch=(arm64|all|source)&distro=debian-12(&|$)",
                             ref["referenceLocator"]), ref
        name = re.sub(r"[^a-z0-9.+-]", "-", package["name"].lower())
        assert os.path.getsize(os.path.join(licenses, f"{name}.txt")) > 0, name
    # The cross C library is Debian's glibc, whichever package holds it.
    assert re.search(r"[?&]upstream=glibc(%40|&|$)",
                     packages["glibc"]["externalRefs"][0]["referenceLocator"]), \
        packages["glibc"]["externalRefs"]
