#!/usr/bin/env python3
"""Offline checks of GreenPipe's deployment files, run by the tests (tests/tests/deploy_manifests.rs)
with the virtualenv that scripts/setup.sh creates (.venv).

  check-deploy.py validate FILE...       every document against the Kubernetes OpenAPI schemas
                                         (kubernetes-validate --strict, several versions) and the
                                         Prometheus Operator and cert-manager kinds against their
                                         CRD schemas
  check-deploy.py prometheusrule         print the PrometheusRule built from deploy/prometheus/rules
  check-deploy.py containerfile FILE     parse with the BuildKit parser and check the stages
  check-deploy.py shards FILE            every estimator StatefulSet: SHARD_COUNT == replicas
  check-deploy.py promconfig IN OUT      IN with kubernetes_sd_configs replaced by static targets,
                                         for Debian's promtool, which is built without Kubernetes
                                         discovery (everything else in IN is still checked)

Unknown kinds are errors, not warnings: a manifest nobody validated must not pass.
"""

import json
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "rules"
# Oldest version we support (the StatefulSet pod-index label is there from 1.28) and the newest
# the validator knows.
K8S_VERSIONS = ["1.28.0", None]
OPERATOR_GROUP = "monitoring.coreos.com/"
CERT_MANAGER_GROUP = "cert-manager.io/"


def closed(schema):
    """Rejects unknown fields, like kubernetes-validate --strict does for core kinds."""
    if isinstance(schema, dict):
        if schema.get("type") == "object" and "properties" in schema:
            schema.setdefault("additionalProperties", False)
        for value in schema.values():
            closed(value)
    elif isinstance(schema, list):
        for value in schema:
            closed(value)
    return schema


def operator_validator(kind, group=OPERATOR_GROUP):
    import jsonschema

    if group == CERT_MANAGER_GROUP:
        from cloudcoil.models.cert_manager import v1
    else:
        from cloudcoil.models.prometheus_operator import v1

    model = getattr(v1, kind, None)
    if model is None:
        return None
    return jsonschema.Draft202012Validator(closed(model.model_json_schema(by_alias=True)))


def validate(paths):
    import kubernetes_validate

    versions = [v or kubernetes_validate.latest_version() for v in K8S_VERSIONS]
    failures = 0
    count = 0
    for path in paths:
        for doc in yaml.safe_load_all(pathlib.Path(path).read_text()):
            if not doc:
                continue
            count += 1
            kind = doc.get("kind", "?")
            name = f"{path}: {kind}/{doc.get('metadata', {}).get('name', '?')}"
            api = str(doc.get("apiVersion", ""))
            group = next((g for g in (OPERATOR_GROUP, CERT_MANAGER_GROUP) if api.startswith(g)), None)
            if group is not None:
                validator = operator_validator(kind, group)
                if validator is None:
                    print(f"FAIL {name}: no schema for {doc['apiVersion']} {kind}")
                    failures += 1
                    continue
                errors = [e.message for e in validator.iter_errors(doc)]
                if errors:
                    print(f"FAIL {name}: {errors[0][:400]}")
                    failures += 1
                continue
            for version in versions:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except kubernetes_validate.SchemaNotFoundError as e:
                    print(f"FAIL {name}: no schema ({e}) for Kubernetes {version}")
                    failures += 1
                except kubernetes_validate.ValidationError as e:
                    where = "/".join(str(p) for p in e.path)
                    print(f"FAIL {name} (Kubernetes {version}) at {where}: {e.message[:400]}")
                    failures += 1
    print(f"{count} documents, {failures} failures")
    return 1 if failures or count == 0 else 0


def prometheusrule():
    groups = []
    for path in sorted(RULES.glob("*.yml")):
        groups.extend(yaml.safe_load(path.read_text())["groups"])
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "greenpipe",
            "labels": {"greenpipe.io/monitor": "true"},
        },
        "spec": {"groups": groups},
    }
    print("# Generated from deploy/prometheus/rules/*.yml by scripts/check-deploy.py prometheusrule;")
    print("# tests/tests/deploy_manifests.rs fails when it drifts. Edit the rule files, not this.")
    print(yaml.safe_dump(rule, sort_keys=False, width=100), end="")
    return 0


def containerfile(path):
    import dockerfile

    commands = dockerfile.parse_file(path)
    stages = []
    problems = []
    args_before_from = set()
    for c in commands:
        if c.cmd == "ARG" and not stages:
            args_before_from.add(c.value[0].split("=")[0])
        if c.cmd == "FROM":
            value = [v for v in c.value]
            if len(value) == 3 and value[1].upper() == "AS":
                stages.append(value[2])
            else:
                stages.append(None)
            for flag in c.flags:
                if flag.startswith("--platform=$"):
                    var = flag.split("$", 1)[1].strip("{}")
                    if var not in ("BUILDPLATFORM", "TARGETPLATFORM") and var not in args_before_from:
                        problems.append(f"line {c.start_line}: --platform uses undeclared {var}")
        if c.cmd in ("COPY", "RUN"):
            for flag in c.flags:
                if flag.startswith("--from="):
                    source = flag.split("=", 1)[1]
                    if source not in stages[:-1]:
                        problems.append(f"line {c.start_line}: --from={source} is not an earlier stage")
    if not stages:
        problems.append("no FROM")
    for p in problems:
        print("FAIL", p)
    print(json.dumps({"stages": stages}))
    return 1 if problems else 0


def shards(path):
    count = 0
    problems = []
    for doc in yaml.safe_load_all(pathlib.Path(path).read_text()):
        if not doc or doc.get("kind") != "StatefulSet":
            continue
        if doc["metadata"]["name"] != "greenpipe-estimator":
            continue
        count += 1
        replicas = doc["spec"].get("replicas", 1)
        env = {
            e["name"]: e
            for c in doc["spec"]["template"]["spec"]["containers"]
            for e in c.get("env", [])
        }
        shard_count = env.get("SHARD_COUNT", {}).get("value")
        index = env.get("SHARD_INDEX", {}).get("valueFrom", {}).get("fieldRef", {})
        if shard_count != str(replicas):
            problems.append(f"SHARD_COUNT {shard_count!r} != replicas {replicas}")
        if index.get("fieldPath") != "metadata.labels['apps.kubernetes.io/pod-index']":
            problems.append(f"SHARD_INDEX does not come from the pod-index label: {index}")
    if count == 0:
        problems.append("no greenpipe-estimator StatefulSet")
    for p in problems:
        print("FAIL", p)
    return 1 if problems else 0


def promconfig(source, out):
    config = yaml.safe_load(pathlib.Path(source).read_text())
    for job in config.get("scrape_configs", []):
        if job.pop("kubernetes_sd_configs", None) is not None:
            job["static_configs"] = [{"targets": ["discovered.invalid:80"]}]
    pathlib.Path(out).write_text(yaml.safe_dump(config, sort_keys=False))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "validate":
        return validate(argv[2:])
    if len(argv) == 2 and argv[1] == "prometheusrule":
        return prometheusrule()
    if len(argv) == 3 and argv[1] == "containerfile":
        return containerfile(argv[2])
    if len(argv) == 3 and argv[1] == "shards":
        return shards(argv[2])
    if len(argv) == 4 and argv[1] == "promconfig":
        return promconfig(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
