"""Every relative link in the repository's Markdown leads somewhere: the file exists, and a
`#fragment` names a heading of the page it points to (GitHub's anchors). Links to the web
are not followed: the tests run offline. The links certctl prints after its findings
(`docs/troubleshooting.md#<code>`) lead somewhere too: every finding code has its section."""

import os
import re
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files():
    out = subprocess.run(["git", "ls-files", "*.md"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    return sorted(path for path in out.split() if path)


def prose_lines(path):
    """The lines outside fenced code blocks."""
    fenced = False
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line


def anchor(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to
    hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, line in prose_lines(path):
        match = HEADING.match(line)
        if match:
            base = anchor(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(path):
    for number, line in prose_lines(path):
        for target in LINK.findall(line):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                yield number, target


@pytest.mark.parametrize("path", markdown_files())
def test_relative_links_lead_somewhere(path):
    broken = []
    for number, target in links(path):
        file_part, _, fragment = target.partition("#")
        if file_part:
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if resolved.startswith(".."):
                broken.append(f"{path}:{number}: {target} leaves the repository")
                continue
            if not os.path.exists(os.path.join(REPO, resolved)):
                broken.append(f"{path}:{number}: {target}: no such file")
                continue
        else:
            resolved = path
        if fragment and resolved.endswith(".md") and fragment not in anchors(resolved):
            broken.append(f"{path}:{number}: {target}: no heading #{fragment} in {resolved}")
    assert broken == [], "\n".join(broken)


def finding_codes():
    """Every code certctl can report, as src/util/finding.cc names them."""
    with open(os.path.join(REPO, "src", "util", "finding.cc"), encoding="utf-8") as f:
        return re.findall(r'\{FindingCode::k\w+, "([a-z-]+)"\}', f.read())


def test_every_finding_code_has_its_troubleshooting_section():
    codes = finding_codes()
    assert len(codes) >= 29, codes  # the parse found the table
    missing = sorted(set(codes) - anchors("docs/troubleshooting.md"))
    assert missing == [], f"docs/troubleshooting.md has no section for {missing}"
