#!/usr/bin/env python3
"""Validates a Kafka resource (YAML) against the openAPIV3Schema of Strimzi's Kafka CRD.

usage: validate_strimzi.py CRD.yaml RESOURCE.yaml

The CRD is the one Strimzi's own CRD generator writes from its API model (tests/offline/
capacity.rs generates it from the jars tools/setup fetches). Kubernetes prunes fields a
structural schema does not declare, silently: so a field the schema does not know is an
error here (every object with `properties` and no x-kubernetes-preserve-unknown-fields
gets additionalProperties: false). Prints each error with its path and exits 1 if any,
else prints "valid" and the brokerCapacity block read back as JSON.
"""

import json
import sys

import jsonschema
import yaml


def closed(schema):
    """The schema with unknown fields refused where Kubernetes would prune them."""
    if isinstance(schema, dict):
        out = {k: closed(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [closed(v) for v in schema]
    return schema


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        crd = yaml.safe_load(f)
    with open(sys.argv[2]) as f:
        resource = yaml.safe_load(f)
    versions = crd["spec"]["versions"]
    version = resource["apiVersion"].split("/")[1]
    match = [v for v in versions if v["name"] == version]
    if not match:
        print(f"the CRD has no version {version} (it has {[v['name'] for v in versions]})")
        return 1
    schema = closed(match[0]["schema"]["openAPIV3Schema"])
    # metadata is the API server's (ObjectMeta), not the CRD's.
    schema["properties"].pop("metadata", None)
    resource = {k: v for k, v in resource.items() if k != "metadata"}
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(resource),
                    key=lambda e: list(e.absolute_path))
    for e in errors:
        print("/".join(str(p) for p in e.absolute_path) + ": " + e.message)
    if errors:
        return 1
    print("valid")
    print(json.dumps(resource["spec"]["cruiseControl"]["brokerCapacity"], sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
