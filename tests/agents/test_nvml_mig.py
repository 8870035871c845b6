"""The NVML path on MIG GPUs: utilisation "not measured" (None), never 0; memory per instance."""

import copy

from agents.node_agent.collector import collect
from agents.telemetry import reading_from_report
from tests.agents.fake_nvml import FakeNvml, load_snapshot


def _snapshot():
    return load_snapshot("nvml_h100_nvswitch_8gpu.json")


def test_a_mig_gpu_and_its_instances_read_not_measured_even_if_the_driver_answers_zero():
    snapshot = copy.deepcopy(_snapshot())
    snapshot["devices"][7]["device"]["utilization"] = {"gpu": 0, "memory": 0}  # a driver that answers anyway
    report = collect(FakeNvml(snapshot), "gpu-h100-01")
    gpu = report.gpus[7]
    assert gpu.mig_mode and gpu.utilisation_pct is None and gpu.memory_utilisation_pct is None
    assert {m.utilisation_pct for m in gpu.mig_instances} == {None}
    assert report.gpus[0].utilisation_pct == 97  # a whole GPU still reads NVML's utilisation


def test_nvml_gives_each_instance_its_memory_and_placement():
    reading = reading_from_report("gpu-h100-01", collect(FakeNvml(_snapshot()), "gpu-h100-01").to_dict(), 1.0)
    on_seven = [s for s in reading.slices if s.gpu_index == 7]
    assert [(s.placement_start, s.profile) for s in on_seven] == [(slot, "1g.10gb") for slot in range(7)]
    assert on_seven[0].memory_used_gb == 9542041600 // 2**20 / 1024
    assert {s.utilisation for s in reading.slices} == {None}
    assert [g.utilisation for g in reading.gpus if g.index in (6, 7)] == [None, None]
