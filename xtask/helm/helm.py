"""A small `helm` command over helm-python-sdk (Helm v4's Go SDK in a native library).

Helm is not packaged for Debian and no release binary can be downloaded here, so
`cargo xtask helm …` runs this script in a venv that holds PyPI's helm-python-sdk.
It takes the common subset of helm's own arguments:

    lint CHART... [--strict] [-f VALUES]... [--set K=V]...
    template NAME CHART [-n NS] [-f VALUES]... [--set K=V]... [--json]
    install NAME CHART [-n NS] [--create-namespace] [-f VALUES]... [--set K=V]... [--wait] [--timeout S]
    upgrade NAME CHART [-n NS] [--install] [-f VALUES]... [--set K=V]... [--wait] [--timeout S]
    uninstall NAME [-n NS] [--wait] [--timeout S] [--ignore-not-found]
    list [-n NS]
    package CHART [-d DIR]

The cluster is the one $KUBECONFIG names. Values are checked against the chart's
values.schema.json before rendering, installing or upgrading, as helm does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import helm_python as helm

SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}


def merge(into: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep-merges `over` into `into` (maps merge, everything else is replaced), as helm merges -f files."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def values_of(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for path in args.values or []:
        with open(path, encoding="utf-8") as f:
            merge(values, helm.values_from_yaml(f.read()) or {})
    for expr in args.set or []:
        merge(values, helm.parse_set_string(expr))
    for expr in args.set_string or []:
        merge(values, helm.parse_set_string_values(expr))
    for expr in args.set_json or []:
        merge(values, helm.parse_set_json(expr))
    return values


def load(path: str, values: dict[str, Any]) -> helm.Chart:
    chart = helm.Chart.load(path)
    chart.validate_schema(values)
    return chart


def config(namespace: str | None) -> helm.Config:
    return helm.Config(kubeconfig_path=os.environ.get("KUBECONFIG"), namespace=namespace)


def documents(rendered: dict[str, str]) -> list[tuple[str, str]]:
    """(template path, YAML document) for every non-empty document, in helm template's order."""
    out = []
    for path in sorted(rendered):
        if not path.endswith((".yaml", ".yml", ".json")) or "/tests/" in path:
            continue
        for doc in rendered[path].split("\n---"):
            body = doc.strip("\n")
            if body.strip().lstrip("-").strip() and any(
                line.strip() and not line.lstrip().startswith("#") for line in body.splitlines()
            ):
                out.append((path, body.lstrip("-\n")))
    return out


def cmd_lint(args: argparse.Namespace) -> int:
    values = values_of(args)
    failed = False
    for path in args.charts:
        report = helm.lint(path, values or None, strict=args.strict or None)
        problems = 0
        for m in report.get("messages") or []:
            severity = m.get("severity", 0)
            if severity >= 2 or args.verbose:
                print(f"[{SEVERITY.get(severity, severity)}] {m.get('path')}: {m.get('error')}")
            if severity >= 3 or (args.strict and severity >= 2):
                problems += 1
        for e in report.get("errors") or []:
            print(f"[ERROR] {e}")
            problems += 1
        print(f"==> {path}: {'clean' if problems == 0 else f'{problems} problem(s)'}")
        failed |= problems > 0
    return 1 if failed else 0


def cmd_template(args: argparse.Namespace) -> int:
    values = values_of(args)
    chart = load(args.chart, values)
    rendered = chart.render(values, name=args.name, namespace=args.namespace, is_install=True)
    docs = documents(rendered)
    if args.json:
        print(json.dumps([helm.values_from_yaml(body) for _, body in docs]))
    else:
        for path, body in docs:
            print(f"---\n# Source: {path}\n{body}")
    return 0


def cmd_install(args: argparse.Namespace) -> int:
    values = values_of(args)
    chart = load(args.chart, values)
    release = config(args.namespace).install(
        chart,
        args.name,
        values,
        namespace=args.namespace,
        create_namespace=args.create_namespace,
        wait="watcher" if args.wait else None,
        timeout=args.timeout,
    )
    report("installed", args.name, release)
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    values = values_of(args)
    chart = load(args.chart, values)
    cfg = config(args.namespace)
    if args.install and not any(r.get("name") == args.name for r in cfg.list() or []):
        return cmd_install(args)
    release = cfg.upgrade(
        chart,
        args.name,
        values,
        namespace=args.namespace,
        wait="watcher" if args.wait else None,
        timeout=args.timeout,
    )
    report("upgraded", args.name, release)
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    config(args.namespace).uninstall(
        args.name,
        wait="watcher" if args.wait else None,
        timeout=args.timeout,
        ignore_not_found=args.ignore_not_found,
    )
    print(f"uninstalled {args.name}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    for r in config(args.namespace).list() or []:
        print(f"{r.get('name')}\t{r.get('namespace')}\t{r.get('revision')}\t{status_of(r)}")
    return 0


def cmd_package(args: argparse.Namespace) -> int:
    print(helm.package(args.chart, destination=args.destination))
    return 0


def status_of(release: dict[str, Any]) -> str:
    info = release.get("info") or {}
    return str(release.get("status") or info.get("status") or "unknown")


def report(done: str, name: str, release: dict[str, Any]) -> None:
    """As helm says it: the release, its revision and status, then the chart's NOTES."""
    print(f"{done} {name}: revision {release.get('revision')}, {status_of(release)}")
    notes = (release.get("notes") or "").strip()
    if notes:
        print(f"NOTES:\n{notes}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cargo xtask helm", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    def with_values(s: argparse.ArgumentParser) -> None:
        s.add_argument("-f", "--values", action="append", help="a values YAML file (repeatable)")
        s.add_argument("--set", action="append", help="K=V (repeatable)")
        s.add_argument("--set-string", action="append", help="K=V, V kept a string")
        s.add_argument("--set-json", action="append", help="K=JSON")

    def with_ns(s: argparse.ArgumentParser) -> None:
        s.add_argument("-n", "--namespace", default="default")

    def with_wait(s: argparse.ArgumentParser) -> None:
        s.add_argument("--wait", action="store_true", help="wait until the resources are ready")
        s.add_argument("--timeout", type=int, default=300, help="seconds (default 300)")

    s = sub.add_parser("lint")
    s.add_argument("charts", nargs="+")
    s.add_argument("--strict", action="store_true", help="warnings fail too")
    s.add_argument("-v", "--verbose", action="store_true", help="print INFO messages too")
    with_values(s)
    s.set_defaults(run=cmd_lint)

    s = sub.add_parser("template")
    s.add_argument("name")
    s.add_argument("chart")
    s.add_argument("--json", action="store_true", help="a JSON array of the objects")
    with_ns(s)
    with_values(s)
    s.set_defaults(run=cmd_template)

    s = sub.add_parser("install")
    s.add_argument("name")
    s.add_argument("chart")
    s.add_argument("--create-namespace", action="store_true")
    with_ns(s)
    with_values(s)
    with_wait(s)
    s.set_defaults(run=cmd_install)

    s = sub.add_parser("upgrade")
    s.add_argument("name")
    s.add_argument("chart")
    s.add_argument("-i", "--install", action="store_true")
    s.add_argument("--create-namespace", action="store_true")
    with_ns(s)
    with_values(s)
    with_wait(s)
    s.set_defaults(run=cmd_upgrade)

    s = sub.add_parser("uninstall")
    s.add_argument("name")
    s.add_argument("--ignore-not-found", action="store_true")
    with_ns(s)
    with_wait(s)
    s.set_defaults(run=cmd_uninstall)

    s = sub.add_parser("list")
    with_ns(s)
    s.set_defaults(run=cmd_list)

    s = sub.add_parser("package")
    s.add_argument("chart")
    s.add_argument("-d", "--destination", default=".")
    s.set_defaults(run=cmd_package)
    return p


def main() -> int:
    args = parser().parse_args()
    try:
        return args.run(args)
    except helm.HelmError as e:
        print(f"Error: {args.command}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"Error: {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
