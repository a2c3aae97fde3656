"""Every route of spin.toml has a path in openapi.yaml, every path of
openapi.yaml is served by the route it names (`x-spin-route`), and
README's route table lists exactly openapi.yaml's operations with the
component serving each, by Spin's
routing rules for the kinds of route spin.toml uses, exact and trailing
wildcard: an exact route beats any wildcard, the longest wildcard prefix wins.
tools/host/src/routes.rs routes with Spin's own router (routefinder), which
agrees. A `:name` segment matches one segment here too, but this model ranks
it as a literal: Spin ranks a literal segment above a `:name` one at the same
place (`/v1/touch/...` beats `/v1/:id` for `/v1/touch`), so a spin.toml that
used `:name` routes would need that rule here.

Run by tests/contract/run; also on its own: python3 tests/contract/routes.py
"""

import re
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def spin_routes(manifest):
    triggers = tomllib.loads(manifest.read_text())["trigger"]["http"]
    return {t["route"]: t["component"] for t in triggers}


def segments(path):
    return [s for s in path.strip("/").split("/") if s]


def matches(route, path):
    """Whether `route` serves `path`, and how specifically (higher wins)."""
    wildcard = route == "/..." or route.endswith("/...")
    pattern = segments(route[: -len("/...")] if wildcard else route)
    parts = segments(path)
    if wildcard:
        if len(parts) < len(pattern):
            return None
        parts = parts[: len(pattern)]
    elif len(parts) != len(pattern):
        return None
    if all(p.startswith(":") or p == q for p, q in zip(pattern, parts)):
        return (not wildcard, len(pattern))
    return None


def route_of(routes, path):
    found = [(matches(r, path), r) for r in routes]
    found = [(rank, r) for rank, r in found if rank is not None]
    return max(found)[1] if found else None


def sample(path):
    """The path with each `{param}` filled with a plain identifier."""
    return re.sub(r"\{[^}]+\}", "x1", path)


def check(manifest=ROOT / "spin.toml", document=ROOT / "openapi.yaml"):
    routes = spin_routes(manifest)
    paths = yaml.safe_load(document.read_text())["paths"]
    problems = []
    documented = set()
    for path, item in paths.items():
        declared = item.get("x-spin-route")
        if not any(m in item for m in METHODS):
            problems.append(f"openapi.yaml: {path} has no operation")
        if declared is None:
            problems.append(f"openapi.yaml: {path} has no x-spin-route")
            continue
        documented.add(declared)
        if declared not in routes:
            problems.append(f"openapi.yaml: {path} names route {declared!r}, which spin.toml does not have")
            continue
        served_by = route_of(routes, sample(path))
        if served_by != declared:
            problems.append(f"openapi.yaml: {path} names route {declared!r}, but spin.toml routes it to {served_by!r}")
    for route, component in routes.items():
        if route not in documented:
            problems.append(f"spin.toml: route {route!r} (component {component}) has no path in openapi.yaml")
    return routes, paths, problems


README_ROW = re.compile(r"^\| `(GET|POST) (/[^`]*)` \| ([a-z-]+) \|")


def check_readme(routes, paths, readme=ROOT / "README.md"):
    """README's route table names every operation of openapi.yaml, with the
    spin.toml component that serves it, and nothing else."""
    problems = []
    listed = {}
    for line in readme.read_text().splitlines():
        row = README_ROW.match(line)
        if row:
            method, path, component = row.groups()
            listed[(method.lower(), path)] = component
    for path, item in paths.items():
        for method in METHODS & set(item):
            served = routes.get(item.get("x-spin-route"))
            if (method, path) not in listed:
                problems.append(f"README.md: the route table lacks {method.upper()} {path}")
            elif listed[(method, path)] != served:
                problems.append(
                    f"README.md: {method.upper()} {path} is served by {served}, not {listed[(method, path)]}"
                )
    for method, path in listed:
        if method not in paths.get(path, {}):
            problems.append(f"README.md: {method.upper()} {path} is not in openapi.yaml")
    return problems


def main():
    routes, paths, problems = check()
    problems += check_readme(routes, paths)
    for problem in problems:
        print(f"routes: {problem}", file=sys.stderr)
    print(f"routes: {len(routes)} spin.toml routes, {len(paths)} openapi.yaml paths: {'mismatch' if problems else 'match'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
