"""Every command the README shows works as written after `make demo` (issue 16, item 16).

The commands are read out of README.md: its shell blocks (continuation lines joined, comments
dropped) and inline code that starts like a command. Each is either run here, after the demo's
set-up step (`manage.py demo --no-serve`, which is `make demo` without the web server) on a
SQLite database of its own, or named in SKIPPED with the reason it is not; a command in neither
fails the test, so a new command in the README gets one or the other.
"""

import os
import re
import shutil
import subprocess

import pytest

from tests.hygiene.repo import ROOT

README = (ROOT / "README.md").read_text()
COMMAND_START = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:\.venv/bin/python|python|make|curl|celery|\.ci/run|docker)\b")

# command as the README writes it -> what its output must show
RUN = {
    "DEBUG=1 .venv/bin/python manage.py api_token bob --name ci --days 30": r"^tsr_\S{20,}$",
    "DEBUG=1 .venv/bin/python manage.py schedule --once --policy tessera": r"^tessera: \d+ job\(s\) placed",
    "DEBUG=1 .venv/bin/python manage.py dump_snapshot --out case.json": r"Wrote .*case\.json: 10 nodes",
    "DEBUG=1 .venv/bin/python manage.py dump_snapshot --out case.json --simulator live-sim":
        r"Wrote live-sim/cluster\.json and live-sim/jobs\.csv: \d+ jobs of the last 24 h",
    "DEBUG=1 .venv/bin/python manage.py close_month 2026-11 --by fiona": r"Closed 2026-11: \d+ lines",
    "DEBUG=1 .venv/bin/python manage.py simulate generate --scenario mixed --gpus 256 --hours 48 --seed 7 "
    "--out examples/sim/mixed-256": r"wrote examples/sim/mixed-256/cluster.json",
}
# Leftovers of the commands above, removed after the run.
WRITTEN = ["case.json", "live-sim"]
# Committed files a command rewrites: they must come out the same (the generator is seeded), and are
# put back as they were whatever happens.
REWRITTEN = ["examples/sim/mixed-256/cluster.json", "examples/sim/mixed-256/jobs.csv"]

SERVER = "serves or runs until stopped"
LONG = "a benchmark or experiment of minutes to hours; its figures are in the README's tables"
SKIPPED = [
    (r"^make demo$", SERVER + "; its set-up step runs here (manage.py demo --no-serve)"),
    (r"^make test$|^\.ci/run$|^TESSERA_SKIP_SERVICE_CHECK=1 .*pytest", "the test suite itself"),
    (r"^make lint$", "run by make test (tests/test_quality.py)"),
    (r"^make (lock|venv)\b|^echo .*requirements/|^git add", "changes the repository or needs the package index"),
    (r"^celery -A tessera.celery (worker|beat)$", SERVER + " (needs Redis); tests/workers run the same tasks"),
    (r"^python -m agents.node_agent ", "runs on a GPU node (NVML); tests/agents test it against a fake NVML"),
    (r"^curl ", "needs a job pod's token or a named token and host (placeholders); tests/checkpoints and "
                "tests/ui test the same endpoints"),
    (r"^(DEBUG=1 )?\.venv/bin/python bench/", LONG),
    (r"^\.venv/bin/python tools/demo_screenshots\.py$", "needs make demo serving on port 8000; "
                                                       "tests/test_demo_keeps_showing.py checks what it shows"),
    (r"^DEBUG=1 \.venv/bin/python manage.py simulate (fill|run|sweep) ", LONG),
    (r"^python manage.py migrate$", "a deployment's migration Job runs it in the image; make demo migrates itself"),
    (r"^docker build ", "needs Docker; tests/hygiene/test_image.py checks the Dockerfile and what it copies"),
    (r"…|<name>", "a pattern with placeholders, not a command"),
    (r"^(\.venv/bin/)?python$", "the interpreter named, not a command"),
]


def readme_commands() -> list[str]:
    commands = []
    for block in re.findall(r"^```(?:sh|bash)\n(.*?)^```", README, re.MULTILINE | re.DOTALL):
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if COMMAND_START.match(command):
                commands.append(command)
    prose = re.sub(r"^```.*?^```", "", README, flags=re.MULTILINE | re.DOTALL)
    commands += [span.strip() for span in re.findall(r"`([^`\n]+)`", prose) if COMMAND_START.match(span.strip())]
    return list(dict.fromkeys(commands))


def _skip_reason(command: str) -> str | None:
    return next((reason for pattern, reason in SKIPPED if re.search(pattern, command)), None)


def test_every_readme_command_is_run_or_skipped_for_a_stated_reason():
    commands = readme_commands()
    assert len(commands) > 15, "the README's commands were not found"
    unclassified = [c for c in commands if c not in RUN and _skip_reason(c) is None]
    assert unclassified == [], "add each to RUN (with what it prints) or SKIPPED (with why)"
    assert set(RUN) <= set(commands), "a command in RUN is no longer in the README"


@pytest.fixture
def demo_env(tmp_path):
    """The environment a shell has after `make demo`: no test settings, the demo's own database."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "SECRET_KEY", "DEBUG", "REDIS_URL", "DJANGO_SETTINGS_MODULE",
                        "CELERY_TASK_ALWAYS_EAGER", "TESSERA_SIMULATED_STATE"}}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'demo.sqlite3'}"  # stands in for var/demo.sqlite3
    setup = subprocess.run([".venv/bin/python", "manage.py", "demo", "--no-serve"], cwd=ROOT, capture_output=True,
                           text=True, timeout=300, env=dict(env, DEBUG="1", CELERY_TASK_ALWAYS_EAGER="1"))
    assert setup.returncode == 0, setup.stderr[-2000:]
    yield env
    for name in WRITTEN:
        if (ROOT / name).is_dir():
            shutil.rmtree(ROOT / name)
        else:
            (ROOT / name).unlink(missing_ok=True)


def test_the_quick_commands_work_as_written_after_make_demo(demo_env):
    committed = {name: (ROOT / name).read_bytes() for name in REWRITTEN}
    try:
        for command, expected in RUN.items():
            result = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True,
                                    timeout=300, env=demo_env)
            assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
            assert re.search(expected, result.stdout, re.MULTILINE), f"{command} printed {result.stdout[-1000:]!r}"
        changed = [name for name, data in committed.items() if (ROOT / name).read_bytes() != data]
        assert changed == [], "the README's generate command no longer reproduces the committed example"
    finally:
        for name, data in committed.items():
            (ROOT / name).write_bytes(data)
