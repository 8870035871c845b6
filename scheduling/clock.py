"""One clock for every recorded time: the database's.

Workers and web processes run on many machines whose clocks drift. Times that other processes
compare or bill (heartbeats, placement starts and ends, releases) come from PostgreSQL, so a worker
whose clock is a minute fast neither finds every node lost nor bills a minute that never ran.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.utils import timezone


def database_now() -> datetime:
    if connection.vendor != "postgresql":  # the embedded demo: one process, one clock
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]
