"""Fault campaign: the real workers (Celery tasks and the cycle code over PostgreSQL and Redis, the
simulated cluster) under injected faults, with the invariants checked after each one.

    python bench/fault_campaign.py --faults 1000 [--seed 1] [--workers 2] [--kinds a,b] [--json PATH]

Needs PostgreSQL (DATABASE_URL; a throw-away test database is made beside it) and redis-server on
the PATH (a private one on --redis-port, so "Redis down" hurts nobody else). The suite runs a short
campaign (tests/workers/test_fault_campaign.py). The campaign itself is bench/faults/: its
__init__ says which file holds what.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.faults.driver import Campaign  # noqa: E402 (after the path: run as a script)
from bench.faults.injection import FAULTS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-port", type=int, default=18611)
    parser.add_argument("--kinds", default=",".join(FAULTS), help="a comma-separated subset of: " + ", ".join(FAULTS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kinds = tuple(args.kinds.split(","))
    unknown = sorted(set(kinds) - set(FAULTS))
    if unknown:
        parser.error(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the workers and Redis on the way out
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tessera.settings")
    os.environ.setdefault("SECRET_KEY", "fault-campaign-secret-key-not-for-production-0123456789")
    import django

    django.setup()
    from django.db import connection

    database = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        with tempfile.TemporaryDirectory(prefix="fault-campaign-") as workdir, \
                Campaign(seed=args.seed, workdir=Path(workdir), redis_port=args.redis_port,
                         workers=args.workers) as campaign:
            report = campaign.run(args.faults, progress=True, kinds=kinds)
    finally:
        connection.creation.destroy_test_db(database, verbosity=0)
    print(report.table())
    if args.json:
        args.json.write_text(json.dumps(report.as_dict(), indent=1))
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
