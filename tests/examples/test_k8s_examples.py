"""examples/k8s/: every manifest passes its schema, strictly (core kinds: the official Kubernetes
schemas; JobSet, PyTorchJob, LeaderWorkerSet and PodGroup: their projects' CRD schemas, vendored),
and every pod template follows Tessera's conventions (/work/CONVENTIONS14.md, README "Bring your
own workloads").

The real control plane in tests/kube/ is v1.20, which has no Indexed Job and none of these CRDs'
controllers: for these manifests, schema validation is the check."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.agents.k8s_schema import assert_valid
from tests.examples.crd_schemas.extract import extract

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "k8s"
SCHEMAS = Path(__file__).resolve().parent / "crd_schemas"
POD_GROUP_CRD = ROOT / "tests" / "kube" / "crds" / "podgroups.scheduling.x-k8s.io.yaml"
CRD_SCHEMAS = {
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobsets.jobset.x-k8s.io.json",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjobs.kubeflow.org.json",
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "leaderworkersets.leaderworkerset.x-k8s.io.json",
}
POD_GROUP = "scheduling.x-k8s.io/pod-group"
MIN_MEMBER = "tessera.io/min-member"


def documents() -> list[tuple[str, dict]]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        found += [
            (f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc)
            for doc in yaml.safe_load_all(path.read_text())
            if doc
        ]
    return found


def strict(schema):
    """An unknown field is an error, as kubernetes-validate's strict mode makes it for core kinds:
    a structural schema would prune it silently, and a typo (`schedulername`) would go unnoticed."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    tightened = {key: strict(value) for key, value in schema.items()}
    open_ended = "additionalProperties" in schema or schema.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in schema and not open_ended:
        tightened["additionalProperties"] = False
    return tightened


def crd_schema(api_version: str, kind: str) -> dict:
    if (api_version, kind) == ("scheduling.x-k8s.io/v1alpha1", "PodGroup"):
        vendored = extract(POD_GROUP_CRD.read_text())  # the native-gang tests' CRD, byte for byte
    else:
        vendored = json.loads((SCHEMAS / CRD_SCHEMAS[(api_version, kind)]).read_text())
    assert f"{vendored['group']}/{vendored['version']}" == api_version and vendored["kind"] == kind
    return strict(vendored["openAPIV3Schema"])


def assert_schema_valid(doc: dict) -> None:
    group = doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else ""
    if "." not in group:  # a core group (v1, batch/v1): the official schemas
        assert_valid(doc)
        return
    jsonschema.validate(
        doc, crd_schema(doc["apiVersion"], doc["kind"]), format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )


def pod_templates(node, found=None) -> list[dict]:
    """Every pod template (metadata + a spec with containers) anywhere in a manifest."""
    found = [] if found is None else found
    if isinstance(node, dict):
        if isinstance(node.get("spec"), dict) and "containers" in node["spec"]:
            found.append(node)
        for value in node.values():
            pod_templates(value, found)
    elif isinstance(node, list):
        for value in node:
            pod_templates(value, found)
    return found


@pytest.mark.parametrize("where, doc", documents(), ids=[where for where, _ in documents()])
def test_each_example_passes_its_schema(where, doc):
    assert_schema_valid(doc)


def test_the_examples_cover_the_four_ways_teams_submit():
    kinds = {doc["kind"] for _, doc in documents()}
    assert {"Job", "JobSet", "PyTorchJob", "LeaderWorkerSet"} <= kinds


@pytest.mark.parametrize(
    "bad",
    [
        {"spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"schedulername": "tessera"}}}]}},
        {"spec": {"replicatedJobs": [{"name": "w", "replicas": "two", "template": {}}]}},
    ],
)
def test_the_crd_schemas_refuse_a_typo_or_a_wrong_type(bad):
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "x"}, **bad}
    with pytest.raises(jsonschema.ValidationError):
        assert_schema_valid(jobset)


def test_every_pod_is_tesseras_and_names_its_gang_and_its_size():
    groups = {doc["metadata"]["name"]: doc["spec"]["minMember"] for _, doc in documents() if doc["kind"] == "PodGroup"}
    checked = 0
    for where, doc in documents():
        for template in pod_templates(doc):
            labels = template["metadata"].get("labels", {})
            annotations = template["metadata"].get("annotations", {})
            assert template["spec"]["schedulerName"] == "tessera", where
            assert labels.get("app.kubernetes.io/managed-by") != "tessera", where  # Tessera's own pods only
            group = labels[POD_GROUP]
            assert group in groups or int(annotations[MIN_MEMBER]) >= 2, where
            for container in template["spec"]["containers"]:
                limits = container["resources"]["limits"]
                assert int(limits["nvidia.com/gpu"]) == int(container["resources"]["requests"]["nvidia.com/gpu"])
            checked += 1
    assert checked == 6  # the Job's, the JobSet's, the PyTorchJob's two, the LeaderWorkerSet's two


@pytest.mark.parametrize("example", ["pytorch-ddp-indexed-job.yaml:Job/", "jobset.yaml:", "pytorchjob.yaml:"])
def test_the_training_examples_mount_their_checkpoint_channel_as_tesseras_intake_reads_it(example):
    """The volume the README tells a team to add is the one the intake looks for (k8s_channel), in
    every pod template of the three training examples (the LeaderWorkerSet serves: no checkpoints)."""
    from kubernetes import client

    from agents.backends.k8s_native import native_pod

    (doc,) = [doc for where, doc in documents() if where.startswith(example)]
    templates = pod_templates(doc)
    assert templates
    for template in map(copy.deepcopy, templates):
        for container in template["spec"]["containers"]:  # quantities as the API server returns them
            for key, amounts in container["resources"].items():
                container["resources"][key] = {name: str(amount) for name, amount in amounts.items()}
        meta = {**template["metadata"], "name": "ddp-0", "namespace": "vision", "uid": "u-1"}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}
        read = client.ApiClient().deserialize(json.dumps(pod), "V1Pod", "application/json")
        assert native_pod(read).checkpoint_interval_s == 3600, example


def test_the_vendored_schemas_are_as_their_readme_records():
    readme = (SCHEMAS / "README.md").read_text()
    for name in CRD_SCHEMAS.values():
        digest = hashlib.sha256((SCHEMAS / name).read_bytes()).hexdigest()
        assert f"`{name}`: `{digest}`" in readme, name


def test_strict_leaves_the_schema_it_was_given_alone():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    before = copy.deepcopy(schema)
    assert strict(schema)["additionalProperties"] is False and schema == before
