"""How numbers read in the sentences team leads see."""


def gpus(units: float) -> str:
    """GPU units: MIG slices make sevenths, which read better rounded (2.43, not 2.42857)."""
    return f"{round(units, 2):g}"
