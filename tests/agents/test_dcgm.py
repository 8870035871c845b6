"""dcgm-exporter's Prometheus text read into the node report."""

from pathlib import Path

import pytest

from agents.dcgm import parse_dcgm_text

TEXT = (Path(__file__).parent / "fixtures" / "dcgm_h100_mig.prom").read_text()


def test_it_reads_node_and_whole_gpu():
    report = parse_dcgm_text(TEXT)
    assert (report.hostname, report.source, report.driver_version) == (
        "gpu-h100-02", "dcgm-exporter", "550.54.15"
    )
    gpu = report.gpus[0]
    assert (gpu.index, gpu.name, gpu.pci_bus_id) == (0, "NVIDIA H100 80GB HBM3", "00000000:18:00.0")
    assert gpu.uuid == "GPU-5d3a6e2c-7f43-4b0e-9a51-0c1f8e0b7a10"
    assert (gpu.utilisation_pct, gpu.memory_utilisation_pct) == (94, 58)
    assert (gpu.memory_used_mib, gpu.memory_total_mib) == (71234, 81559)
    assert (gpu.temperature_c, gpu.power_w) == (57, 612.4)
    assert gpu.mig_mode is False and gpu.mig_instances == []


def test_it_reads_mig_instances_and_leaves_unknowns_empty():
    report = parse_dcgm_text(TEXT)
    gpu = report.gpus[1]
    assert gpu.mig_mode is True
    assert gpu.utilisation_pct is None and gpu.memory_used_mib is None
    assert (gpu.temperature_c, gpu.power_w) == (41, 203.1)  # board-wide, from the instances
    found = [(m.gpu_instance_id, m.profile, m.memory_used_mib, m.memory_total_mib)
             for m in gpu.mig_instances]
    assert found == [(2, "3g.40gb", 28310, 40448), (9, "1g.10gb", 13, 9984)]
    assert all(m.placement_start is None for m in gpu.mig_instances)  # DCGM does not say
    assert report.links == []


def test_text_from_several_hosts_is_refused():
    other = "\n".join(
        line.replace("gpu-h100-02", "gpu-h100-03") if line.startswith("DCGM_FI_DEV_FB") else line
        for line in TEXT.splitlines()
    )
    with pytest.raises(ValueError, match="2 hosts"):
        parse_dcgm_text(other)


def test_text_without_gpus_is_refused():
    with pytest.raises(ValueError):
        parse_dcgm_text("# HELP up scrape\n# TYPE up gauge\nup 1\n")
