"""The GPU Operator's namespace, wherever it is configured, is never a job's."""

import pytest
from kubernetes import client

from agents.backends import Refused
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from tests.agents.test_kubernetes_backend import _bind


def test_the_configured_operator_namespace_gets_no_job_pod(kube):
    kube.add_namespace("nvidia-operator-custom")
    kube.add_node("gpu-h100-01", {"nvidia.com/gpu.present": "true"})
    with client.ApiClient(client.Configuration(host=kube.url)) as api_client:
        config = KubernetesConfig(api_client=api_client, mig_parted_namespace="nvidia-operator-custom")
        backend = KubernetesBackend(config)
        with pytest.raises(Refused, match="not one Tessera may place pods in"):
            backend.bind(_bind(namespace="nvidia-operator-custom"))
    assert kube.pod("nvidia-operator-custom", "job-42-0") is None
