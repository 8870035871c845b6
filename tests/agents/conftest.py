"""A fake Kubernetes API server on real HTTP, and a backend that talks to it."""

import pytest
from kubernetes import client

from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from tests.agents.fake_kube_api import FakeKubeApi


@pytest.fixture
def kube():
    api = FakeKubeApi()
    api.url = api.start()
    yield api
    api.stop()


@pytest.fixture
def backend(kube):
    api_client = client.ApiClient(client.Configuration(host=kube.url))
    yield KubernetesBackend(KubernetesConfig(api_client=api_client, request_timeout_s=5))
    api_client.close()
