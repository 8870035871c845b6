"""How numbers read in the sentences team leads see."""


def gpus(units: float) -> str:
    """GPU units: MIG slices make sevenths, which read better rounded (2.43, not 2.42857)."""
    return f"{round(units, 2):g}"


def gpu_count(units: float, model: str = "", free: bool = False) -> str:
    """'1 H100-80GB GPU', '2 free GPUs', '0.5 GPUs': singular for exactly one, as people write it."""
    words = [gpus(units), *(["free"] if free else []), *([model] if model else [])]
    return " ".join(words) + (" GPU" if gpus(units) == "1" else " GPUs")


def wait(seconds: float, clock_speed: float = 1.0) -> str:
    """'now', 'in ~7 min', 'in ~2h05m': a wait of the cluster's seconds, in the time the reader
    waits. The embedded demo's simulated cluster does `clock_speed` seconds of work a second
    (Snapshot.clock_speed), so its sentences agree with the estimated start written beside them."""
    minutes = max(0, round(seconds / clock_speed / 60))
    if minutes == 0:
        return "now"
    return f"in ~{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"in ~{minutes} min"
