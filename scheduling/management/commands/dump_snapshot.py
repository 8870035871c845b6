from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from scheduling import engine
from scheduling.engine.snapshot_io import snapshot_dump
from scheduling.snapshot import build_snapshot


class Command(BaseCommand):
    help = "Write the scheduler's current snapshot as JSON: a live situation to replay as a test fixture."

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, required=True)

    def handle(self, *args, out, **options):
        snapshot = build_snapshot()
        snapshot_dump(snapshot, out)
        plan = engine.schedule(snapshot, settings.TESSERA_POLICY)
        self.stdout.write(f"Wrote {out}: {len(snapshot.nodes)} nodes, {len(snapshot.pending)} pending, "
                          f"{len(snapshot.running)} running members; {plan.policy} would bind {len(plan.binds)} now.")
