"""Every YAML document under deploy/ passes the official Kubernetes schemas, strictly."""

from pathlib import Path

import pytest
import yaml

from tests.agents.k8s_schema import assert_valid

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _documents():
    for path in sorted(DEPLOY.glob("**/*.yaml")):
        if path.name == "kustomization.yaml":  # kustomize's, not the cluster's
            continue
        for number, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc is not None:
                yield pytest.param(doc, id=f"{path.name}#{number}-{doc.get('kind')}")


DOCUMENTS = list(_documents())


def _by_kind(kind):
    return [p.values[0] for p in DOCUMENTS if p.values[0]["kind"] == kind]


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_every_document_is_valid(doc):
    assert_valid(doc)


def test_the_pieces_are_all_there():
    deployments = {d["metadata"]["name"] for d in _by_kind("Deployment")}
    assert deployments == {"tessera-portal", "tessera-worker", "tessera-beat", "tessera-redis"}
    for kind in ("Service", "DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                 "ConfigMap", "Namespace", "PriorityClass", "Job", "Ingress", "PodDisruptionBudget",
                 "NetworkPolicy", "Secret"):
        assert _by_kind(kind), kind


def test_the_agent_runs_on_gpu_nodes_and_answers_only_the_workers_token():
    """The workers send their ServiceAccount token for the agents' audience; the agents check it with
    the API server (agents/node_agent/auth.py), allowing the workers' ServiceAccount only."""
    (agent,) = _by_kind("DaemonSet")
    spec = agent["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "volumes" not in spec  # no Secret on the nodes
    command = spec["containers"][0]["command"]
    worker = next(d for d in _by_kind("Deployment") if d["metadata"]["name"] == "tessera-worker")
    pod = worker["spec"]["template"]["spec"]
    allowed = command[command.index("--allow-serviceaccount") + 1]
    assert allowed == f"tessera-system:{pod['serviceAccountName']}"
    [volume] = [v for v in pod["volumes"] if v["name"] == "agent-token"]
    [source] = volume["projected"]["sources"]
    assert source["serviceAccountToken"]["audience"] == command[command.index("--audience") + 1]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "agent-token"]
    config = yaml.safe_load((DEPLOY / "configmap.yaml").read_text())["data"]
    assert config["TESSERA_AGENT_TOKEN_FILE"] == f"{mount['mountPath']}/{source['serviceAccountToken']['path']}"
    assert config["TESSERA_AGENT_AUTH"] == "serviceaccount"


def test_the_backend_gets_the_least_rights_it_needs():
    role, logs, review = sorted(_by_kind("ClusterRole"), key=lambda r: r["metadata"]["name"])
    assert logs["metadata"]["name"] == "tessera-portal-logs"
    assert review["rules"] == [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
                                "verbs": ["create"]}]
    assert logs["rules"] == [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]
    rules = {(r["resources"][0]): sorted(r["verbs"]) for r in role["rules"]}
    assert rules == {
        "nodes": ["get", "list", "patch", "watch"],
        "pods": ["create", "delete", "get", "list", "patch", "watch"],
        "pods/binding": ["create"],
        "secrets": ["create"],
        "namespaces": ["get"],
        "events": ["create", "patch"],
        "podgroups": ["get", "list", "watch"],
        "services": ["create", "delete", "list"],  # a multi-pod run's headless Service
        # a cancelled native pod's batch/v1 Job (get: the JobSet controlling it), JobSet,
        # PyTorchJob or LeaderWorkerSet (get statefulsets: the way up to it; k8s_native.OWNER_KINDS)
        "jobs": ["delete", "get"],
        "jobsets": ["delete"],
        "pytorchjobs": ["delete"],
        "statefulsets": ["get"],
        "leaderworkersets": ["delete"],
    }
    assert all(len(r["resources"]) == 1 for r in role["rules"])
    groups = {r["resources"][0]: r["apiGroups"] for r in role["rules"]}
    assert groups.pop("podgroups") == ["scheduling.x-k8s.io", "scheduling.k8s.io"] and groups.pop("jobs") == ["batch"]
    assert groups.pop("jobsets") == ["jobset.x-k8s.io"] and groups.pop("pytorchjobs") == ["kubeflow.org"]
    assert groups.pop("statefulsets") == ["apps"] and groups.pop("leaderworkersets") == ["leaderworkerset.x-k8s.io"]
    assert all(g == [""] for g in groups.values())
    with_token = [d["metadata"]["name"] for d in _by_kind("Deployment") + _by_kind("DaemonSet")
                  if d["spec"]["template"]["spec"].get("automountServiceAccountToken", True)]
    assert sorted(with_token) == ["tessera-beat", "tessera-node-agent", "tessera-portal", "tessera-worker"]
    portal = next(d for d in _by_kind("Deployment") if d["metadata"]["name"] == "tessera-portal")
    assert portal["spec"]["template"]["spec"]["serviceAccountName"] == "tessera-portal"
    worker = next(d for d in _by_kind("Deployment") if d["metadata"]["name"] == "tessera-worker")
    assert worker["spec"]["template"]["spec"]["serviceAccountName"] == "tessera-backend"


def test_beat_and_the_workers_survive_a_lost_node():
    """Two of each on different nodes, moved off a lost node in seconds; beat elects its sender."""
    for name in ("tessera-beat", "tessera-worker"):
        deployment = next(d for d in _by_kind("Deployment") if d["metadata"]["name"] == name)
        pod = deployment["spec"]["template"]["spec"]
        assert deployment["spec"]["replicas"] >= 2
        [term] = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {"app.kubernetes.io/name": name}
        assert {(t["key"], t["tolerationSeconds"]) for t in pod["tolerations"]} == {
            ("node.kubernetes.io/not-ready", 10), ("node.kubernetes.io/unreachable", 10)}
    beat = next(d for d in _by_kind("Deployment") if d["metadata"]["name"] == "tessera-beat")
    assert beat["spec"]["template"]["spec"]["serviceAccountName"] == "tessera-beat"
    assert yaml.safe_load((DEPLOY / "configmap.yaml").read_text())["data"]["TESSERA_LEADER_ELECTION"] == "1"
