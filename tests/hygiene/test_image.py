"""The `tessera` image, as far as it can be checked without a container engine.

No Docker engine runs here, so the image is never built in this suite. What is checked instead:
the Dockerfile parses; every file it copies exists; it installs the runtime lock and nothing
else; it runs as the uid deploy/ expects. Then the build is replayed by hand: a virtualenv made
from requirements/runtime.txt alone, the Dockerfile's COPY sources laid out as /app would hold
them, its RUN steps after WORKDIR run there, and every entry point deploy/ names started in it.
"""

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from tests.hygiene.repo import ROOT

IMAGE_ENV = {"DEBUG": "0", "SECRET_KEY": "image-check-secret-key-not-for-production-0123456789",
             "DATABASE_URL": "sqlite:////tmp/tessera-image-check.sqlite3", "ALLOWED_HOSTS": "testserver",
             "DJANGO_SETTINGS_MODULE": "tessera.settings", "PYTHONDONTWRITEBYTECODE": "1"}


def instructions() -> list[dict]:
    with open(ROOT / "Dockerfile", "rb") as dockerfile:
        return [item for item in DockerfileParser(fileobj=dockerfile).structure if item["instruction"] != "COMMENT"]


def final_stage() -> list[dict]:
    steps = instructions()
    last_from = max(i for i, item in enumerate(steps) if item["instruction"] == "FROM")
    return steps[last_from:]


def copies(stage: list[dict]) -> list[tuple[str, str]]:
    """(source, destination) of each COPY from the build context (not from another stage)."""
    pairs = []
    for item in stage:
        if item["instruction"] == "COPY" and "--from=" not in item["value"]:
            *sources, destination = shlex.split(item["value"])
            pairs += [(source, destination) for source in sources]
    return pairs


def deploy_containers() -> list[dict]:
    found = []
    for path in sorted((ROOT / "deploy").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            spec = ((document or {}).get("spec") or {}).get("template", {}).get("spec", {})
            found += [{**container, "pod": spec} for container in spec.get("containers", [])
                      if container.get("image", "").startswith("tessera:")]
    return found


def test_the_dockerfile_parses_into_two_stages_on_python_3_11():
    steps = instructions()
    assert [item["instruction"] for item in steps].count("FROM") == 2
    assert {"FROM", "COPY", "RUN", "USER", "CMD"} <= {item["instruction"] for item in steps}
    assert "python:3.11" in next(item["value"] for item in steps if item["instruction"] == "ARG")


def test_every_file_it_copies_exists():
    every = copies(instructions())
    assert every and [source for source, _ in every if not (ROOT / source).exists()] == []


def test_it_copies_every_package_the_project_runs():
    from django.conf import settings

    ours = {app.split(".")[0] for app in settings.INSTALLED_APPS if (ROOT / app.split(".")[0]).is_dir()}
    copied = {source.strip("/").split("/")[0] for source, _ in copies(instructions())}
    assert sorted(ours - copied) == [], "add a COPY line for each new app to the Dockerfile"


def test_it_installs_the_runtime_lock_and_nothing_else():
    text = (ROOT / "Dockerfile").read_text()
    named = {word for word in text.split() if word.startswith("requirements/")}
    assert named == {"requirements/runtime.txt"}
    assert "--require-hashes" in text


def test_it_runs_as_the_non_root_user_deploy_expects():
    users = [item["value"] for item in final_stage() if item["instruction"] == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    uid = int(users[-1].split(":")[0])
    for container in deploy_containers():
        expected = container["pod"].get("securityContext", {}).get("runAsUser")
        assert expected in (None, uid), f"{container['name']} runs as {expected}, the image as {uid}"


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    """/app and /opt/venv of the image, laid out in a temporary folder by replaying the Dockerfile."""
    root = tmp_path_factory.mktemp("image")
    venv, app = root / "venv", root / "app"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    uv = [str(Path(sys.executable).parent / "uv"), "pip", "install", "--python", str(venv / "bin" / "python"),
          "--require-hashes", "--quiet", "-r", str(ROOT / "requirements" / "runtime.txt")]
    if subprocess.run(uv, capture_output=True).returncode != 0:
        subprocess.run([*uv, "--offline"], check=True)  # the package index is away: uv's cache alone
    for source, destination in copies(final_stage()):
        target = app / destination if destination.endswith("/") and destination != "./" else app / source
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / source, target)
    after_workdir = final_stage()[[item["instruction"] for item in final_stage()].index("WORKDIR"):]
    for item in after_workdir:
        if item["instruction"] == "RUN":
            result = run_in(root, ["bash", "-c", item["value"]])
            assert result.returncode == 0, result.stdout + result.stderr
    return root


def run_in(image: Path, command: list[str], **extra) -> subprocess.CompletedProcess:
    environment = {"PATH": f"{image / 'venv' / 'bin'}:/usr/bin:/bin", "HOME": str(image), **IMAGE_ENV, **extra}
    return subprocess.run(command, cwd=image / "app", env=environment, capture_output=True, text=True, timeout=120)


def test_the_runtime_venv_holds_no_test_tool(image):
    for module in ("pytest", "hypothesis", "ruff", "playwright", "kubernetes_validate", "importlinter"):
        assert run_in(image, ["python", "-c", f"import {module}"]).returncode != 0, f"{module} is in the image"


def test_every_command_deploy_runs_is_in_the_image(image):
    commands = {container["command"][0] for container in deploy_containers()}
    assert commands >= {"gunicorn", "celery", "python"}
    assert [command for command in commands if not (image / "venv" / "bin" / command).exists()] == []


def test_gunicorn_loads_the_portal(image):
    result = run_in(image, ["gunicorn", "--check-config", "tessera.wsgi:application"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_celery_finds_the_app_and_the_worker_tasks(image):
    result = run_in(image, ["celery", "-A", "tessera.celery", "inspect", "--help"])
    assert result.returncode == 0, result.stdout + result.stderr
    tasks = run_in(image, ["python", "-c", "from tessera.celery import app; app.loader.import_default_modules(); "
                                           "print(sorted(app.tasks))"])
    assert "agents.run_cycle" in tasks.stdout and "billing.sync_ledger" in tasks.stdout, tasks.stderr


def test_the_node_agent_starts(image):
    result = run_in(image, ["python", "-m", "agents.node_agent", "--help"])
    assert result.returncode == 0 and "--token-file" in result.stdout, result.stderr


def test_the_portal_serves_the_collected_static_files(image):
    collected = sorted((image / "app" / "staticfiles").rglob("*.css"))
    assert collected
    path = "/static/" + str(collected[0].relative_to(image / "app" / "staticfiles"))
    served = run_in(image, ["python", "-c", "import django; django.setup(); from django.test import Client; "
                                            f"print(Client().get({path!r}).status_code)"])
    assert served.stdout.strip() == "200", served.stderr
