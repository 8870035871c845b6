"""The packing LP: its solver, its item prices and the hole values priced from them."""

from scheduling.engine.fragment.packing import hole_values, item_prices, simplex_max
from scheduling.engine.fragment.shapes import Request


def test_item_prices_charge_what_the_optimum_leaves_out():
    # 2 GPUs, requests 810 x2 and 190 x2 (scaled to exactly fill them): packs perfectly, so the
    # 810s and 190s are worth their size (price 0). Three 470s and two 810s on 3 GPUs: one
    # 470 or 810 must share badly, so some price is above 0.
    assert all(v == 0.0 for v in item_prices([Request(1, 1, 1, 810), Request(1, 1, 1, 190)], 2).values())
    prices = item_prices([Request(1, 1, 1, 470)] * 3 + [Request(1, 1, 1, 810)] * 2, 3)
    assert all(v >= 0.0 for v in prices.values()) and max(prices.values()) > 0.0


def test_simplex_max_small_lp():
    # max 3x + 2y, x + y <= 4, x + 3y <= 6 -> x = 4, y = 0; duals (3, 0).
    opt, duals = simplex_max([3, 2], [[1, 1], [1, 3]], [4, 6])
    assert abs(opt - 12) < 1e-9 and abs(duals[0] - 3) < 1e-9 and abs(duals[1]) < 1e-9


def test_hole_values_are_the_best_fill_at_prices():
    holes = hole_values({810: 0.0, 190: 0.0, 470: 100.0})
    assert holes[0] == 0.0 and holes[189] == 0.0 and holes[190] == 190.0
    assert holes[470] == 380.0 and holes[1000] == 1000.0  # 190 + 190; 810 + 190
    assert all(a <= b for a, b in zip(holes, holes[1:], strict=False))

