"""`manage.py simulate ...`: a thin wrapper; the simulator owns its argparse subcommands."""

import sys

from django.core.management.base import BaseCommand

from scheduling.simulator.cli import main


class Command(BaseCommand):
    help = "Scheduling experiments: fill (FGD traces), run and generate (mixed cluster). No database."
    requires_system_checks: list = []
    requires_migrations_checks = False

    def run_from_argv(self, argv):
        # argv is [manage.py, "simulate", ...]; hand the rest over untouched.
        sys.exit(main(argv[2:]))

    def handle(self, *args, **options):  # call_command() path: no arguments to pass through
        sys.exit(main(list(args)))
