"""Quality gates: migrations in step with models, deploy checks, import contracts, lint."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.mark.django_db
def test_migrations_match_the_models():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_deploy_checks_pass_with_production_settings():
    # The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE in this process (Playwright's loop); a
    # deployment never has it.
    environment = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    environment.update(DEBUG="0", SECRET_KEY="7f#Qz!pL2v@9xR$kT4m^Wc8&nB1yH6uJ0sD3gE5aF-production-like",
                       SECURE_TLS="1", SECURE_HSTS_SECONDS="31536000", ALLOWED_HOSTS="tessera.example.com")
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_engine_and_simulator_import_no_framework():
    result = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean():
    result = subprocess.run([str(BIN / "ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_engine_type_checks():
    result = subprocess.run([str(BIN / "mypy")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
