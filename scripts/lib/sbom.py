#!/usr/bin/python3
"""Writes the SPDX 2.3 (JSON) software bill of materials of a static certctl executable, and
the licence texts of everything in it.

Usage:
  sbom.py --arch amd64|arm64 --executable build/static/certctl --build-dir build/static \
          --version 0.2.0 --out certctl-amd64.spdx.json --licenses-dir dist/licenses

Nothing about the libraries is written down here but which ones certctl is made of; their
files, Debian packages, versions, licences and copyright come from the build and from dpkg:
  - static archives: the paths the CMake cache in --build-dir linked (OpenSSL, yaml-cpp);
  - the C and C++ runtime: the archives the build's compiler links (`-print-file-name`);
  - header-only libraries: the headers the build compiled (`ninja -t deps`);
  - libraries built from a Debian source package (libcurl): the
    `deps.txt` next to the executable, and their source trees under the build's deps folder;
then `dpkg -S` names the package owning each file and `dpkg-query` its source and version
(a package the build unpacked rather than installed is read from its unpacked tree).
Every system header the build compiled must belong to a package listed here (or be a kernel
interface header), so a library added to the build cannot be left out of the document; and
no file may have changed since the executable was linked, so the versions are the ones in it.

The output depends only on its inputs: `created` is SOURCE_DATE_EPOCH when it is set, and the
document namespace is derived from the version, the architecture and the executable's SHA-256.
Only Debian's python3 and its standard library are needed.
"""

import argparse
import datetime
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse

from file_digest import sha256_hex

# SPDX documents name themselves by a URI; this is the form the SPDX specification suggests.
NAMESPACE = "https://spdx.org/spdxdocs"
TRIPLES = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
ELF_MACHINES = {"amd64": 62, "arm64": 183}  # e_machine: EM_X86_64, EM_AARCH64
COMMON_LICENSES = "/usr/share/common-licenses"
COMMON_DIR = "common-licenses"  # in --licenses-dir: each text referred to, once

# The libraries certctl is made of. kind "archive": files named by the CMake cache;
# "runtime": archives the compiler links by itself; "header": a header the build compiles;
# "source": built from the Debian source package of that name (deps.txt).
# "built_using": the source package whose code a repackaged build carries (Debian's -cross
# packages are made by cross-toolchain-base and gcc-N-cross from glibc's and gcc-N's code,
# which their Built-Using field names with its version).
LIBRARIES = [
    {"name": "glibc", "kind": "runtime", "files": ["libc.a"], "built_using": r"glibc",
     "link": "STATIC_LINK"},
    {"name": "libstdc++", "kind": "runtime", "files": ["libstdc++.a"],
     "built_using": r"gcc-\d+", "link": "STATIC_LINK"},
    {"name": "libgcc", "kind": "runtime", "files": ["libgcc.a", "libgcc_eh.a"],
     "built_using": r"gcc-\d+", "link": "STATIC_LINK"},
    {"name": "openssl", "kind": "archive",
     "files": ["OPENSSL_SSL_LIBRARY", "OPENSSL_CRYPTO_LIBRARY"], "link": "STATIC_LINK"},
    {"name": "yaml-cpp", "kind": "archive", "files": ["CERTCTL_STATIC_YAML_CPP"],
     "link": "STATIC_LINK"},
    {"name": "curl", "kind": "source", "files": ["CERTCTL_STATIC_CURL"],
     "upstream_licence": "COPYING", "link": "STATIC_LINK"},
    {"name": "nlohmann-json", "kind": "header", "files": ["nlohmann/json.hpp"],
     "link": "CONTAINS"},
    {"name": "spdlog", "kind": "header", "files": ["spdlog/spdlog.h"], "link": "CONTAINS"},
    {"name": "fmt", "kind": "header", "files": ["fmt/format.h"], "link": "CONTAINS"},
    {"name": "CLI11", "kind": "header", "files": ["CLI/CLI.hpp"], "link": "CONTAINS"},
    {"name": "tl-expected", "kind": "header", "files": ["tl/expected.hpp"], "link": "CONTAINS"},
]

# Debian's short licence names (copyright-format 1.0, and what packages use) to SPDX ids.
# A name not here becomes a LicenseRef- whose text is taken from the copyright file.
SPDX_NAMES = {
    "apache-2.0": "Apache-2.0", "artistic": "Artistic-1.0-Perl", "bsd-2-clause": "BSD-2-Clause",
    "bsd-3-clause": "BSD-3-Clause", "bsd-4-clause": "BSD-4-Clause",
    "bsd-4-clause-uc": "BSD-4-Clause-UC", "cc0-1.0": "CC0-1.0", "curl": "curl",
    "expat": "MIT", "mit": "MIT", "isc": "ISC", "x11": "X11", "zlib": "Zlib",
    "mpl-2.0": "MPL-2.0", "fsfullr": "FSFULLR", "oldap-2.8": "OLDAP-2.8",
    "gpl-1": "GPL-1.0-only", "gpl-1+": "GPL-1.0-or-later",
    "gpl-2": "GPL-2.0-only", "gpl-2+": "GPL-2.0-or-later",
    "gpl-2.0": "GPL-2.0-only", "gpl-2.0+": "GPL-2.0-or-later",
    "gpl-3": "GPL-3.0-only", "gpl-3+": "GPL-3.0-or-later",
    "gpl-3.0": "GPL-3.0-only", "gpl-3.0+": "GPL-3.0-or-later",
    "lgpl-2.1": "LGPL-2.1-only", "lgpl-2.1+": "LGPL-2.1-or-later",
    "lgpl-3": "LGPL-3.0-only", "lgpl-3+": "LGPL-3.0-or-later",
}
SPDX_EXCEPTIONS = {"libtool": "Libtool-exception", "gcc-runtime-library": "GCC-exception-3.1"}

# Copyright files that are not machine-readable state each library's licence in prose; the
# statement is recognised by its words, and its licence applies only when they are there.
GCC_RUNTIME = (r"runtime libraries are licensed under the terms of the\s+GNU General Public "
               r"License \(v3 or later\) with version 3\.1 of the GCC\s+Runtime Library "
               r"Exception", "GPL-3.0-or-later WITH GCC-exception-3.1")
PROSE_LICENCES = {
    "glibc": (r"The GNU C Library is free software.*?GNU Lesser General Public\s+License.*?"
              r"version 2\.1 of the License, or \(at your option\) any later version",
              "LGPL-2.1-or-later"),
    "libstdc++": GCC_RUNTIME,
    "libgcc": GCC_RUNTIME,
}


def fail(message):
    sys.exit(f"sbom: {message}")


def run(argv, check=True):
    try:
        done = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        fail(f"{argv[0]} not found")
    if check and done.returncode != 0:
        fail(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def elf_machine(path):
    with open(path, "rb") as f:
        header = f.read(20)
    if header[:4] != b"\x7fELF":
        fail(f"{path} is not an ELF file")
    return int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")


def read_cache(build_dir):
    path = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.isfile(path):
        fail(f"{path} not found: build {build_dir} first")
    cache = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            match = re.match(r"([^#/][^:=]*):[A-Z]+=(.*)$", line.rstrip("\n"))
            if match:
                cache[match.group(1)] = match.group(2)
    return cache


def compiled_headers(build_dir):
    """The system headers (under /usr) the build compiled, from ninja's dependency log."""
    if shutil.which("ninja") is None:
        fail("ninja not found (the build's dependency log is read with `ninja -t deps`)")
    out = run(["ninja", "-C", build_dir, "-t", "deps"])
    headers = {line.strip() for line in out.splitlines() if line.startswith("    /usr/")}
    if not headers:
        fail(f"`ninja -C {build_dir} -t deps` names no system header: is it built?")
    return sorted(os.path.normpath(h) for h in headers)


def owners(paths, arch):
    """{path: binary package} by `dpkg -S`; of several owners, the one of the target arch."""
    found = {}
    for start in range(0, len(paths), 200):
        chunk = paths[start:start + 200]
        for line in run(["dpkg", "-S", *chunk], check=False).splitlines():
            if line.startswith("diversion ") or ": " not in line:
                continue
            names, path = line.split(": ", 1)
            candidates = [n.strip() for n in names.split(",")]
            native = [n for n in candidates if n.endswith(f":{arch}")]
            found[path] = (native or candidates)[0]
    return found


def check_linked_before(paths, executable):
    """The files were in place when the executable was linked: a package upgraded since then
    would make dpkg report a version the executable does not contain. dpkg writes a new
    file for each it installs, so its inode change time is when it was installed."""
    linked = os.stat(executable).st_mtime
    newer = sorted(p for p in paths if os.stat(p).st_ctime > linked)
    if newer:
        fail(f"{', '.join(newer[:3])}{' ...' if len(newer) > 3 else ''} changed after "
             f"{executable} was linked (a package upgrade?): rebuild it, then write its SBOM")


def installed(package):
    fields = ["Package", "Architecture", "Version", "source:Package", "source:Version",
              "Maintainer", "Homepage", "Built-Using"]
    out = run(["dpkg-query", "-W", "-f", "\t".join(f"${{{f}}}" for f in fields), package])
    return dict(zip(["package", "arch", "version", "source", "source_version", "maintainer",
                     "homepage", "built_using"], out.split("\t")))


def built_using(info, pattern):
    """(source, version) of the Built-Using entry whose source matches PATTERN, or None."""
    for entry in info["built_using"].split(","):
        match = re.fullmatch(r"\s*(\S+)\s*\(\s*=\s*([^)\s]+)\s*\)\s*", entry)
        if match and re.fullmatch(pattern, match.group(1)):
            return match.group(1), match.group(2)
    return None


def doc_name(package):
    return package.split(":", 1)[0]


# --- Debian copyright files -------------------------------------------------------------

def dep5_paragraphs(text):
    """The paragraphs of a machine-readable copyright file as dicts (field names lower-case,
    continuation lines kept), or None when the file is not machine-readable."""
    if not re.match(r"Format:\s*\S*copyright-format/1\.0", text):
        return None
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        fields, key = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if fields:
            paragraphs.append(fields)
    return paragraphs


class Licences:
    """Maps Debian licence names to SPDX expressions; names without an SPDX id become
    LicenseRef-s, whose texts are collected for hasExtractedLicensingInfos."""

    def __init__(self):
        self.extracted = {}

    def ref(self, name, text):
        ident = "LicenseRef-" + re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-")
        if ident not in self.extracted:
            self.extracted[ident] = {"licenseId": ident, "name": name,
                                     "extractedText": text or f"Debian licence name: {name}"}
        return ident

    def term(self, name, texts):
        name = name.strip()
        match = re.fullmatch(r"(.+?)\s+with\s+(.+?)\s+exception", name, re.IGNORECASE)
        if match:
            licence = SPDX_NAMES.get(match.group(1).lower())
            exception = SPDX_EXCEPTIONS.get(match.group(2).lower())
            if licence and exception:
                return f"{licence} WITH {exception}"
            return self.ref(name, texts.get(name.lower()))
        return SPDX_NAMES.get(name.lower()) or self.ref(name, texts.get(name.lower()))

    def expression(self, field, texts):
        """An SPDX expression for a DEP-5 License field's first line ("A or B and C")."""
        alternatives = re.split(r"\s+or\s+", field.split("\n", 1)[0].strip())
        parts = []
        for alternative in alternatives:
            terms = [self.term(t, texts) for t in re.split(r"\s+and\s+|,\s*", alternative)]
            parts.append(terms[0] if len(terms) == 1 else "(" + " AND ".join(terms) + ")")
        return parts[0] if len(parts) == 1 else " OR ".join(parts)


def copyright_facts(text, name, licences):
    """(licenseDeclared, copyrightText, comment) from a Debian copyright file."""
    paragraphs = dep5_paragraphs(text)
    if paragraphs is not None:
        texts = {}  # licence name -> its full text, from standalone or inline License fields
        for p in paragraphs:
            if "license" in p and "\n" in p["license"]:
                first, body = p["license"].split("\n", 1)
                texts.setdefault(first.strip().lower(), body)
        main = next((p for p in paragraphs if p.get("files", "").split() == ["*"]), None)
        if main is None or "license" not in main:
            return "NOASSERTION", "NOASSERTION", "The copyright file has no `Files: *` paragraph."
        declared = licences.expression(main["license"], texts)
        others = sorted({p["license"].split("\n", 1)[0].strip() for p in paragraphs
                         if "files" in p and "license" in p and p is not main}
                        - {main["license"].split("\n", 1)[0].strip()})
        comment = "Declared: the licence of `Files: *` in the Debian copyright file."
        if others:
            comment += (" Single files of the source package are under " + ", ".join(others)
                        + "; see the licence file.")
        return declared, main.get("copyright", "NOASSERTION") or "NOASSERTION", comment
    declared = "NOASSERTION"
    if name in PROSE_LICENCES:
        pattern, expression = PROSE_LICENCES[name]
        if re.search(pattern, text, re.DOTALL):
            declared = expression
    # The first copyright statement, to the end of its paragraph.
    holder = re.search(r"(Copyright \(C\)\s+\d.*?)(\n\s*\n|$)", text, re.DOTALL)
    comment = ("The Debian copyright file is not machine-readable; declared is the licence it "
               "states for this library. Other parts carry other notices; see the licence file.")
    return declared, " ".join(holder.group(1).split()) if holder else "NOASSERTION", comment


def licence_text(sources):
    """One package's licence file: the given (title, path) files, then the names of the
    /usr/share/common-licenses texts they refer to, which go once into common-licenses/ beside
    it (several libraries refer to the same GPL; the image has no room for copies).
    Returns the text and the set of common-licenses paths it refers to."""
    parts, referenced = [], set()
    for title, path in sources:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        parts.append(f"===== {title} =====\n\n{text.rstrip()}\n")
        for ref in re.findall(re.escape(COMMON_LICENSES) + r"/([A-Za-z0-9][A-Za-z0-9.+_-]*)",
                              text):
            common = os.path.join(COMMON_LICENSES, ref.rstrip("."))
            if os.path.isfile(common):
                referenced.add(os.path.realpath(common))  # GPL is a link to GPL-3: once
    if referenced:
        names = ", ".join(f"{COMMON_DIR}/{os.path.basename(c)}" for c in sorted(referenced))
        parts.append(f"===== Licence texts referred to =====\n\nThe texts of {COMMON_LICENSES} "
                     f"referred to above are beside this file: {names}.\n")
    return "\n".join(parts), referenced


# --- finding the libraries ----------------------------------------------------------------

def compiler(cache, arch):
    cxx = cache.get("CMAKE_CXX_COMPILER")
    if arch == "arm64":
        cxx = f"{TRIPLES[arch]}-g++" if not cxx or "aarch64" not in cxx else cxx
    if not cxx or shutil.which(cxx) is None:
        fail(f"the {arch} C++ compiler ({cxx or 'unknown'}) is not installed")
    machine = run([cxx, "-dumpmachine"]).strip()
    if machine != TRIPLES[arch]:
        fail(f"{cxx} builds for {machine}, not {TRIPLES[arch]}")
    return cxx


def library_files(library, cache, cxx, headers):
    files = []
    for item in library["files"]:
        if library["kind"] == "runtime":
            path = os.path.normpath(run([cxx, f"-print-file-name={item}"]).strip())
            if not os.path.isabs(path):
                fail(f"{cxx} does not know {item}")
        elif library["kind"] in ("archive", "source"):
            path = cache.get(item, "")
            if not path or path.endswith("-NOTFOUND"):
                fail(f"the CMake cache names no {item}")
        else:
            matches = [h for h in headers if h.endswith("/" + item)]
            if not matches:
                fail(f"the build compiled no {item} ({library['name']})")
            path = matches[0]
        files.append(path)
    return files


def read_deps(executable):
    path = os.path.join(os.path.dirname(executable), "deps.txt")
    if not os.path.isfile(path):
        fail(f"{path} not found (scripts/build-static.sh writes it beside the executable)")
    deps = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if len(words) == 2:
                deps[words[0]] = words[1]
    return deps


def source_tree(cache, name, version):
    """The Debian source tree the build fetched (a folder src/NAME-VERSION beside libcurl's
    build, whichever way it is reached: the prefix's link or the folder it points to, or
    the build cache), if present."""
    curl = cache.get("CERTCTL_STATIC_CURL", "")
    starts = [curl, os.path.realpath(curl)] if curl else []
    cache_dir = os.environ.get("CERTCTL_CACHE_DIR",
                               os.path.join(os.path.expanduser("~"), ".cache", "certctl"))
    candidates = [os.path.join(cache_dir, "deps")]
    for start in starts:
        folder = os.path.dirname(start)
        while folder not in ("/", ""):
            candidates.append(folder)
            folder = os.path.dirname(folder)
    for folder in candidates:
        tree = os.path.join(folder, "src", f"{name}-{version}")
        if os.path.isfile(os.path.join(tree, "debian", "copyright")):
            return tree
    return None


def unpacked_package(path, arch):
    """For a file of a Debian package unpacked rather than installed (`dpkg-deb -x`): the
    package as installed() describes one, from the tree's usr/share/doc/PACKAGE, whose
    changelog names the source and the versions; None when the file is not in such a tree."""
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    while folder not in ("/", ""):
        doc = os.path.join(folder, "usr", "share", "doc")
        if real.startswith(os.path.join(folder, "usr") + "/") and os.path.isdir(doc):
            names = sorted(n for n in os.listdir(doc)
                           if os.path.isfile(os.path.join(doc, n, "copyright")))
            if len(names) == 1:
                return changelog_package(os.path.join(doc, names[0]), names[0], folder, arch)
            return None
        folder = os.path.dirname(folder)
    return None


def changelog_package(doc, name, tree, arch):
    """The package NAME of ARCH unpacked at TREE: its versions and source from its Debian
    changelogs in DOC (a binary-only upload's entry is in changelog.Debian.ARCH.gz), its
    maintainer and homepage from apt's record of that version."""
    entries = []
    for changelog in (f"changelog.Debian.{arch}.gz", "changelog.Debian.gz"):
        if os.path.isfile(os.path.join(doc, changelog)):
            with gzip.open(os.path.join(doc, changelog), "rt", encoding="utf-8",
                           errors="replace") as f:
                for line in f:
                    match = re.match(r"(\S+) \(([^)\s]+)\) [^;]*;(.*)$", line)
                    if match:
                        entries.append(match.groups())
    if not entries:
        return None
    # A binary-only upload rebuilds the source version of the first entry after it.
    source = next((e for e in entries if "binary-only=yes" not in e[2]), entries[0])
    info = {"package": name, "arch": arch, "version": entries[0][1], "source": source[0],
            "source_version": source[1], "maintainer": "", "homepage": "", "built_using": "",
            "doc": doc, "tree": tree}
    record = run(["apt-cache", "show", f"{name}:{arch}={info['version']}"], check=False)
    for field in ("Maintainer", "Homepage"):
        match = re.search(rf"^{field}: (.+)$", record, re.MULTILINE)
        if match:
            info[field.lower()] = match.group(1).strip()
    return info


def installed_from_source(source, version, arch):
    """An installed binary package built from SOURCE at VERSION (for its copyright file),
    a -dev package first: the one a build would compile against."""
    out = run(["dpkg-query", "-W", "-f",
               "${Package}:${Architecture}\t${source:Package}\t${source:Version}\n"])
    names = [line.split("\t")[0] for line in out.splitlines()
             if line.split("\t")[1:] == [source, version]]
    # The target's and arch-independent packages first; another arch's has the same file.
    names.sort(key=lambda n: (not n.endswith((f":{arch}", ":all")), "-dev:" not in n, n))
    return names[0] if names else None


def control_field(tree, field):
    with open(os.path.join(tree, "debian", "control"), encoding="utf-8") as f:
        match = re.search(rf"^{field}:\s*(.+)$", f.read(), re.MULTILINE)
    return match.group(1).strip() if match else ""


def supplier(maintainer):
    match = re.fullmatch(r"\s*(.*?)\s*<([^>]+)>\s*", maintainer or "")
    if not match:
        return "NOASSERTION"
    # Debian names teams and people alike as Maintainer.
    team = re.search(r"\b(Team|Maintainers|Packaging|Group|Project)\b", match.group(1))
    return f"{'Organization' if team else 'Person'}: {match.group(1)} ({match.group(2)})"


def purl(name, version, arch, upstream=None):
    """The canonical purl of a Debian package (the purl specification's deb type): a binary
    package by its own name, version and architecture (`all` too), a source package with
    arch=source. Qualifiers sorted by key; everything but letters, digits, `.-_~` and `:`
    percent-encoded (a version's `+` as %2B). `upstream` names the source package a binary
    package was built from, as scanners that match by source package read it."""
    def encode(text):
        return urllib.parse.quote(text, safe=":")
    qualifiers = {"arch": arch, "distro": "debian-12"}
    if upstream:
        qualifiers["upstream"] = upstream
    query = "&".join(f"{key}={encode(value)}" for key, value in sorted(qualifiers.items()))
    return f"pkg:deb/debian/{encode(name.lower())}@{encode(version)}?{query}"


def spdx_id(name):
    return "SPDXRef-Package-" + re.sub(r"[^A-Za-z0-9.-]", "-", name.replace("+", "p"))


def describe(library, args, cache, cxx, headers, deps, licences):
    """The SPDX package of one library, its licence file (name, text, common texts it needs),
    and the binary package it was taken from (None when built here from source)."""
    name = library["name"]
    if library["kind"] == "source":
        if name not in deps:
            fail(f"deps.txt names no {name}")
        source, version = name, deps[name]
        tree = source_tree(cache, source, version)
        package = installed_from_source(source, version, args.arch)
        if tree:
            copyright_path = os.path.join(tree, "debian", "copyright")
            maintainer = control_field(tree, "Maintainer")
            homepage = control_field(tree, "Homepage")
            texts = [(f"Debian source package {source} {version}: debian/copyright",
                      copyright_path)]
            upstream = os.path.join(tree, library["upstream_licence"])
            if os.path.isfile(upstream):
                texts.append((f"{source} {version}: {library['upstream_licence']}", upstream))
        elif package:
            info = installed(package)
            copyright_path = f"/usr/share/doc/{doc_name(package)}/copyright"
            maintainer, homepage = info["maintainer"], info["homepage"]
            texts = [(copyright_path, copyright_path)]
        else:
            fail(f"neither the source tree of {source} {version} nor an installed package "
                 "built from it")
        if library["files"]:
            check_linked_before(library_files(library, cache, cxx, headers), args.executable)
        origin = (f"built from the Debian source package {source} {version} "
                  "by scripts/build-static.sh")
        binary = None
    else:
        files = library_files(library, cache, cxx, headers)
        check_linked_before(files, args.executable)
        found = owners(files, args.arch)
        if all(f in found for f in files):
            packages = sorted({found[f] for f in files})
            if len(packages) != 1:
                fail(f"{name}: {', '.join(files)} belong to several packages: {packages}")
            binary = packages[0]
            info = installed(binary)
            copyright_path = f"/usr/share/doc/{doc_name(binary)}/copyright"
            where = ""
        else:
            # A package of another architecture that cannot be installed beside this one's
            # is unpacked by the build instead (arm64's libyaml-cpp-dev).
            unpacked = [unpacked_package(f, args.arch) for f in files]
            if None in unpacked or len({u["tree"] for u in unpacked}) != 1:
                fail(f"no installed package owns {', '.join(f for f in files if f not in found)}")
            info = unpacked[0]
            binary = info["package"]
            copyright_path = os.path.join(info["doc"], "copyright")
            where = f" (unpacked at {info['tree']}, not installed)"
        source, version = info["source"], info["source_version"]
        maintainer, homepage = info["maintainer"], info["homepage"]
        texts = [(copyright_path, copyright_path)]
        origin = (f"Debian binary package {info['package']}:{info['arch']} {info['version']}"
                  f"{where}, built from the Debian source package {source} {version}")
        carried = built_using(info, library.get("built_using", r"(?!)"))
        if carried and carried[0] != source:
            source, version = carried
            origin += f", using the code of the Debian source package {source} {version}"
        origin += f"; files: {', '.join(files)}"
    with open(copyright_path, encoding="utf-8", errors="replace") as f:
        declared, holders, comment = copyright_facts(f.read(), name, licences)
    if binary:
        upstream = source if version == info["version"] else f"{source}@{version}"
        package_purl = purl(info["package"], info["version"], info["arch"], upstream)
    else:
        package_purl = purl(source, version, "source")
    package = {
        "SPDXID": spdx_id(name),
        "name": name,
        "versionInfo": info["version"] if binary else version,
        "supplier": supplier(maintainer),
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "sourceInfo": origin,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": declared,
        "licenseComments": comment,
        "copyrightText": holders,
        "primaryPackagePurpose": "LIBRARY",
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": package_purl}],
    }
    if homepage:
        package["homepage"] = homepage
    file_name = re.sub(r"[^a-z0-9.+-]", "-", name.lower()) + ".txt"
    text, common = licence_text(texts)
    return package, (file_name, text, common), binary


def check_headers(headers, listed, arch):
    """Every system header compiled belongs to a listed library's package or to the kernel's
    interface headers (linux-libc-dev, included by the C library's own headers)."""
    found = owners(headers, arch)
    stray = {}
    for header in headers:
        package = found.get(header)
        if package is None:
            fail(f"no installed package owns {header}, which the build compiled")
        if doc_name(package) not in listed and not doc_name(package).startswith("linux-libc-dev"):
            stray.setdefault(package, header)
    if stray:
        fail("the build compiled headers of packages the document does not describe: "
             + ", ".join(f"{p} ({h})" for p, h in sorted(stray.items())))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--arch", required=True, choices=sorted(TRIPLES))
    parser.add_argument("--executable", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--licenses-dir", required=True)
    parser.add_argument("--license-file", default=None,
                        help="certctl's own licence (default: LICENSE at the repository root)")
    args = parser.parse_args()

    if not os.path.isfile(args.executable):
        fail(f"{args.executable} not found")
    if elf_machine(args.executable) != ELF_MACHINES[args.arch]:
        fail(f"{args.executable} is not an {args.arch} executable")
    own_licence = args.license_file or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "LICENSE")
    if not os.path.isfile(own_licence):
        fail(f"{own_licence} not found")

    cache = read_cache(args.build_dir)
    cxx = compiler(cache, args.arch)
    headers = compiled_headers(args.build_dir)
    deps = read_deps(args.executable)
    licences = Licences()

    packages, licence_files, listed = [], [], set()
    for library in LIBRARIES:
        package, licence_file, binary = describe(library, args, cache, cxx, headers, deps,
                                                 licences)
        packages.append(package)
        licence_files.append(licence_file)
        if binary:
            listed.add(doc_name(binary))
    check_headers(headers, listed, args.arch)
    check_linked_before(headers, args.executable)

    digest = sha256_hex(args.executable)
    certctl = {
        "SPDXID": "SPDXRef-Package-certctl",
        "name": "certctl",
        "versionInfo": args.version,
        "supplier": "NOASSERTION",
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "packageFileName": os.path.basename(args.executable),
        "checksums": [{"algorithm": "SHA256", "checksumValue": digest}],
        "licenseConcluded": "Apache-2.0",
        "licenseDeclared": "Apache-2.0",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "APPLICATION",
        "description": f"certctl {args.version}, one static-pie executable for linux/{args.arch}",
    }
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc))
    document = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"certctl-{args.version}-linux-{args.arch}",
        "documentNamespace": f"{NAMESPACE}/certctl-{args.version}-linux-{args.arch}-{digest}",
        "creationInfo": {
            "created": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "creators": ["Tool: certctl-sbom.py"],
        },
        "packages": [certctl] + packages,
        "relationships": [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                           "relatedSpdxElement": certctl["SPDXID"]}]
        + [{"spdxElementId": certctl["SPDXID"], "relationshipType": library["link"],
            "relatedSpdxElement": package["SPDXID"]}
           for library, package in zip(LIBRARIES, packages)],
    }
    if licences.extracted:
        document["hasExtractedLicensingInfos"] = [licences.extracted[k]
                                                  for k in sorted(licences.extracted)]

    os.makedirs(os.path.join(args.licenses_dir, COMMON_DIR), exist_ok=True)
    with open(own_licence, encoding="utf-8") as f:
        licence_files.append(("certctl.txt", f.read(), set()))
    for file_name, text, _ in licence_files:
        with open(os.path.join(args.licenses_dir, file_name), "w", encoding="utf-8") as f:
            f.write(text)
    for common in sorted(set().union(*(c for _, _, c in licence_files))):
        with open(common, encoding="utf-8", errors="replace") as f:
            text = f.read()
        with open(os.path.join(args.licenses_dir, COMMON_DIR, os.path.basename(common)), "w",
                  encoding="utf-8") as f:
            f.write(text)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
