"""The rows the data migration seeds are there in every test, also after a transactional test's
flush emptied the tables (tests/conftest.py seeds them again): the second test here fails without
that when both run on one worker, in this order."""

import pytest

from scheduling.defaults import PRIORITIES, TIERS
from scheduling.models import CapacityTier, PriorityClass

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("turn", ["first", "after the first one's flush"])
def test_the_seeded_tiers_and_classes_are_there(turn):
    assert set(CapacityTier.objects.values_list("name", flat=True)) >= {name for name, *_ in TIERS}
    assert set(PriorityClass.objects.values_list("name", flat=True)) >= {name for name, *_ in PRIORITIES}
