"""What a campaign found: faults by kind, violations, how the jobs ended."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bench.faults.injection import FAULTS
from bench.faults.invariants import BILLING_SLACK_S


@dataclass
class Report:
    seed: int
    faults: Counter = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    violated_after: Counter = field(default_factory=Counter)  # fault kind -> violations found after it
    unsettled: int = 0
    task_errors: Counter = field(default_factory=Counter)
    jobs: Counter = field(default_factory=Counter)
    billed_without_pod_s: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"seed": self.seed, "faults": dict(self.faults), "faults_total": sum(self.faults.values()),
                "violations": len(self.violations), "violations_after": dict(self.violated_after),
                "violation_details": self.violations[:50],
                "unsettled": self.unsettled, "task_errors": dict(self.task_errors), "jobs": dict(self.jobs),
                "billed_without_pod_s": round(self.billed_without_pod_s, 3), "seconds": round(self.seconds, 1)}

    def table(self) -> str:
        lines = [f"fault campaign, seed {self.seed}: {sum(self.faults.values())} faults in {self.seconds:.0f} s",
                 f"{'fault':<22}{'injected':>9}{'violations after':>18}"]
        lines += [f"{kind:<22}{self.faults[kind]:>9}{self.violated_after[kind]:>18}" for kind in FAULTS]
        lines += [f"{'invariant violations':<22}{len(self.violations):>9}",
                  f"{'rounds not settled':<22}{self.unsettled:>9}",
                  f"billed seconds without a running pod (beyond {BILLING_SLACK_S:g} s bind slack): "
                  f"{self.billed_without_pod_s:.1f}",
                  "jobs by final state: " + ", ".join(f"{k} {v}" for k, v in sorted(self.jobs.items())),
                  "task outcomes other than success: " + (", ".join(f"{k} {v}" for k, v in
                                                                    sorted(self.task_errors.items())) or "none")]
        lines += [f"  violation: {v}" for v in self.violations[:20]]
        return "\n".join(lines)
