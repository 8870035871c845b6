#!/usr/bin/env python
import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["simulate"]:
        # The simulator needs no database, server or settings, so not a SECRET_KEY either.
        from scheduling.simulator.cli import main as simulate

        sys.exit(simulate(sys.argv[2:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tessera.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
