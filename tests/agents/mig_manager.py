"""mig-manager as the tests play it, after NVIDIA/mig-parted's nvidia-mig-manager (issue 13 point 5).

What matters to Tessera, as that source behaves: it keeps the latest value of its node's
`nvidia.com/mig.config` label, is woken only when that value *changes* to a non-empty one (a removed
label wakes nothing), and on waking asserts that the named config is in its config file, which is the
ConfigMap as *mounted in its pod*: the kubelet refreshes that copy only eventually, so the test
decides when `mounted` catches up. It reports on `nvidia.com/mig.config.state`.
"""

from __future__ import annotations

from collections.abc import Callable


class MigManager:
    def __init__(self, report: Callable[[str], None]) -> None:
        self.report = report  # sets the node's state label
        self.current = self.last_read = ""
        self.woken = False
        self.mounted: set[str] = set()  # the config names in its (possibly stale) mounted copy
        self.runs: list[tuple[str, str]] = []  # (config name, state reported)

    def label_seen(self, value: str | None) -> None:
        """The node watch delivered the label's value (its informer acts on changes only)."""
        value = value or ""
        if value == self.current:
            return
        self.current = value
        if value:  # an empty value is kept but wakes nothing
            self.woken = True

    def step(self) -> tuple[str, str] | None:
        """One turn of its loop: (name, state) when it tried a config, None while it waits."""
        if not self.woken and self.last_read == self.current:
            return None
        self.woken = False
        self.last_read = name = self.current
        state = "success" if name and name in self.mounted else "failed"
        self.report(state)
        self.runs.append((name, state))
        return name, state
