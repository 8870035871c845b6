"""Benchmark: what reconcile's read of Tessera's pods costs at 2,000 pods, listed every time (before)
or read from the watched cache (after, agents/backends/k8s_pod_cache.py).

    python bench/pod_watch.py [--pods 2000] [--reconciles 20] [--real]

Without --real the pods live in the fake API server of the unit tests (tests/agents/fake_kube_api.py);
with --real, in the real control plane of tests/kube/ (built by tools/kube-control-plane/build.sh),
started for the run and removed after. The pods are Tessera's own manifests, not bound. For each
mode it times `KubernetesBackend.poll_observations()`, reconcile's one API call, and counts the full
pod lists made (the cache's own first list included).
"""

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes import client  # noqa: E402

from agents.backends import BindRequest  # noqa: E402
from agents.backends import k8s_manifests as m  # noqa: E402
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig  # noqa: E402

NAMESPACE = "team-bench"


def manifests(count: int):
    for n in range(count):
        req = BindRequest(job_id=str(n), pod_name=f"job-{n}-0", namespace=NAMESPACE, project="bench",
                          job_kind="training", image="nvcr.io/nvidia/pytorch:24.05-py3",
                          command=("python", "train.py"), node_name="unused", gpu_count=1, grace_seconds=60)
        yield m.pod_manifest(req, "tessera")


def counting(backend) -> list:
    """Every full list of pods the backend makes (a watch is a list call too, with watch=True)."""
    listing, calls = backend.core.list_pod_for_all_namespaces, []

    @functools.wraps(listing)  # the client's watch reads the item type from the docstring
    def counted(*args, **kwargs):
        if not kwargs.get("watch"):
            calls.append(1)
        return listing(*args, **kwargs)
    backend.core.list_pod_for_all_namespaces = counted
    return calls


def measure(api_client, reconciles: int, watched: bool) -> dict:
    backend = KubernetesBackend(KubernetesConfig(api_client=api_client, request_timeout_s=60, watch_pods=watched))
    calls = counting(backend)
    try:
        times = []
        for n in range(reconciles):
            started = time.perf_counter()
            count = len(backend.poll_observations())
            times.append(time.perf_counter() - started)
            if watched and n == 0:  # the cache's first list runs beside the first poll's
                deadline = time.monotonic() + 120
                while backend.pods.observations() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
        return {"pods": count, "lists": len(calls), "first_s": times[0],
                "median_after_first_s": statistics.median(times[1:]), "max_after_first_s": max(times[1:])}
    finally:
        backend.pods.stop()


def fake_cluster(count: int):
    from tests.agents.fake_kube_api import FakeKubeApi

    api = FakeKubeApi()
    url = api.start()
    api.add_namespace(NAMESPACE)
    for manifest in manifests(count):
        api.add_pod(NAMESPACE, manifest)
    return api, client.ApiClient(client.Configuration(host=url))


def real_cluster(count: int):
    """The real control plane, with a namespace and the pods in it."""
    from tests.kube.control_plane import ControlPlane

    plane = ControlPlane(Path(tempfile.mkdtemp(prefix="bench-pod-watch-")))
    plane.start()
    api_client = plane.admin_client()
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    deadline = time.monotonic() + 60  # v1.20 admits no pod before the default ServiceAccount's token
    while time.monotonic() < deadline:
        try:
            if core.read_namespaced_service_account("default", NAMESPACE).secrets:
                break
        except client.exceptions.ApiException:
            pass
        time.sleep(0.2)
    for manifest in manifests(count):
        core.create_namespaced_pod(NAMESPACE, manifest)

    return plane, api_client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--reconciles", type=int, default=20)
    parser.add_argument("--real", action="store_true", help="the real control plane, not the fake API server")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tessera.settings")
    server, api_client = (real_cluster if args.real else fake_cluster)(args.pods)
    try:
        for name, watched in (("before: a list per reconcile", False), ("after: the watched cache", True)):
            result = measure(api_client, args.reconciles, watched)
            print(f"{name:32} {result['pods']} pods, {args.reconciles} reconciles: {result['lists']} full lists, "
                  f"first {result['first_s'] * 1000:.0f} ms, "
                  f"then median {result['median_after_first_s'] * 1000:.1f} ms "
                  f"(max {result['max_after_first_s'] * 1000:.1f} ms)")
    finally:
        api_client.close()
        server.cleanup() if args.real else server.stop()


if __name__ == "__main__":
    main()
