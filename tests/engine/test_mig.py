import pytest

from scheduling.engine.mig import canonical_model, free_value, geometry_for, layout_errors, mig_models, start_choices


def test_it_ships_the_six_mig_models():
    assert set(mig_models()) == {"A100-SXM4-40GB", "A100-80GB", "H100-80GB", "H100-NVL-94GB",
                                 "H200-141GB", "A30-24GB"}


@pytest.mark.parametrize("name, model", [
    ("A100-40GB", "A100-SXM4-40GB"), ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("A100-SXM4-80GB", "A100-80GB"), ("NVIDIA H100 80GB HBM3", "H100-80GB"),
    ("NVIDIA H100 NVL", "H100-NVL-94GB"), ("NVIDIA H200", "H200-141GB"), ("A30", "A30-24GB"),
    ("T4", "T4"),
])
def test_it_maps_model_aliases(name, model):
    assert canonical_model(name) == model


def test_it_knows_no_mig_on_other_gpus():
    assert geometry_for("T4") is None


@pytest.mark.parametrize("reported, meant", [
    ("3g.39gb", "3g.40gb"), ("7g.79gb", "7g.80gb"), ("1g.20gb", "1g.20gb"),
    ("1g.10gb", "1g.10gb")])
def test_it_resolves_renamed_profiles_by_shape(reported, meant):
    assert geometry_for("A100-80GB").resolve(reported).name == meant


def test_it_puts_a_1g_at_slot_6_to_keep_a_4g_possible():
    geometry = geometry_for("H100-80GB")
    one_g = geometry.by_shape((1, 1))
    assert start_choices(geometry, 0, one_g)[0] == 6
    assert free_value(geometry, one_g.mask_at(6))[0] == 4
    assert free_value(geometry, one_g.mask_at(0))[0] == 3


def test_it_offers_only_valid_free_starts():
    geometry = geometry_for("A100-80GB")
    two_g = geometry.by_shape((2, 2))
    three_g = geometry.by_shape((3, 4))
    assert set(start_choices(geometry, 0, two_g)) == {0, 2, 4}
    assert start_choices(geometry, three_g.mask_at(4), three_g) == (0,)
    assert start_choices(geometry, 0b1111_1111, two_g) == ()


@pytest.mark.parametrize("layout, valid", [
    ([("1g.10gb", s) for s in range(7)], True),
    ([("1g.10gb", s) for s in range(8)], False),          # 1g never at slot 7
    ([("3g.40gb", 0), ("3g.40gb", 4)], True),
    ([("4g.40gb", 0), ("3g.40gb", 4)], True),
    ([("4g.40gb", 0), ("4g.40gb", 4)], False),             # 4g only at 0, max 1
    ([("2g.20gb", 6)], False),                             # 2g never at 6
    ([("7g.80gb", 0), ("1g.10gb", 0)], False),             # overlap
    ([("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.10gb", 6)], True),
    ([("1g.20gb", 0), ("1g.20gb", 2), ("1g.20gb", 4), ("1g.20gb", 6)], True),
])
def test_it_checks_layouts(layout, valid):
    assert (layout_errors(geometry_for("A100-80GB"), layout) == []) is valid


def test_a30_counts_quarters():
    geometry = geometry_for("A30-24GB")
    assert geometry.gpu_fraction(geometry.by_shape((1, 1))) == 0.25
    assert geometry_for("H100-80GB").gpu_fraction(geometry_for("H100-80GB").by_shape((3, 4))) \
        == pytest.approx(3 / 7)


def test_h200_full_profile_memory_is_conservative():
    full = geometry_for("H200-141GB").by_shape((7, 8))
    assert 100 < full.memory_gb <= 141
