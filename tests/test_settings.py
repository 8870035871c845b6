"""Settings come from the environment; a bad value stops start-up naming the variable."""

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from tessera import env

GOOD_ENV = {"SECRET_KEY": "x" * 50, "DEBUG": "0", "DATABASE_URL": "sqlite:///tmp/settings-test.sqlite3"}


def start_django(**overrides) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "DATABASE_URL"}}
    environment.update(GOOD_ENV)
    environment.update(overrides)
    environment = {k: v for k, v in environment.items() if v is not None}
    return subprocess.run([sys.executable, "manage.py", "check"], env=environment, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("name, value", [
    ("DEBUG", "maybe"),
    ("DATABASE_URL", "not-a-url"),
    ("REDIS_URL", "http://localhost:6379"),
    ("CELERY_TASK_ALWAYS_EAGER", "2"),
    ("SECURE_HSTS_SECONDS", "-5"),
    ("ALLOWED_HOSTS", " , "),
    ("SECRET_KEY", "short"),
    ("TESSERA_BACKEND", "slurm"),
    ("TESSERA_POLICY", "tesera"),
    ("TESSERA_FAIRSHARE_HALF_LIFE_H", "0"),
    ("TESSERA_FAIRSHARE_HALF_LIFE_H", "7d"),
    ("TESSERA_POLL_INTERVAL_S", "0"),
    ("CSRF_TRUSTED_ORIGINS", "https://tessera.example.org/accounts/"),
    ("CSRF_TRUSTED_ORIGINS", "ftp://tessera.example.org"),
    ("TESSERA_OIDC_GROUP_MAP", "gpu-search=search:boss"),
    ("TESSERA_OIDC_GROUP_MAP", "gpu-search=search:lead,gpu-search=vision:lead"),
    ("TESSERA_OIDC_GROUP_MAP", "gpu-search"),
    ("TESSERA_AGENT_AUTH", "per-node"),
    ("TESSERA_DCGM_EXPORTER_SELECTOR", "app in (dcgm)"),
])
def test_it_refuses_to_start_with_a_bad_value_and_names_it(name, value):
    result = start_django(**{name: value})
    assert result.returncode != 0
    assert name in result.stderr


def test_it_refuses_to_start_without_secret_key_when_debug_is_off():
    result = start_django(SECRET_KEY=None)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_the_dev_only_agent_auth_needs_debug_or_an_explicit_allowance():
    refused = start_django(TESSERA_AGENT_AUTH="dev-static-token")
    assert refused.returncode != 0 and "TESSERA_AGENT_AUTH" in refused.stderr
    assert "TESSERA_ALLOW_DEV_AGENT_AUTH" in refused.stderr
    allowed = start_django(TESSERA_AGENT_AUTH="dev-static-token", TESSERA_ALLOW_DEV_AGENT_AUTH="1")
    assert allowed.returncode == 0, allowed.stderr


def test_it_starts_with_good_values():
    result = start_django()
    assert result.returncode == 0, result.stderr


def test_a_demo_instance_generates_and_keeps_its_secret_key(tmp_path):
    key_file = tmp_path / "key"
    first = env.env_secret_key("TESSERA_UNSET_KEY", debug=True, demo_key_file=key_file)
    second = env.env_secret_key("TESSERA_UNSET_KEY", debug=True, demo_key_file=key_file)
    assert len(first) >= 40 and first == second


@pytest.mark.parametrize("raw, expected", [("1", True), ("yes", True), ("off", False), ("FALSE", False)])
def test_env_bool_reads_the_usual_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("TESSERA_FLAG", raw)
    assert env.env_bool("TESSERA_FLAG") is expected


def test_env_int_rejects_values_below_the_minimum(monkeypatch):
    monkeypatch.setenv("TESSERA_NUMBER", "-1")
    with pytest.raises(ImproperlyConfigured, match="TESSERA_NUMBER"):
        env.env_int("TESSERA_NUMBER", 0, minimum=0)


def test_database_url_is_parsed(monkeypatch):
    monkeypatch.setenv("TESSERA_DB", "postgres://u@db.example:5433/tessera")
    config = env.env_database("TESSERA_DB", "sqlite:///x")
    assert (config["HOST"], config["PORT"], config["NAME"]) == ("db.example", 5433, "tessera")


def test_trusted_origins_default_to_the_allowed_hosts_behind_tls():
    code = "from django.conf import settings; print(settings.CSRF_TRUSTED_ORIGINS)"
    environment = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "DATABASE_URL"}}
    environment.update(GOOD_ENV, SECURE_TLS="1", ALLOWED_HOSTS="tessera.example.org,.corp.example",
                       DJANGO_SETTINGS_MODULE="tessera.settings")
    environment.pop("CSRF_TRUSTED_ORIGINS", None)
    result = subprocess.run([sys.executable, "-c", "import django; django.setup(); " + code], env=environment,
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "['https://tessera.example.org', 'https://*.corp.example']", result.stderr


def test_single_sign_on_needs_the_providers_endpoints():
    result = start_django(TESSERA_OIDC_CLIENT_ID="tessera", TESSERA_OIDC_AUTHORIZATION_URL="https://idp.example/auth")
    assert result.returncode != 0 and "TESSERA_OIDC_TOKEN_URL" in result.stderr


def test_the_group_map_reads_teams_roles_staff_and_finance(monkeypatch):
    monkeypatch.setenv("TESSERA_MAP", " gpu-search=search:lead , admins=staff,money=finance,")
    assert env.env_group_map("TESSERA_MAP") == {"gpu-search": "search:lead", "admins": "staff", "money": "finance"}
