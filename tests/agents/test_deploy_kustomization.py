"""deploy/ is a kustomize base that stands on its own: it lists every manifest, ships everything its
workloads name (but the Secrets, which are templates, and the prerequisites the README lists), and
names the image the Dockerfile builds. tests/kube/test_deploy_apply.py applies it to a real cluster."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from tessera import env

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TEMPLATES = {"secrets.example.yaml"}  # applied by hand with real values, never by the base
NAMESPACE = "tessera-system"


def kustomization() -> dict:
    return yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())


def base_documents() -> list[dict]:
    """What the base creates, file by file in its order."""
    return [doc for name in kustomization()["resources"]
            for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def _of(kind: str, documents=None) -> list[dict]:
    return [doc for doc in documents or base_documents() if doc["kind"] == kind]


def _pod_specs() -> list[tuple[dict, dict]]:
    """(workload, its pod spec) for every Deployment, DaemonSet and Job."""
    return [(doc, doc["spec"]["template"]["spec"]) for doc in base_documents()
            if doc["kind"] in ("Deployment", "DaemonSet", "Job")]


def test_it_lists_every_manifest_once_and_namespace_first():
    listed = kustomization()["resources"]
    on_disk = {path.name for path in DEPLOY.glob("*.yaml")} - TEMPLATES - {"kustomization.yaml"}
    assert sorted(listed) == sorted(on_disk) and len(set(listed)) == len(listed)
    assert listed[0] == "namespace.yaml"
    assert "namespace" not in kustomization()  # the GPU Operator's Role must keep its namespace


def test_every_namespaced_object_is_in_tessera_system_or_the_operators():
    cluster_wide = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding"}
    places = {(doc["kind"], doc["metadata"].get("namespace")) for doc in base_documents()
              if doc["kind"] not in cluster_wide}
    assert {namespace for _kind, namespace in places} == {NAMESPACE, "gpu-operator"}
    assert {kind for kind, namespace in places if namespace == "gpu-operator"} == {"Role", "RoleBinding"}


def test_every_configmap_and_secret_a_pod_reads_is_shipped_or_templated():
    shipped = {doc["metadata"]["name"] for doc in _of("ConfigMap")}
    templates = {doc["metadata"]["name"] for doc in yaml.safe_load_all((DEPLOY / "secrets.example.yaml").read_text())
                 if doc and doc["kind"] == "Secret"}
    for workload, spec in _pod_specs():
        containers = spec.get("containers", []) + spec.get("initContainers", [])
        for source in (s for c in containers for s in c.get("envFrom", [])):
            if "configMapRef" in source:
                assert source["configMapRef"]["name"] in shipped, workload["metadata"]["name"]
            else:
                assert source["secretRef"]["name"] in templates, workload["metadata"]["name"]
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                assert volume["secret"]["secretName"] in templates, workload["metadata"]["name"]


def test_the_redis_the_settings_name_is_shipped():
    redis_url = _of("ConfigMap")[0]["data"]["REDIS_URL"]
    host = re.match(r"redis://([^.:/]+)\.([^.:/]+)\.svc:(\d+)/", redis_url)
    service = next(doc for doc in _of("Service") if doc["metadata"]["name"] == host.group(1))
    assert service["metadata"]["namespace"] == host.group(2)
    assert int(host.group(3)) in {port["port"] for port in service["spec"]["ports"]}


def test_every_selector_picks_a_workload():
    labels = [workload["spec"]["template"]["metadata"]["labels"] for workload, _spec in _pod_specs()]

    def picks(selector: dict) -> bool:
        return any(selector.items() <= pod_labels.items() for pod_labels in labels)

    for service in _of("Service"):
        assert picks(service["spec"]["selector"]), service["metadata"]["name"]
    for budget in _of("PodDisruptionBudget"):
        assert picks(budget["spec"]["selector"]["matchLabels"]), budget["metadata"]["name"]
    for policy in _of("NetworkPolicy"):
        assert picks(policy["spec"]["podSelector"].get("matchLabels", {})), policy["metadata"]["name"]
    ingress_backends = {path["backend"]["service"]["name"] for ingress in _of("Ingress")
                        for rule in ingress["spec"]["rules"] for path in rule["http"]["paths"]}
    assert ingress_backends <= {service["metadata"]["name"] for service in _of("Service")}


def test_the_image_is_the_one_the_dockerfile_builds():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"docker build -t tessera:{version} ." in (ROOT / "Dockerfile").read_text()
    assert kustomization()["images"] == [{"name": "tessera", "newTag": version}]
    ours = {container["image"] for _workload, spec in _pod_specs()
            for container in spec.get("containers", []) + spec.get("initContainers", [])
            if container["image"].startswith("tessera")}
    assert ours == {f"tessera:{version}"}


def test_the_readme_lists_what_deploy_does_not_ship():
    section = (ROOT / "README.md").read_text().split("\n## Deploying\n", 1)[1].split("\n## ", 1)[0]
    runtime_classes = {spec["runtimeClassName"] for _workload, spec in _pod_specs() if "runtimeClassName" in spec}
    assert runtime_classes == {"nvidia"}
    for prerequisite in ("GPU Operator", "`nvidia` RuntimeClass", "mig-manager", "nvidia-gpu-operator",
                         "PostgreSQL", "tessera-secrets", "tessera-tls"):
        assert prerequisite in section, prerequisite


def test_the_secret_templates_would_not_start_anything(monkeypatch):
    (secrets,) = [doc for doc in yaml.safe_load_all((DEPLOY / "secrets.example.yaml").read_text()) if doc]
    monkeypatch.setenv("SECRET_KEY", secrets["stringData"]["SECRET_KEY"])
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY"):
        env.env_secret_key("SECRET_KEY", debug=False, demo_key_file=None)
    monkeypatch.setenv("TESSERA_METRICS_TOKEN", secrets["stringData"]["TESSERA_METRICS_TOKEN"])
    with pytest.raises(ImproperlyConfigured, match="TESSERA_METRICS_TOKEN"):
        env.env_token("TESSERA_METRICS_TOKEN")


def test_the_wait_for_migrations_check_fails_until_migrated_then_passes(tmp_path):
    """The init container's contract: `migrate --check` exits non-zero while migrations are pending."""
    portal = yaml.safe_load((DEPLOY / "portal.yaml").read_text().split("\n---\n")[0])
    (init,) = portal["spec"]["template"]["spec"]["initContainers"]
    assert "python manage.py migrate --check" in init["command"][-1]
    environment = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.sqlite3'}", "DEBUG": "0",
                   "SECRET_KEY": "x" * 50}

    def manage(*args: str) -> int:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True,
                              timeout=120).returncode

    assert manage("migrate", "--check") != 0
    assert manage("migrate", "--noinput") == 0
    assert manage("migrate", "--check") == 0
