"""The collector over recorded NVML answers: an 8×H100 NVSwitch node and a 4×A100 PCIe node."""

import json

import pytest

from agents.node_agent.collector import collect
from agents.node_agent.nvml import record
from tests.agents.fake_nvml import FakeNvml, load_snapshot


@pytest.fixture
def h100():
    snapshot = load_snapshot("nvml_h100_nvswitch_8gpu.json")
    return collect(FakeNvml(snapshot), snapshot["hostname"])


@pytest.fixture
def a100():
    snapshot = load_snapshot("nvml_a100_pcie_4gpu.json")
    return collect(FakeNvml(snapshot), snapshot["hostname"])


def test_it_reports_node_identity(h100):
    assert (h100.hostname, h100.source) == ("gpu-h100-01", "nvml")
    assert (h100.driver_version, h100.nvml_version) == ("550.54.15", "12.550.54.15")
    assert h100.cuda_driver_version == 12040


def test_it_reports_every_gpu_in_units_we_use(h100):
    assert [g.index for g in h100.gpus] == list(range(8))
    gpu = h100.gpus[0]
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.uuid.startswith("GPU-")
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (81559, 71234)
    assert (gpu.utilisation_pct, gpu.temperature_c) == (97, 58)
    assert (gpu.power_w, gpu.power_limit_w) == (652.3, 700.0)
    assert gpu.mig_mode is False and gpu.mig_instances == []
    assert [(p.pid, p.name, p.used_memory_mib) for p in gpu.processes] == [(41000, "python", 70800)]


def test_it_reports_mig_instances_with_profile_and_placement(h100):
    gpu = h100.gpus[6]
    assert gpu.mig_mode is True and gpu.utilisation_pct is None  # NVML has none in MIG mode
    layout = sorted((m.placement_start, m.placement_size, m.profile) for m in gpu.mig_instances)
    assert layout == [(0, 2, "2g.20gb"), (2, 1, "1g.10gb"), (3, 1, "1g.10gb"), (4, 4, "3g.40gb")]
    big = next(m for m in gpu.mig_instances if m.profile == "3g.40gb")
    assert (big.gpu_instance_id, big.memory_total_mib, big.memory_used_mib) == (2, 40448, 28310)
    assert [(p.pid, p.gpu_instance_id, p.used_memory_mib) for p in gpu.processes] == [
        (52001, 2, None), (52002, 9, None)
    ]
    assert [m.profile for m in h100.gpus[7].mig_instances] == ["1g.10gb"] * 7


def test_nvswitch_gpus_are_nv18_and_mig_gpus_have_no_nvlink(h100):
    links = {(link.gpu_a, link.gpu_b): link for link in h100.links}
    assert len(links) == 28  # every pair of eight, once
    assert (links[0, 5].nvlinks, links[0, 5].code, links[0, 5].topology) == (18, "NV18", "SYSTEM")
    assert (links[0, 1].nvlinks, links[0, 1].code) == (18, "NV18")
    # NVLink is off while MIG mode is on: those pairs fall back to the PCIe path.
    assert (links[4, 6].nvlinks, links[4, 6].code, links[4, 6].topology) == (0, "NODE", "NODE")
    assert (links[0, 7].nvlinks, links[0, 7].code) == (0, "SYS")


def test_pcie_node_shows_its_nvlink_bridge_and_pcie_levels(a100):
    links = {(link.gpu_a, link.gpu_b): link for link in a100.links}
    assert (links[0, 1].nvlinks, links[0, 1].code, links[0, 1].topology) == (12, "NV12", "SINGLE")
    assert (links[2, 3].nvlinks, links[2, 3].code, links[2, 3].topology) == (0, "PHB", "HOSTBRIDGE")
    assert (links[1, 2].code, links[0, 3].code) == ("SYS", "SYS")
    assert [g.mig_mode for g in a100.gpus] == [False] * 4
    assert a100.gpus[3].processes == []


def test_report_is_plain_json(a100):
    data = json.loads(json.dumps(a100.to_dict()))
    assert data["gpus"][0]["memory_total_mib"] == 40960
    assert data["links"][0] == {"gpu_a": 0, "gpu_b": 1, "topology": "SINGLE", "nvlinks": 12,
                                "code": "NV12"}


@pytest.mark.parametrize("name", ["nvml_h100_nvswitch_8gpu.json", "nvml_a100_pcie_4gpu.json"])
def test_record_writes_what_the_fake_replays(name):
    snapshot = load_snapshot(name)
    recorded = record(FakeNvml(snapshot), snapshot["hostname"])
    assert recorded == {k: v for k, v in snapshot.items() if not k.startswith("_")}
