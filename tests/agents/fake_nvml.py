"""Replays a recorded NVML snapshot (tests/agents/fixtures/nvml_*.json) as the adapter would."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def load_snapshot(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


class FakeNvml:
    def __init__(self, snapshot: dict) -> None:
        self.snapshot = snapshot

    def system(self) -> dict:
        return self.snapshot["system"]

    def device_count(self) -> int:
        return len(self.snapshot["devices"])

    def device(self, index: int) -> dict:
        return self.snapshot["devices"][index]["device"]

    def mig_devices(self, index: int) -> list[dict]:
        return self.snapshot["devices"][index]["mig_devices"]

    def processes(self, index: int) -> list[dict]:
        return self.snapshot["devices"][index]["processes"]

    def nvlinks(self, index: int) -> list[dict]:
        return self.snapshot["devices"][index]["nvlinks"]

    def common_ancestor(self, a: int, b: int) -> int | None:
        return self.snapshot["common_ancestor"][a][b]
