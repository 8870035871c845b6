from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduling import engine
from scheduling.engine.snapshot_io import snapshot_dump
from scheduling.live_input import live_input
from scheduling.snapshot import build_snapshot


class Command(BaseCommand):
    help = ("Write the scheduler's current snapshot as JSON: a live situation to replay as a test fixture. "
            "With --simulator DIR, also the live cluster and its recent jobs as `simulate run` input.")

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, required=True)
        parser.add_argument("--simulator", type=Path, metavar="DIR",
                            help="also write DIR/cluster.json and DIR/jobs.csv (the simulator's formats)")
        parser.add_argument("--hours", type=float, default=24.0, help="history for --simulator (default 24)")

    def handle(self, *args, out, simulator, hours, **options):
        snapshot = build_snapshot()
        snapshot_dump(snapshot, out)
        plan = engine.schedule(snapshot, settings.TESSERA_POLICY)
        self.stdout.write(f"Wrote {out}: {len(snapshot.nodes)} nodes, {len(snapshot.pending)} pending, "
                          f"{len(snapshot.running)} running members; {plan.policy} would bind {len(plan.binds)} now.")
        if simulator is not None:
            if not 0 < hours <= 24 * 31:
                raise CommandError("--hours must be more than 0 and at most 744")
            inputs = live_input(hours)
            cluster, jobs = inputs.write(simulator)
            self.stdout.write(f"Wrote {cluster} and {jobs}: {len(inputs.rows)} jobs of the last {hours:g} h"
                              + "".join(f"\n  note: {note}" for note in inputs.notes))
