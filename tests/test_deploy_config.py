"""deploy/configmap.yaml sets only settings the code reads, every value passes their strict checks,
and the Kubernetes backend is configured from them (tessera/settings.py, agents/runtime.py)."""

import json
import re
import subprocess
import sys

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from tessera import env
from tests.hygiene.repo import ROOT
from tests.hygiene.test_config_table import code_reads
from tests.test_settings import start_django

CONFIGMAP = ROOT / "deploy" / "configmap.yaml"


def configmap_data() -> dict[str, str]:
    return yaml.safe_load(CONFIGMAP.read_text())["data"]


def commented_keys() -> set[str]:
    """Keys shown commented out (`# TESSERA_X: value`): an operator uncomments them as they are."""
    return set(re.findall(r"^\s+#\s*([A-Z][A-Z0-9_]+):\s", CONFIGMAP.read_text(), re.MULTILINE))


def test_every_key_the_configmap_sets_or_shows_is_read_by_the_code():
    keys = set(configmap_data()) | commented_keys()
    assert {"TESSERA_GPU_OPERATOR_NAMESPACE", "TESSERA_MIG_CONFIGMAP", "TESSERA_NAMESPACES"} <= keys
    assert sorted(keys - set(code_reads())) == []


def _backend_config(**environment) -> dict:
    """The kubernetes backend's configuration in a process started with these variables."""
    script = ("import django, json; django.setup(); from agents.runtime import kubernetes_config; "
              "c = kubernetes_config(); print(json.dumps({k: sorted(v) if isinstance(v, frozenset) else v "
              "for k, v in vars(c).items() if k != 'api_client'}))")
    environment = {"SECRET_KEY": "x" * 50, "DEBUG": "0", "DATABASE_URL": "sqlite:////tmp/deploy-config.sqlite3",
                   "PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "tessera.settings", **environment}
    result = subprocess.run([sys.executable, "-c", script], env=environment, cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_shipped_values_start_the_workers_and_configure_the_backend():
    data = configmap_data()
    config = _backend_config(**data)
    assert config["scheduler_name"] == data["TESSERA_SCHEDULER_NAME"]
    assert config["gpu_node_selector"] == data["TESSERA_GPU_NODE_SELECTOR"]
    assert (config["leaf_switch_label"], config["tier_label"]) == (data["TESSERA_LEAF_SWITCH_LABEL"],
                                                                   data["TESSERA_TIER_LABEL"])
    assert config["mig_parted_namespace"] == "gpu-operator" and config["namespaces"] is None


def test_an_openshift_cluster_names_its_operator_namespace_and_configmap():
    config = _backend_config(TESSERA_GPU_OPERATOR_NAMESPACE="nvidia-gpu-operator", TESSERA_MIG_CONFIGMAP="layouts",
                             TESSERA_NAMESPACES="vision, search", TESSERA_SCHEDULER_NAME="tessera-b",
                             TESSERA_GPU_NODE_SELECTOR="nvidia.com/gpu.present=true,!example.org/held")
    assert (config["mig_parted_namespace"], config["mig_parted_configmap"]) == ("nvidia-gpu-operator", "layouts")
    assert config["namespaces"] == ["search", "vision"] and config["scheduler_name"] == "tessera-b"
    assert config["gpu_node_selector"] == "nvidia.com/gpu.present=true,!example.org/held"


@pytest.mark.parametrize("name, value", [
    ("TESSERA_GPU_OPERATOR_NAMESPACE", "GPU_Operator"),
    ("TESSERA_GPU_OPERATOR_NAMESPACE", "gpu.operator"),  # a namespace is a label, no dots
    ("TESSERA_MIG_CONFIGMAP", "Tessera Layouts"),
    ("TESSERA_NAMESPACES", "vision,Search"),
    ("TESSERA_SCHEDULER_NAME", "-tessera"),
    ("TESSERA_LEAF_SWITCH_LABEL", "tessera.io/leaf/switch"),
    ("TESSERA_TIER_LABEL", "/tier"),
    ("TESSERA_GPU_NODE_SELECTOR", "nvidia.com/gpu.present in (true)"),
    ("TESSERA_GPU_NODE_SELECTOR", "!nvidia.com/gpu.present=true"),
    ("TESSERA_GPU_NODE_SELECTOR", ""),
    ("TESSERA_LEADER_ELECTION", "maybe"),
    ("TESSERA_LEASE_NAMESPACE", "tessera.system"),
    ("TESSERA_LEASE_NAME", "Tessera Scheduler"),
    ("TESSERA_MIG_CONFIG_REFRESH_S", "-1"),
    ("TESSERA_MIG_CONFIG_REFRESH_S", "soon"),
])
def test_a_bad_kubernetes_setting_stops_start_up_and_is_named(name, value):
    result = start_django(**{name: value})
    assert result.returncode != 0 and name in result.stderr


@pytest.mark.parametrize("value, good", [
    ("tessera.io/leaf-switch", True), ("topology.kubernetes.io/zone", True), ("tier", True),
    ("Tessera.io/tier", False), ("a/b/c", False), ("x.io/", False), ("-tier", False), ("x" * 64, False),
])
def test_label_keys_follow_kubernetes_rules(monkeypatch, value, good):
    monkeypatch.setenv("TESSERA_X", value)
    if good:
        assert env.env_label_key("TESSERA_X", "") == value
    else:
        with pytest.raises(ImproperlyConfigured, match="TESSERA_X"):
            env.env_label_key("TESSERA_X", "")


def test_a_selector_is_kept_as_given_without_spaces(monkeypatch):
    monkeypatch.setenv("TESSERA_X", " a=b , !c,d!=e, f==g ")
    assert env.env_label_selector("TESSERA_X", "") == "a=b,!c,d!=e,f==g"
