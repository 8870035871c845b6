from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduling import engine
from scheduling.cycle import decide_and_apply


class Command(BaseCommand):
    help = "Run scheduling cycles over the database and print what each decided."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Run a single cycle (the default).")
        parser.add_argument("--policy", default=settings.TESSERA_POLICY,
                            help=f"One of: {', '.join(engine.POLICIES.names())} (default: TESSERA_POLICY)")

    def handle(self, *args, policy, **options):
        if policy not in engine.POLICIES:
            raise CommandError(f"unknown policy {policy!r}; known: {', '.join(engine.POLICIES.names())}")
        report = decide_and_apply(policy=policy)
        for bind in report.plan.binds:
            where = ", ".join(_describe(a) for a in bind.allocations)
            self.stdout.write(f"bind    job {bind.job_id} member {bind.member} -> {bind.node} [{where}]"
                              + (" (borrowed)" if bind.borrowed else ""))
        for preemption in report.plan.preemptions:
            self.stdout.write(f"preempt job {preemption.job_id} for job {preemption.for_job_id} "
                              f"({preemption.reason})")
        for repartition in report.plan.repartitions:
            self.stdout.write(f"repartition {repartition.node}/gpu{repartition.gpu_index} -> "
                              f"{list(repartition.layout) or 'whole GPU'}")
        for job_id, info in report.plan.pending.items():
            self.stdout.write(f"waiting job {job_id} #{info.overall_position} [{info.reason}] {info.message}")
        self.stdout.write(self.style.SUCCESS(report.summary()))


def _describe(allocation) -> str:
    if allocation.mig_profile:
        return f"gpu{allocation.gpu_index} {allocation.mig_profile}@{allocation.mig_start}"
    if allocation.milli < 1000:
        return f"gpu{allocation.gpu_index} {allocation.milli}m"
    return f"gpu{allocation.gpu_index}"
