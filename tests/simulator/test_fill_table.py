"""bench/fill_table.py on a tiny trace folder: one row per trace, every prior, the bound."""

from bench.fill_table import POLICIES, run_cell, tables


def test_one_cell_has_every_policy_prior_and_the_bound(tmp_path):
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},640000,262144,8,A\n" for i in range(4)))
    (tmp_path / "openb_pod_list_tiny.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\n"
        + "".join(f"p{i:02d},1000,1024,1,{(100, 200, 300)[i % 3]},{i}\n" for i in range(30)))
    row = run_cell((str(tmp_path), "tiny", 1, True, tuple(POLICIES), True))
    assert {f"{p}/online" for p in POLICIES} | {"fgd/oracle", "tessera/past-half", "bound"} <= set(row)
    assert all(0 <= row[p] <= 100 for p in row if "/" in p)
    assert row["bound"] <= min(row[f"{p}/online"] for p in POLICIES) + 1e-9  # a lower bound
    text = tables([row], ["tiny"])
    assert "| tiny |" in text and "margin past-half" in text
