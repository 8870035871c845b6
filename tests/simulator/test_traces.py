"""CSV loading: every bad input stops the run with the file, line and field named."""

import pytest

from scheduling.simulator.fill.traces import TraceError, load_nodes, load_tasks

POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_loads_tasks_capping_shares_and_parsing_specs(tmp_path):
    path = write(tmp_path, "pods.csv", POD_HEADER + "p0,4000,1024,1,1500,\n"
                 "p1,2000,512,0,300,\np2,8000,2048,2,1000,V100M16|V100M32\n")
    tasks = [t.task for t in load_tasks(path)]
    assert tasks[0].gpu_milli == 1000 and tasks[0].spec is None  # capped at one GPU
    assert tasks[1].gpu_milli == 0  # CPU-only rows carry no share
    assert tasks[2].spec == {"V100M16", "V100M32"}


def test_gpu_spec_column_is_optional(tmp_path):
    path = write(tmp_path, "pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                 "p0,4000,1024,1,500\n")
    assert load_tasks(path)[0].task.spec is None


def test_creation_time_is_read_when_the_list_has_it(tmp_path):
    with_times = write(tmp_path, "a.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,"
                       "creation_time\np0,4000,1024,1,500,427061\n")
    without = write(tmp_path, "b.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                    "p0,4000,1024,1,500\n")
    assert load_tasks(with_times)[0].created == 427061
    assert load_tasks(without)[0].created is None


def test_nodes_skip_cpu_only_rows(tmp_path):
    path = write(tmp_path, "nodes.csv", NODE_HEADER + "n0,96000,393216,8,G2\nn1,32000,65536,0,\n")
    assert [n.name for n in load_nodes(path)] == ["n0"]


@pytest.mark.parametrize("body, message", [
    ("p0,4000,1024,1,abc,\n", r"pods.csv:2: field 'gpu_milli': 'abc' is not an integer"),
    ("p0,4000,1024,1,500,\np1,-5,1024,1,500,\n", r"pods.csv:3: field 'cpu_milli': -5 is below 0"),
    ("p0,4000,1024\n", r"pods.csv:2: wrong number of fields"),
    ("p0,4000,1024,1,0,\n", r"pods.csv:2: field 'gpu_milli': 0 on a task asking for GPUs"),
])
def test_bad_pod_rows_name_file_line_and_field(tmp_path, body, message):
    path = write(tmp_path, "pods.csv", POD_HEADER + body)
    with pytest.raises(TraceError, match=message):
        load_tasks(path)


def test_missing_column_is_named(tmp_path):
    path = write(tmp_path, "pods.csv", "name,cpu_milli,memory_mib,num_gpu\np0,1,1,0\n")
    with pytest.raises(TraceError, match=r"pods.csv:1: missing column\(s\) gpu_milli"):
        load_tasks(path)


def test_node_without_model_is_refused(tmp_path):
    path = write(tmp_path, "nodes.csv", NODE_HEADER + "n0,96000,393216,8,\n")
    with pytest.raises(TraceError, match=r"nodes.csv:2: field 'model'"):
        load_nodes(path)


def test_missing_trace_says_where_to_get_it(tmp_path):
    with pytest.raises(TraceError, match=r"cluster-trace-gpu-v2023"):
        load_tasks(tmp_path / "openb_pod_list_default.csv")
