"""Which backend and telemetry source the workers use (settings.TESSERA_BACKEND), and failpoints."""

from __future__ import annotations

import functools
import os
import signal
import time
from pathlib import Path

from django.conf import settings

from agents.backends.base import Backend
from agents.telemetry import AgentHttpTelemetry, Telemetry, token_file


@functools.cache
def backend() -> Backend:
    if settings.TESSERA_BACKEND == "kubernetes":
        from kubernetes import config

        from agents.backends.kubernetes import KubernetesBackend

        if settings.TESSERA_KUBECONFIG:  # workers outside the cluster (and the real-cluster tests)
            config.load_kube_config(config_file=settings.TESSERA_KUBECONFIG)
        else:
            config.load_incluster_config()
        return KubernetesBackend(kubernetes_config())
    return simulated_backend()


def kubernetes_config():
    """The kubernetes backend's configuration from the settings (deploy/configmap.yaml sets them)."""
    from agents.backends.kubernetes import KubernetesConfig

    return KubernetesConfig(
        scheduler_name=settings.TESSERA_SCHEDULER_NAME, gpu_node_selector=settings.TESSERA_GPU_NODE_SELECTOR,
        leaf_switch_label=settings.TESSERA_LEAF_SWITCH_LABEL, tier_label=settings.TESSERA_TIER_LABEL,
        mig_parted_namespace=settings.TESSERA_GPU_OPERATOR_NAMESPACE,
        mig_parted_configmap=settings.TESSERA_MIG_CONFIGMAP,
        namespaces=frozenset(settings.TESSERA_NAMESPACES) or None, watch_pods=True)


def simulated_backend(path: str | Path | None = None):
    """The simulated cluster, its workloads confirming checkpoints through the endpoint's service."""
    from agents.actions.checkpoint import confirm_simulated
    from agents.backends.simulated import SimulatedBackend

    return SimulatedBackend(path or settings.TESSERA_SIMULATED_STATE, confirm=confirm_simulated)


def telemetry() -> Telemetry:
    """The simulated cluster reports its own GPUs; a real one has node agents or dcgm-exporter."""
    if settings.TESSERA_BACKEND == "simulated":
        return backend()
    if settings.TESSERA_TELEMETRY_SOURCE == "dcgm-exporter":
        from kubernetes import client

        from agents.backends.k8s_exporters import exporter_finder
        from agents.dcgm import DcgmHttpTelemetry

        backend()  # loads the cluster's credentials, which the exporters' pods are listed with
        return DcgmHttpTelemetry(discover=exporter_finder(
            client.CoreV1Api(), namespace=settings.TESSERA_GPU_OPERATOR_NAMESPACE,
            selector=settings.TESSERA_DCGM_EXPORTER_SELECTOR))
    return AgentHttpTelemetry(token_file(settings.TESSERA_AGENT_TOKEN_FILE))


def failpoint(name: str) -> None:
    """A fault the worker tests inject between two steps: `TESSERA_FAILPOINTS=name` kills this
    process there (SIGKILL, like the OOM killer), `name=2.5` pauses it there. Unset in production."""
    for point in os.environ.get("TESSERA_FAILPOINTS", "").split(","):
        point_name, _sep, pause = point.partition("=")
        if point_name.strip() != name:
            continue
        if pause:
            time.sleep(float(pause))
        else:
            os.kill(os.getpid(), signal.SIGKILL)
