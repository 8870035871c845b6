"""How numbers read in the sentences team leads see."""


def gpus(units: float) -> str:
    """GPU units: MIG slices make sevenths, which read better rounded (2.43, not 2.42857)."""
    return f"{round(units, 2):g}"


def gpu_count(units: float, model: str = "", free: bool = False) -> str:
    """'1 H100-80GB GPU', '2 free GPUs', '0.5 GPUs': singular for exactly one, as people write it."""
    words = [gpus(units), *(["free"] if free else []), *([model] if model else [])]
    return " ".join(words) + (" GPU" if gpus(units) == "1" else " GPUs")
