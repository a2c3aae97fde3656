"""The Kubernetes manifests of deploy/ against the SpinApp CRD and spin.toml.

Checks, as `kubectl apply -f deploy/` and the Spin Operator would, and more:

- every SpinApp validates against the openAPIV3Schema of the SpinApp CRD in
  deploy/schema/ (spin-operator v0.6.1), strictly: a field the schema does
  not know is an error, as kubectl's strict field validation makes it; and
  passes the operator's admission rules (an executor; `replicas` only
  without `enableAutoscaling`, and then at least 1);
- every function of spin.toml has exactly one SpinApp, named
  `unread-<function>`, whose `components` start with that function (more
  may follow: `health`, for the pod's own readiness probe); every SpinApp
  runs the same image; probes ask for paths its components serve;
- every SpinApp binds every variable of spin.toml: a secret one from the
  Secret (same key), never as a literal, the others from the ConfigMap;
- the Secret template has exactly the secret variables of spin.toml as keys,
  every value empty (it carries no secret);
- each autoscaled SpinApp has one HorizontalPodAutoscaler on its
  Deployment, with 1 <= minReplicas <= maxReplicas;
- the Ingress sends each spin.toml route to the Service of the SpinApp that
  runs its function, and nothing else;
- the reconcile CronJob POSTs the reconcile route to that function's Service
  with the admin token from the Secret.

Then it breaks the manifests in memory, one way at a time, and fails unless
every broken variant is rejected (so the checks above can fail).

Run by scripts/lint (in its venv: jsonschema and PyYAML, pinned in
scripts/lint-requirements.txt); also on its own: python3 tests/deploy/check.py
"""

import copy
import re
import sys
import tomllib
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CRD = DEPLOY / "schema" / "core.spinkube.dev_spinapps.yaml"
SECRET_TEMPLATE = DEPLOY / "secret.yaml.template"
SECRET, CONFIG = "unread-secrets", "unread-config"
# What a Service name (the SpinApp's) may be: an RFC 1035 label.
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# Paths Spin itself answers in every app.
SPIN_PATHS = ("/.well-known/spin/",)


def load_documents():
    """(file name, document) of every manifest kubectl would apply, and the Secret template."""
    files = sorted(DEPLOY.glob("*.yaml")) + sorted(DEPLOY.glob("*.yml")) + [SECRET_TEMPLATE]
    return [(f.name, doc) for f in files for doc in yaml.safe_load_all(f.read_text()) if doc is not None]


def spin_manifest():
    return tomllib.loads((ROOT / "spin.toml").read_text())


def strict(schema):
    """The schema with unknown fields refused wherever it lists the known ones
    (what the API server's strict field validation does)."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    return schema


def spinapp_schema():
    crd = next(doc for doc in yaml.safe_load_all(CRD.read_text()) if doc)
    assert crd["spec"]["names"]["kind"] == "SpinApp", CRD
    (version,) = [v for v in crd["spec"]["versions"] if v.get("served")]
    return crd["spec"]["group"] + "/" + version["name"], strict(version["schema"]["openAPIV3Schema"])


def route_serves(route, path):
    """Whether a spin.toml route serves `path` (exact or trailing wildcard)."""
    if route.endswith("/..."):
        prefix = route[: -len("/...")]
        return path == prefix or path.startswith(prefix + "/") or prefix == ""
    return path.rstrip("/") == route.rstrip("/")


def check(documents, manifest, schema):
    """Every problem found, as text; none: the manifests are right."""
    api_version, spinapp_schema_ = schema
    problems = []
    variables = manifest["variables"]
    secret_variables = {name for name, decl in variables.items() if decl.get("secret")}
    functions = list(manifest["component"])
    routes = [(t["route"], t["component"]) for t in manifest["trigger"]["http"]]
    by_kind = {}
    for file, doc in documents:
        if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict) or "name" not in doc["metadata"]:
            problems.append(f"{file}: a document without metadata.name")
            continue
        by_kind.setdefault(doc.get("kind"), []).append((file, doc))
    for kind in set(by_kind) - {"SpinApp", "HorizontalPodAutoscaler", "Secret", "ConfigMap", "Ingress", "CronJob"}:
        problems.append(f"{by_kind[kind][0][0]}: unexpected kind {kind!r}")

    configs = {doc["metadata"]["name"]: doc.get("data", {}) for _, doc in by_kind.get("ConfigMap", [])}
    secrets = {doc["metadata"]["name"]: (file, doc) for file, doc in by_kind.get("Secret", [])}

    # The SpinApps.
    apps = {}
    images = set()
    for file, app in by_kind.get("SpinApp", []):
        name = app["metadata"]["name"]
        where = f"{file}: SpinApp {name}"
        if app.get("apiVersion") != api_version:
            problems.append(f"{where}: apiVersion {app.get('apiVersion')!r}, the CRD serves {api_version}")
        for error in jsonschema.Draft7Validator(spinapp_schema_).iter_errors(app):
            at = "/".join(str(p) for p in error.absolute_path)
            problems.append(f"{where}: {at}: {error.message}")
        spec = app.get("spec") if isinstance(app.get("spec"), dict) else {}
        if not spec.get("executor"):
            problems.append(f"{where}: spec.executor must be set (the operator's admission rule)")
        if spec.get("enableAutoscaling") and spec.get("replicas"):
            problems.append(f"{where}: replicas cannot be set when autoscaling is enabled (the operator's admission rule)")
        if not spec.get("enableAutoscaling") and not (isinstance(spec.get("replicas"), int) and spec["replicas"] >= 1):
            problems.append(f"{where}: replicas must be > 0 without autoscaling (the operator's admission rule)")
        if not DNS_LABEL.match(name):
            problems.append(f"{where}: the name must be a DNS label (its Deployment and Service take it)")
        images.add(spec.get("image"))
        components = spec.get("components") or []
        if not components:
            problems.append(f"{where}: no components: it would run every function")
            continue
        for component in components:
            if component not in functions:
                problems.append(f"{where}: {component!r} is not a component of spin.toml")
        function = components[0]
        if name != f"unread-{function}":
            problems.append(f"{where}: runs {function}, so it is named unread-{function}")
        if app["metadata"].get("labels", {}).get("app.kubernetes.io/component") != function:
            problems.append(f"{where}: label app.kubernetes.io/component must be {function!r}")
        if any(c != "health" for c in components[1:]) or len(set(components)) != len(components):
            problems.append(f"{where}: components {components}: its function, then health alone may follow")
        apps.setdefault(function, []).append((where, app))
        served = [route for route, component in routes if component in components]
        for probe in ("liveness", "readiness"):
            path = spec.get("checks", {}).get(probe, {}).get("httpGet", {}).get("path")
            if path is None:
                problems.append(f"{where}: no {probe} probe")
            elif not path.startswith(SPIN_PATHS) and not any(route_serves(r, path) for r in served):
                problems.append(f"{where}: the {probe} probe asks for {path}, which none of {components} serves")
        problems += check_variables(where, spec.get("variables") or [], variables, secret_variables, configs)
    for function in functions:
        found = apps.get(function, [])
        if not found:
            problems.append(f"deploy/: the function {function} has no SpinApp")
        elif len(found) > 1:
            problems.append(f"deploy/: the function {function} has more than one SpinApp: {[w for w, _ in found]}")
    if len(images) > 1:
        problems.append(f"deploy/: the SpinApps run different images {sorted(map(str, images))}: the app is one image")
    app_names = {app["metadata"]["name"]: app for found in apps.values() for _, app in found}

    # The Secret template.
    if set(secrets) != {SECRET}:
        problems.append(f"deploy/: one Secret, {SECRET}, in {SECRET_TEMPLATE.name}; found {sorted(secrets)}")
    else:
        file, secret = secrets[SECRET]
        values = {**secret.get("data", {}), **secret.get("stringData", {})}
        for missing in sorted(secret_variables - set(values)):
            problems.append(f"{file}: the Secret lacks {missing!r}, a secret variable of spin.toml")
        for extra in sorted(set(values) - secret_variables):
            problems.append(f"{file}: the Secret has {extra!r}, which is no secret variable of spin.toml")
        for key, value in values.items():
            if value not in ("", None):
                problems.append(f"{file}: {key} has a value: the template carries no real secret")

    # Autoscaling.
    scalers = {}
    for file, hpa in by_kind.get("HorizontalPodAutoscaler", []):
        name = hpa["metadata"]["name"]
        spec = hpa.get("spec", {})
        target = spec.get("scaleTargetRef", {})
        where = f"{file}: HorizontalPodAutoscaler {name}"
        if hpa.get("apiVersion") != "autoscaling/v2":
            problems.append(f"{where}: apiVersion must be autoscaling/v2")
        app = app_names.get(target.get("name"))
        if (target.get("apiVersion"), target.get("kind")) != ("apps/v1", "Deployment") or app is None:
            problems.append(f"{where}: scaleTargetRef must be the Deployment of a SpinApp, not {target}")
        elif not app["spec"].get("enableAutoscaling"):
            problems.append(f"{where}: {target['name']} does not enable autoscaling: the operator would fight the HPA")
        else:
            scalers.setdefault(target["name"], []).append(where)
        low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
        if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
            problems.append(f"{where}: needs 1 <= minReplicas ({low}) <= maxReplicas ({high})")
        if not spec.get("metrics"):
            problems.append(f"{where}: no metrics to scale on")
    for name, app in app_names.items():
        if app.get("spec", {}).get("enableAutoscaling") and len(scalers.get(name, [])) != 1:
            problems.append(f"deploy/: SpinApp {name} is autoscaled by {len(scalers.get(name, []))} HPAs, not one")

    service_of = {component: f"unread-{component}" for component in functions}
    problems += check_ingress(by_kind.get("Ingress", []), routes, service_of, app_names)
    problems += check_cronjob(by_kind.get("CronJob", []), routes, service_of, app_names)
    return problems


def check_variables(where, bound, variables, secret_variables, configs):
    problems = []
    names = [v.get("name") for v in bound]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{where}: variable {name} is bound twice")
    for name in sorted(set(variables) - set(names)):
        problems.append(f"{where}: variable {name} of spin.toml is not bound")
    for variable in bound:
        name = variable.get("name")
        source = variable.get("valueFrom") or {}
        if name not in variables:
            problems.append(f"{where}: variable {name!r} is not in spin.toml")
        elif name in secret_variables:
            ref = source.get("secretKeyRef") or {}
            if "value" in variable or (ref.get("name"), ref.get("key")) != (SECRET, name):
                problems.append(f"{where}: the secret variable {name} must come from the Secret {SECRET}, key {name}")
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            if ref.get("key") not in configs.get(ref.get("name"), {}):
                problems.append(f"{where}: variable {name}: ConfigMap {ref.get('name')} has no key {ref.get('key')!r}")
        elif "value" not in variable:
            problems.append(f"{where}: variable {name}: a value or a configMapKeyRef")
    return problems


def check_ingress(ingresses, routes, service_of, app_names):
    if len(ingresses) != 1:
        return [f"deploy/: one Ingress expected, found {len(ingresses)}"]
    file, ingress = ingresses[0]
    paths = [p for rule in ingress.get("spec", {}).get("rules", []) for p in rule.get("http", {}).get("paths", [])]
    found = {}
    problems = []
    for p in paths:
        service = p.get("backend", {}).get("service", {})
        if service.get("name") not in app_names or service.get("port", {}).get("number") != 80:
            problems.append(f"{file}: {p.get('path')} goes to {service}, not port 80 of a SpinApp's Service")
        found[(p.get("path"), p.get("pathType"))] = service.get("name")
    wanted = {}
    for route, component in routes:
        key = (route[: -len("/...")] or "/", "Prefix") if route.endswith("/...") else (route, "Exact")
        wanted[key] = service_of[component]
    for key, service in wanted.items():
        if found.get(key) != service:
            problems.append(f"{file}: {key[1]} {key[0]} must go to {service}, goes to {found.get(key)}")
    for key in set(found) - set(wanted):
        problems.append(f"{file}: {key[1]} {key[0]} is no route of spin.toml")
    return problems


def check_cronjob(jobs, routes, service_of, app_names):
    route = next((r for r, c in routes if c == "reconcile"), None)
    if len(jobs) != 1 or route is None:
        return [f"deploy/: one reconcile CronJob expected, found {len(jobs)}"]
    file, job = jobs[0]
    problems = []
    spec = job.get("spec", {})
    if not spec.get("schedule"):
        problems.append(f"{file}: no schedule")
    containers = spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    text = " ".join(" ".join(c.get("command", []) + c.get("args", [])) for c in containers)
    env = {e.get("name"): e for c in containers for e in c.get("env", [])}
    ref = env.get("ADMIN_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {})
    if (ref.get("name"), ref.get("key")) != (SECRET, "admin_token"):
        problems.append(f"{file}: ADMIN_TOKEN must come from the Secret {SECRET}, key admin_token")
    url = f"http://{service_of['reconcile']}{route}"
    if service_of["reconcile"] not in app_names or url not in text or "-X POST" not in text:
        problems.append(f"{file}: the job must POST {url}")
    if "Bearer $ADMIN_TOKEN" not in text:
        problems.append(f"{file}: the job must send Authorization: Bearer $ADMIN_TOKEN")
    return problems


def broken_variants(documents):
    """(what, a substring of the problem it must raise, the broken documents)."""

    def edit(what, expected, change):
        docs = copy.deepcopy(documents)
        change(docs)
        return what, expected, docs

    def first(docs, kind, name=None):
        return next(d for _, d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name))

    def spec(docs, name="unread-touch"):
        return first(docs, "SpinApp", name)["spec"]

    def variable(docs, name):
        return next(v for v in spec(docs)["variables"] if v["name"] == name)

    return [
        edit("a field the CRD does not know", "Additional properties",
             lambda d: spec(d).update(enableAutoScaling=True)),
        edit("replicas as text", "is not of type 'integer'",
             lambda d: spec(d).update(enableAutoscaling=False, replicas="3")),
        edit("replicas beside autoscaling", "replicas cannot be set", lambda d: spec(d).update(replicas=3)),
        edit("no executor", "executor must be set", lambda d: spec(d).pop("executor")),
        edit("a function without a SpinApp", "touch has no SpinApp",
             lambda d: d.remove(next(x for x in d if x[1]["metadata"]["name"] == "unread-touch"
                                     and x[1]["kind"] == "SpinApp"))),
        edit("a function with two SpinApps", "more than one SpinApp",
             lambda d: d.append(("copy.yaml", copy.deepcopy(first(d, "SpinApp", "unread-badge"))))),
        edit("a component spin.toml lacks", "is not a component of spin.toml",
             lambda d: spec(d)["components"].append("tuoch")),
        edit("another image", "different images", lambda d: spec(d).update(image="ghcr.io/x/other:1")),
        edit("a secret as a literal", "must come from the Secret",
             lambda d: variable(d, "jwt_secret").update(value="s3cret", valueFrom=None) or
             variable(d, "jwt_secret").pop("valueFrom")),
        edit("a variable not bound", "is not bound",
             lambda d: spec(d)["variables"].remove(variable(d, "sql_url"))),
        edit("a probe no selected component serves", "none of",
             lambda d: spec(d).update(components=["touch"])),
        edit("the Secret without a key", "the Secret lacks 'admin_token'",
             lambda d: first(d, "Secret")["stringData"].pop("admin_token")),
        edit("a real secret in the template", "carries no real secret",
             lambda d: first(d, "Secret")["stringData"].update(jwt_secret="hunter2")),
        edit("an HPA on nothing", "scaleTargetRef",
             lambda d: first(d, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"].update(name="unread-nope")),
        edit("an autoscaled SpinApp without its HPA", "not one",
             lambda d: d.remove(next(x for x in d if x[1]["kind"] == "HorizontalPodAutoscaler"))),
        edit("a route to another function", "must go to unread-list",
             lambda d: first(d, "Ingress")["spec"]["rules"][0]["http"]["paths"][2]["backend"]["service"]
             .update(name="unread-badge")),
        edit("a reconcile job on the wrong path", "must POST",
             lambda d: first(d, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
             .update(args=["curl -X POST http://unread-reconcile/v1/reconcile"])),
    ]


def main():
    documents = load_documents()
    manifest = spin_manifest()
    schema = spinapp_schema()
    problems = check(documents, manifest, schema)
    for problem in problems:
        print(f"deploy: {problem}", file=sys.stderr)
    if problems:
        return 1
    missed = []
    variants = broken_variants(documents)
    for what, expected, broken in variants:
        found = check(broken, manifest, schema)
        if not any(expected in p for p in found):
            missed.append(f"{what}: expected a problem with {expected!r}, got {found}")
    for miss in missed:
        print(f"deploy: not rejected: {miss}", file=sys.stderr)
    if missed:
        return 1
    print(
        f"deploy: {len(documents)} manifests valid against the SpinApp CRD ({CRD.name}) and spin.toml; "
        f"{len(variants)} broken variants rejected"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
