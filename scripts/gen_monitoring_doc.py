#!/usr/bin/python3
"""Prints docs/monitoring.md with the chart's alerting rules copied into it.

Run by scripts/gen-docs.sh: the rule file manifests/helm/certctl/files/alerts.yaml is the one
source of the alerts, so the block between the BEGIN and END markers of the page is its
copy; the rest of the page is written by hand and kept as it is.
"""
import sys

RULES = "manifests/helm/certctl/files/alerts.yaml"
BEGIN = f"<!-- BEGIN {RULES}: copied by scripts/gen-docs.sh; do not edit -->"
END = f"<!-- END {RULES} -->"


def main(page_path, rules_path):
    with open(page_path, encoding="utf-8") as f:
        page = f.read()
    with open(rules_path, encoding="utf-8") as f:
        rules = f.read()
    if page.count(BEGIN) != 1 or page.count(END) != 1 or page.index(BEGIN) > page.index(END):
        sys.exit(f"gen_monitoring_doc: {page_path} needs one {BEGIN!r} line followed by "
                 f"one {END!r} line")
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    sys.stdout.write(f"{head}{BEGIN}\n\n```yaml\n{rules.rstrip()}\n```\n\n{END}{tail}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
