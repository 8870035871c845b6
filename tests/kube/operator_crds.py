"""The JobSet, PyTorchJob and LeaderWorkerSet CustomResourceDefinitions, made from the schemas
vendored for examples/k8s/ (tests/examples/crd_schemas/, with their source and licence), for the
real control plane. Installed when the control plane starts: the garbage collector watches a new
CRD's objects only from its next discovery sync (every 30 s in v1.20), and a cancel that deletes
such an owner is confirmed when its pods are gone, which takes the garbage collector."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

SCHEMAS = Path(__file__).resolve().parents[1] / "examples" / "crd_schemas"
OPERATORS = {  # kind: (vendored schema, plural, example)
    "JobSet": ("jobsets.jobset.x-k8s.io.json", "jobsets", "jobset.yaml"),
    "PyTorchJob": ("pytorchjobs.kubeflow.org.json", "pytorchjobs", "pytorchjob.yaml"),
    "LeaderWorkerSet": ("leaderworkersets.leaderworkerset.x-k8s.io.json", "leaderworkersets", "leaderworkerset.yaml"),
}


def for_v1_20(node):
    """The schema less its `default: ""` (on object-reference names and probes' grpc.service, from
    Kubernetes 1.30's API types): v1.20's API server reads such a default as null and refuses the
    CRD ("in body must be of type string: null"). A list keyed by such a name (imagePullSecrets, a
    map list keyed by `name`) is then an atomic list, as v1.20 requires a map key to have a default
    or be required. A newer server takes the schema as published."""
    if isinstance(node, list):
        return [for_v1_20(v) for v in node]
    if not isinstance(node, dict):
        return node
    keys = node.get("x-kubernetes-list-map-keys") or []
    item = node.get("items", {}).get("properties", {})
    drop = {"default"} if node.get("default") == "" else set()
    if any(item.get(key, {}).get("default") == "" for key in keys):
        drop |= {"x-kubernetes-list-type", "x-kubernetes-list-map-keys"}
    return {k: for_v1_20(v) for k, v in node.items() if k not in drop}


def crd(kind: str) -> dict:
    """The CustomResourceDefinition around a vendored schema. The files hold only each project's
    published openAPIV3Schema (descriptions removed; tests/examples/crd_schemas/README.md says
    from where); names and scope are the published CRD's."""
    file, plural, _example = OPERATORS[kind]
    vendored = json.loads((SCHEMAS / file).read_text())
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{vendored['group']}"},
        "spec": {
            "group": vendored["group"],
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": vendored["version"],
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": for_v1_20(vendored["openAPIV3Schema"])},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def install_operator_crds(admin: client.ApiClient) -> None:
    """The CRDs created and Established (their APIs served). v1.20 drops the schemas'
    x-kubernetes-validations (CEL rules, 1.25+) as an unknown field."""
    extensions = client.ApiextensionsV1Api(admin)
    names = []
    for kind in OPERATORS:
        body = crd(kind)
        names.append(body["metadata"]["name"])
        try:
            extensions.create_custom_resource_definition(body)
        except ApiException as error:
            if error.status != 409:
                raise
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        conditions = [extensions.read_custom_resource_definition(n).status.conditions or [] for n in names]
        if all(any(c.type == "Established" and c.status == "True" for c in each) for each in conditions):
            return
        time.sleep(0.2)
    raise AssertionError(f"the CRDs {names} were not Established within 60 s")
