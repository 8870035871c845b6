"""`make demo` shows what the README shows and keeps showing it (issue 16, item 15).

Runs the demo as `make demo` does (DEBUG=1, the embedded loop at 60 times real speed) on a SQLite
file of its own and a free loopback port, lets it run past the point where services used to
"complete" (a minute of demo time is an hour of work), and reads its database: the production
services still run, every partitioned GPU keeps its MIG slices, jobs wait with reasons from the
first cycle on, and the charts have a day of samples behind them.
"""

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.loopback import free_port
from ui.demo_workload import SERVICES, WAITING

ROOT = Path(__file__).resolve().parents[1]
RUN_FOR_S = 90  # past the old 60-s end of every service


def _query(path: Path, sql: str, *params):
    with sqlite3.connect(path, timeout=30) as db:
        return db.execute(sql, params).fetchall()


@pytest.fixture
def demo(tmp_path):
    database = tmp_path / "demo.sqlite3"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "SECRET_KEY", "REDIS_URL"}}
    env.update(DATABASE_URL=f"sqlite:///{database}", DEBUG="1", CELERY_TASK_ALWAYS_EAGER="1")
    processes = []
    log = tmp_path / "demo.log"  # a file, not a pipe nobody reads: a full pipe would stall the demo

    def start():
        with log.open("a") as out:
            processes.append(subprocess.Popen(
                [".venv/bin/python", "manage.py", "demo", "--addrport", f"127.0.0.1:{free_port()}"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True))
        return processes[-1]

    try:
        yield start, database
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)


def _waiting(database: Path) -> list[tuple]:
    return _query(database, "SELECT name, pending_reason_code, pending_reason FROM scheduling_job "
                            "WHERE status = 'pending' AND pending_reason_code NOT IN ('', 'new')")


def test_the_demo_keeps_its_services_slices_and_queue(demo):
    start, database = demo
    process, restarts = start(), 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (database.exists() and _has_cycled(database)):
        if process.poll() is not None:
            output = (database.parent / "demo.log").read_text()
            # The free port was taken while the demo loaded (a minute on a busy machine): once more.
            assert "port is already in use" in output and restarts < 3, output[-3000:]
            process, restarts = start(), restarts + 1
        time.sleep(2)
    waiting = _waiting(database)
    assert {name for name, _code, _reason in waiting} >= {name for _t, _p, _u, name, *_ in WAITING}
    assert all(reason for _name, _code, reason in waiting)
    time.sleep(RUN_FOR_S)  # from the first cycle on
    assert process.poll() is None, (database.parent / "demo.log").read_text()[-3000:]

    services = [name for _t, _p, _u, name, *_ in SERVICES] + ["ranker-serving"]
    running = {name for (name,) in _query(
        database, "SELECT name FROM scheduling_job WHERE status = 'running' AND kind = 'inference' AND "
                  "priority_class_id IN (SELECT id FROM scheduling_priorityclass WHERE name = 'production')")}
    assert set(services) <= running, f"services that stopped: {set(services) - running}"
    partitioned = _query(
        database, "SELECT g.\"index\", COUNT(m.id) FROM scheduling_gpu g JOIN scheduling_node n ON g.node_id = n.id "
                  "LEFT JOIN scheduling_miginstance m ON m.gpu_id = g.id "
                  "WHERE n.name = 'h100-04' AND g.\"index\" < 4 AND g.mig_enabled GROUP BY g.\"index\"")
    assert [index for index, count in partitioned if count >= 2] == [0, 1, 2, 3], partitioned
    assert len(_waiting(database)) >= 2, "the queue drained"
    # Whole GPUs' samples and MIG slices' own (a GPU in MIG mode has none of its own).
    hours = _query(database, "SELECT COUNT(DISTINCT hour) FROM (SELECT strftime('%Y-%m-%d %H', at) AS hour "
                             "FROM scheduling_gpusample UNION "
                             "SELECT strftime('%Y-%m-%d %H', at) FROM scheduling_migsample)")[0][0]
    assert hours >= 24


def _has_cycled(database: Path) -> bool:
    try:
        return bool(_waiting(database))
    except sqlite3.OperationalError:  # not migrated yet
        return False


@pytest.mark.django_db(transaction=True)
def test_adopting_the_demos_running_jobs_keeps_when_they_started(tmp_path):
    from agents import embedded, runtime
    from scheduling.models import Placement
    from ui.demo import demo_load
    from ui.demo_workload import demo_workload_load

    demo_load()
    demo_workload_load()
    before = dict(Placement.objects.filter(ended_at__isnull=True).values_list("pk", "started_at"))
    embedded.setup(runtime.simulated_backend(tmp_path / "cluster.json"))
    after = dict(Placement.objects.filter(pk__in=before).values_list("pk", "started_at"))
    assert after == before
