#!/usr/bin/env python3
"""Checks objects slicectl renders for GKE against the CRD schemas in
k8s/ (or $SLICECTL_K8S_DIR), the way the API server does with
fieldValidation=Strict: every schema with "properties" and no
additionalProperties or x-kubernetes-preserve-unknown-fields refuses
fields it does not name.

usage: gke_validate.py JSON_FILE [YAML_FILE]
JSON_FILE holds a v1 List (or one object); YAML_FILE, when given, must
hold the same objects as YAML (checks slicectl's YAML emitter).
Exit 0 valid, 1 invalid (each error on stderr), 2 cannot run.
"""
import functools
import json
import os
import sys

try:
    import jsonschema
    import yaml
except ImportError as exc:  # the test skips on 2
    print(f"gke_validate: {exc}", file=sys.stderr)
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))


def k8s_dir():
    """$SLICECTL_K8S_DIR, else k8s/ of the source tree (JobSet's and
    Kueue's CRDs, copied in-tree)."""
    return os.environ.get("SLICECTL_K8S_DIR") or os.path.normpath(
        os.path.join(HERE, "..", "..", "..", "..", "k8s"))


K8S = k8s_dir()
CRDS = {
    ("jobset.x-k8s.io", "JobSet"): "jobset-v0.10.1.jobsets.yaml",
}


def strict(schema):
    if isinstance(schema, dict):
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        for v in schema.values():
            strict(v)
    elif isinstance(schema, list):
        for v in schema:
            strict(v)
    return schema


# libyaml's loader when PyYAML has it: the JobSet CRD is large, and the
# pure-Python loader takes seconds over it.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=None)
def schema_for(api_version, kind):
    """The strict schema of api_version's kind, loaded once: a List holds
    dozens of objects of the same kind."""
    group, _, version = api_version.rpartition("/")
    name = CRDS.get((group, kind))
    if not name:
        raise SystemExit(f"gke_validate: no CRD for {api_version} {kind}")
    path = os.path.join(K8S, name)
    if not os.path.exists(path):
        raise SystemExit(f"gke_validate: {path} is missing (k8s/ holds "
                         "the CRDs in-tree)")
    with open(path) as f:
        crd = yaml.load(f, Loader=LOADER)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return strict(v["schema"]["openAPIV3Schema"])
    raise SystemExit(f"gke_validate: {name} has no version {version}")


@functools.lru_cache(maxsize=None)
def validator_for(api_version, kind):
    return jsonschema.Draft7Validator(schema_for(api_version, kind))


def items(doc):
    return doc["items"] if doc.get("kind") == "List" else [doc]


def main():
    with open(sys.argv[1]) as f:
        objs = items(json.load(f))
    bad = 0
    for o in objs:
        validator = validator_for(o["apiVersion"], o["kind"])
        for err in validator.iter_errors(o):
            where = "/".join(str(p) for p in err.absolute_path)
            print(f"{o['kind']} {where}: {err.message}", file=sys.stderr)
            bad += 1
    if len(sys.argv) > 2:
        with open(sys.argv[2]) as f:
            docs = [d for d in yaml.load_all(f, Loader=LOADER)
                    if d is not None]
        if docs != objs:
            print("the YAML does not say what the JSON says", file=sys.stderr)
            bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
