"""The fragmentation measure against hand-worked examples of the README's definitions (§2.2)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.fragment import frag as F
from scheduling.engine.fragment.shapes import Request

SHARE = F.TypicalShape(cpu=4000, gpu_milli=500, num_gpu=1, spec=None, p=0.5)
WHOLE = F.TypicalShape(cpu=8000, gpu_milli=1000, num_gpu=1, spec=None, p=0.3)
CPU_ONLY = F.TypicalShape(cpu=2000, gpu_milli=0, num_gpu=0, spec=None, p=0.2)
SHAPES = [SHARE, WHOLE, CPU_ONLY]


@pytest.mark.parametrize("cpu_left, gpus, shape, expected, why", [
    (16000, (1000, 300), SHARE, 300, "Q3: only the GPU below 500m is fragment"),
    (16000, (1000, 300), WHOLE, 300, "Q3: the partly used GPU cannot hold a whole-GPU task"),
    (16000, (1000, 300), CPU_ONLY, 1300, "a CPU-only shape uses no GPU: all idle"),
    (6000, (1000, 300), WHOLE, 1300, "Q4: GPUs fit but CPU does not"),
    (16000, (400, 300), SHARE, 700, "Q2: no GPU has 500m free"),
    (1000, (400, 300), SHARE, 700, "Q1: neither fits"),
    (16000, (0, 0), SHARE, 0, "a full node has nothing to fragment"),
])
def test_shape_frag(cpu_left, gpus, shape, expected, why):
    assert F.shape_frag("G2", cpu_left, gpus, shape) == expected, why


def test_model_not_allowed_counts_all_idle():
    t4_only = SHARE._replace(spec=frozenset({"T4"}))
    assert F.shape_frag("G2", 16000, (1000, 300), t4_only) == 1300
    assert F.shape_frag("T4", 16000, (1000, 300), t4_only) == 300


@pytest.mark.parametrize("cpu_left, gpus, expected", [
    (16000, (1000, 300), 0.5 * 300 + 0.3 * 300 + 0.2 * 1300),  # 500
    (6000, (1000, 300), 0.5 * 300 + 0.3 * 1300 + 0.2 * 1300),  # 800: CPU strands the GPUs
    (16000, (400, 300), 700.0),
    (16000, (0, 0), 0.0),
])
def test_node_frag_is_the_weighted_sum(cpu_left, gpus, expected):
    assert F.node_frag("G2", cpu_left, gpus, SHAPES) == pytest.approx(expected)


def test_frag_model_caches_by_state():
    fm = F.FragModel(SHAPES)
    assert fm.frag("G2", 16000, (1000, 300)) == pytest.approx(500)
    fm.shapes = []  # a cached state must not be recomputed
    assert fm.frag("G2", 16000, (1000, 300)) == pytest.approx(500)


def _tasks(shape_counts):
    return [Request(cpu, 1024, num, milli) for (cpu, num, milli), n in shape_counts for _ in range(n)]


def test_typical_shapes_cover_the_threshold_and_renormalise():
    tasks = _tasks([((1000, 1, 500), 6), ((2000, 1, 1000), 3), ((3000, 0, 0), 1)])
    shapes = F.typical_shapes(tasks, threshold=80)
    assert [(s.cpu, s.num_gpu, s.gpu_milli) for s in shapes] == [(1000, 1, 500), (2000, 1, 1000)]
    assert [s.p for s in shapes] == pytest.approx([6 / 9, 3 / 9])
    assert len(F.typical_shapes(tasks, threshold=95)) == 3


def test_typical_shapes_ignore_memory():
    tasks = [Request(1000, 1, 1, 500), Request(1000, 999, 1, 500)]
    assert len(F.typical_shapes(tasks)) == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=1, max_size=8), st.integers(0, 20000),
       st.lists(st.builds(F.TypicalShape, cpu=st.sampled_from([0, 2000, 4000, 8000]),
                          gpu_milli=st.sampled_from([0, 250, 500, 1000]), num_gpu=st.integers(0, 4),
                          spec=st.sampled_from([None, frozenset({"T4"}), frozenset({"G2", "T4"})]),
                          p=st.floats(0.01, 1.0)), max_size=6),
       st.sampled_from(["G2", "T4"]))
def test_node_frag_is_the_sum_of_shape_frag_it_inlines(gpus, cpu_left, shapes, model):
    gpus = tuple(sorted(gpus, reverse=True))  # as nodes give them
    assert F.node_frag(model, cpu_left, gpus, shapes) == sum(s.p * F.shape_frag(model, cpu_left, gpus, s)
                                                              for s in shapes)

