"""Write the Prometheus Operator ``PrometheusRule`` from ``alerts.yml`` (the one rules file).

    python deploy/prometheus/prometheusrule.py          # rewrite the manifest
    python deploy/prometheus/prometheusrule.py --check  # exit 1 if it is out of date

The manifest (``deploy/kubernetes/monitoring/prometheusrule.yaml``) carries ``alerts.yml``'s
``groups`` unchanged as its ``spec``; edit the rules in ``alerts.yml`` (promtool-tested by
``alerts_test.yml``) and run this again. Needs PyYAML (the project's ``test`` extra).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE / "alerts.yml"
MANIFEST = HERE.parent / "kubernetes" / "monitoring" / "prometheusrule.yaml"

HEADER = """\
# Generated from deploy/prometheus/alerts.yml by deploy/prometheus/prometheusrule.py:
# do not edit; change alerts.yml and run the script again (a test checks they agree).
# Prometheus Operator picks up PrometheusRules whose labels match its ruleSelector: add
# that label here if yours selects on one (kube-prometheus-stack: release: <its release>).
"""


def manifest_text(rules_path: Path = RULES) -> str:
    """The PrometheusRule manifest for the rules file at ``rules_path``."""
    groups = yaml.safe_load(rules_path.read_text(encoding="utf-8"))["groups"]
    document = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "stream-dp",
            "namespace": "stream-dp",
            "labels": {
                "app.kubernetes.io/name": "stream-dp",
                "app.kubernetes.io/part-of": "stream-dp",
            },
        },
        "spec": {"groups": groups},
    }
    body = yaml.safe_dump(document, sort_keys=False, width=100, allow_unicode=True)
    return HEADER + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the manifest differs")
    args = parser.parse_args(argv)
    text = manifest_text()
    if args.check:
        current = MANIFEST.read_text(encoding="utf-8") if MANIFEST.exists() else ""
        if current != text:
            print(f"{MANIFEST} is out of date: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    MANIFEST.parent.mkdir(parents=True, exist_ok=True)
    MANIFEST.write_text(text, encoding="utf-8")
    print(f"wrote {MANIFEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
