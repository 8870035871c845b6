"""Suite-wide set-up: the real services must be up, or the run stops loudly."""

import os
import uuid

import pytest

from tests.browser import open_page, page  # noqa: F401 (the Chromium fixtures, for every browser test)

SERVICE_HELP = (
    "The test suite needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379.\n"
    "Start them with:\n"
    "  pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n"
    "  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save '' --appendonly no\n"
    "Then run `make test` again."
)


def own_redis_key_space() -> str:
    """Give this test process Redis keys of its own: cache entries, Celery queues and results.

    Two suites running at once on one Redis database (two engineers, CI beside a developer, xdist
    workers of one run) must not read each other's cache entries, consume each other's tasks or
    clear each other's keys. The prefix is unique per run and per xdist worker; processes the tests
    start (Celery workers, servers) inherit it through REDIS_KEY_PREFIX. pytest-django has loaded
    the settings before this file is imported, so the settings derived from it are set here too.
    """
    from django.conf import settings

    if not settings.configured:  # `-p no:django`: the plain-Python parts, no Redis
        return ""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
    prefix = f"test-{run[:12]}-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    os.environ["REDIS_KEY_PREFIX"] = settings.REDIS_KEY_PREFIX = prefix
    if "KEY_PREFIX" in settings.CACHES["default"]:
        settings.CACHES["default"]["KEY_PREFIX"] = prefix
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": f"{prefix}:"}
    settings.CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"global_keyprefix": f"{prefix}:"}
    return prefix


REDIS_KEY_PREFIX = own_redis_key_space()


def _check_services() -> list[str]:
    from django.conf import settings

    problems = []
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.postgresql":
        problems.append(f"DATABASE_URL points at {database['ENGINE']}; the tests need PostgreSQL.")
    else:
        import psycopg

        try:
            psycopg.connect(host=database["HOST"], port=database["PORT"] or 5432,
                            user=database["USER"], dbname="postgres", connect_timeout=3).close()
        except psycopg.OperationalError as error:
            problems.append(f"PostgreSQL is not reachable: {error}".strip())
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3).ping()
    except redis.RedisError as error:
        problems.append(f"Redis is not reachable at {settings.REDIS_URL}: {error}")
    return problems


def pytest_sessionstart(session):
    if os.environ.get("TESSERA_SKIP_SERVICE_CHECK") == "1":
        return
    problems = _check_services()
    if problems:
        pytest.exit("\n".join(problems) + "\n\n" + SERVICE_HELP, returncode=3)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs two xdist workers with `--dist loadgroup`, tests/kube being one group: all
    its tests go to one worker, so a run starts one etcd and kube-apiserver, as without xdist, and
    the kubelet harness never races a second control plane for CPU or TESSERA_KUBE_PORTS. (Grouped
    here by path: xdist 3.8's xdist_group mark renames item._nodeid, which pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class KubeOnOneWorker(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "tests/kube" if nodeid.startswith("tests/kube/") else super()._split_scope(nodeid)

    return KubeOnOneWorker(config, log)


def _flushes(item) -> bool:
    """Whether the test ran in a transactional database, which pytest-django empties afterwards."""
    marker = item.get_closest_marker("django_db")
    return bool(marker and marker.kwargs.get("transaction")) or \
        bool({"transactional_db", "live_server"} & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a transactional test's flush, seed again what the data migration seeded (the capacity
    tiers and priority classes, scheduling/defaults.py). The flush empties every table, and a test
    that later runs on the same xdist worker and reads a seeded tier found none: pytest-django runs
    transactional tests last, but an xdist worker takes them as they are shared out, so which tests
    ran after a flush depended on the run (CI on 143e8a9: 59 errors in tests/ui,
    "CapacityTier matching query does not exist")."""
    yield
    if nextitem is None or not _flushes(item):  # after the last test the test database is gone
        return
    from pytest_django.plugin import blocking_manager_key

    from scheduling.defaults import defaults_ensure
    from scheduling.models import CapacityTier, PriorityClass

    with item.config.stash[blocking_manager_key].unblock():
        defaults_ensure(CapacityTier, PriorityClass)
