"""Pod logs (issue 16, item 6) from both backends: Kubernetes' read_namespaced_pod_log with a tail and
a byte limit, its refusals as words; the simulated cluster's made-up but consistent lines."""

import pytest

from agents.backends import BindRequest, Refused
from agents.backends.base import ENV_GPU_INDEXES, ENV_RUNTIME, CheckpointRequest, TransientBackendError
from agents.backends.simulated import SimConfig, SimNode, SimulatedBackend
from tests.agents.test_kubernetes_backend import _bind, cluster  # noqa: F401 (the fake cluster)


def test_a_running_pods_last_lines_come_back(backend, kube, cluster):  # noqa: F811
    backend.bind(_bind())
    kube.set_pod_phase("team-vision", "job-42-0", "Running")
    kube.set_pod_log("team-vision", "job-42-0", "".join(f"step {i} loss 1.{i:03d}\n" for i in range(500)))
    text = backend.pod_log("team-vision", "job-42-0", tail_lines=3, limit_bytes=1 << 16)
    assert text.splitlines() == ["step 497 loss 1.497", "step 498 loss 1.498", "step 499 loss 1.499"]
    assert len(backend.pod_log("team-vision", "job-42-0", tail_lines=500, limit_bytes=40)) == 40
    assert any(path.endswith("/job-42-0/log") for _method, path in kube.requests)


def test_a_pod_not_started_is_refused_in_the_clusters_words(backend, kube, cluster):  # noqa: F811
    backend.bind(_bind())
    with pytest.raises(Refused, match="waiting to start: ContainerCreating"):
        backend.pod_log("team-vision", "job-42-0", tail_lines=10, limit_bytes=1000)


def test_a_gone_pod_has_no_logs_and_system_namespaces_are_never_read(backend, kube, cluster):  # noqa: F811
    assert backend.pod_log("team-vision", "job-42-0", tail_lines=10, limit_bytes=1000) is None
    with pytest.raises(Refused, match="not one Tessera"):
        backend.pod_log("kube-system", "kube-apiserver", tail_lines=10, limit_bytes=1000)


def test_an_overloaded_api_server_is_a_transient_error(backend, kube, cluster):  # noqa: F811
    kube.fail_next(1)
    with pytest.raises(TransientBackendError):
        backend.pod_log("team-vision", "job-42-0", tail_lines=10, limit_bytes=1000)


def _sim_bind(kind: str, runtime_s: float = 3600) -> BindRequest:
    return BindRequest(job_id="7", pod_name=f"search-7-0-{kind}", namespace="search", project="ranking", job_kind=kind,
                       image="", command=(), node_name="h100-01", gpu_count=1,
                       env=((ENV_GPU_INDEXES, "0"), (ENV_RUNTIME, str(runtime_s))))


@pytest.mark.parametrize(("kind", "says"), [("training", "loss"), ("inference", "requests"),
                                            ("interactive", "kernel alive")])
def test_the_simulated_cluster_prints_lines_that_fit_the_job(tmp_path, kind, says):
    clock = [1_000_000.0]
    sim = SimulatedBackend(tmp_path / "cluster.json", clock=lambda: clock[0])
    sim.configure(SimConfig(speed=1.0))
    sim.ensure_node(SimNode(name="h100-01", gpu_model="H100-80GB", gpu_count=8, gpu_memory_mib=81920))
    sim.bind(_sim_bind(kind, runtime_s=1800))
    clock[0] += 600
    first = sim.pod_log("search", f"search-7-0-{kind}", tail_lines=200, limit_bytes=1 << 16)
    assert first.startswith("1970-01-12T13:46:40Z starting search-7-0-")
    assert len(first.splitlines()) == 11 and says in first.splitlines()[-1]
    assert first == sim.pod_log("search", f"search-7-0-{kind}", tail_lines=200, limit_bytes=1 << 16)
    assert len(sim.pod_log("search", f"search-7-0-{kind}", tail_lines=4, limit_bytes=1 << 16).splitlines()) == 4
    clock[0] += 3600  # past its runtime: it ended
    assert "exiting: Completed (exit code 0)" in sim.pod_log("search", f"search-7-0-{kind}", 5, 1 << 16)
    assert sim.pod_log("search", "no-such-pod", 5, 1000) is None


def test_a_simulated_checkpoint_names_the_step_its_log_printed(tmp_path):
    # The job page shows both: "checkpoint at step N" from the confirmation and "step N" in the log.
    clock, saved = [1_000_000.0], []
    sim = SimulatedBackend(tmp_path / "cluster.json", clock=lambda: clock[0],
                           confirm=lambda item: saved.append(item) or True)
    sim.configure(SimConfig(speed=1.0))
    sim.ensure_node(SimNode(name="h100-01", gpu_model="H100-80GB", gpu_count=8, gpu_memory_mib=81920))
    sim.bind(_sim_bind("training", runtime_s=3600))
    clock[0] += 600
    last_step = sim.pod_log("search", "search-7-0-training", 1, 1 << 16).split()[2]
    sim.request_checkpoint(CheckpointRequest(job_id="7", pod_name="search-7-0-training", namespace="search",
                                             checkpoint_id="interval-1"))
    clock[0] += sim.config().checkpoint_save_s
    sim.poll_observations()
    assert [item.step for item in saved] == [int(last_step)]
