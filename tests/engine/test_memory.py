import pytest

from scheduling.engine.memory import memory_need_gb, share_milli, smallest_profile
from scheduling.engine.mig import geometry_for


@pytest.mark.parametrize("model, need, profile", [
    ("A100-80GB", 5, "1g.10gb"), ("A100-80GB", 9.5, "1g.10gb"), ("A100-80GB", 9.6, "1g.20gb"),
    ("A100-80GB", 30, "3g.40gb"), ("A100-80GB", 40, "7g.80gb"), ("A100-80GB", 80, None),
    ("A100-SXM4-40GB", 5, "1g.10gb"), ("A100-SXM4-40GB", 4, "1g.5gb"),
    ("H200-141GB", 20, "1g.35gb"), ("A30-24GB", 6, "2g.12gb"), ("H100-NVL-94GB", 45, "3g.47gb"),
])
def test_it_picks_the_smallest_profile_that_holds_the_need(model, need, profile):
    chosen = smallest_profile(geometry_for(model), need)
    assert (chosen.name if chosen else None) == profile
    if chosen:
        assert chosen.memory_gb >= need


def test_inference_need_is_weights_plus_kv_plus_overhead():
    # 7B in bf16: 14e9 bytes = 13.04 GiB, + 4 GiB KV + 1 GiB + 10%.
    assert memory_need_gb(7, "bf16", "inference", kv_cache_gb=4) == pytest.approx(
        13.04 + 4 + 1 + 1.304, abs=0.02)


def test_adam_training_needs_16_bytes_per_parameter():
    need = memory_need_gb(1, workload="training_adam", activations_gb=2, overhead_gb=0)
    assert need == pytest.approx(16e9 / 2**30 + 2, abs=0.01)


def test_it_refuses_unknown_inputs():
    with pytest.raises(ValueError):
        memory_need_gb(1, "fp64")
    with pytest.raises(ValueError):
        memory_need_gb(1, workload="sft")


@pytest.mark.parametrize("need, gpu, compute, milli", [
    (8, 16, 0, 500), (4, 16, 0, 250), (5, 16, 0, 320), (4, 16, 600, 600), (17, 16, 0, None)])
def test_shares_are_never_smaller_than_the_need(need, gpu, compute, milli):
    assert share_milli(need, gpu, compute) == milli
