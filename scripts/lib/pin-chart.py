#!/usr/bin/python3
"""Pins a copy of the chart to a release (scripts/release.sh): the chart's version and
appVersion, the image Artifact Hub lists, and in values.yaml the image's repository and
digest.

The files are edited line by line, not loaded and dumped, so the comments that document
every value (`helm show values`) stay as they are.
Usage: pin-chart.py CHART_DIR --version V --repository REPO --digest sha256:...
"""

import argparse
import re
import sys

import yaml


def replace_one(text, pattern, replacement, what):
    new, count = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
    if count != 1:
        sys.exit(f"pin-chart: {what} not found")
    return new


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chart")
    parser.add_argument("--version", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--digest", required=True)
    args = parser.parse_args()
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", args.digest):
        sys.exit(f"pin-chart: '{args.digest}' is not a sha256 digest")

    chart_yaml = f"{args.chart}/Chart.yaml"
    with open(chart_yaml) as f:
        text = f.read()
    text = replace_one(text, r"^version: .*$", f"version: {args.version}", "Chart.yaml version")
    text = replace_one(text, r"^appVersion: .*$", f'appVersion: "{args.version}"',
                       "Chart.yaml appVersion")
    # Artifact Hub lists (and scans) the image the chart installs.
    text = replace_one(text, r"^      image: .*$", f"      image: {args.repository}@{args.digest}",
                       "Chart.yaml artifacthub.io/images")
    with open(chart_yaml, "w") as f:
        f.write(text)

    values_yaml = f"{args.chart}/values.yaml"
    with open(values_yaml) as f:
        text = f.read()
    # The top-level `image:` block only (the webhook's own image lives under sidecar:).
    block = re.search(r"^image:\n((?:[ #].*\n|\n)*)", text, flags=re.MULTILINE)
    if not block:
        sys.exit("pin-chart: values.yaml has no top-level image block")
    body = block.group(1)
    body = replace_one(body, r"^  repository: .*$", f"  repository: {args.repository}",
                       "image.repository")
    body = replace_one(body, r"^  digest: .*$", f'  digest: "{args.digest}"', "image.digest")
    text = text[:block.start(1)] + body + text[block.end(1):]
    with open(values_yaml, "w") as f:
        f.write(text)

    # What was written is what was meant.
    values = yaml.safe_load(text)
    chart = yaml.safe_load(open(chart_yaml))
    assert values["image"]["repository"] == args.repository, values["image"]
    assert values["image"]["digest"] == args.digest, values["image"]
    assert str(chart["version"]) == args.version and str(chart["appVersion"]) == args.version
    images = yaml.safe_load(chart["annotations"]["artifacthub.io/images"])
    assert images == [{"name": "certctl", "image": f"{args.repository}@{args.digest}"}], images


if __name__ == "__main__":
    main()
