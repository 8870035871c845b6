"""Issue 15 item 5: the shipped production settings work behind TLS, over a real gunicorn.

The ingress terminates TLS and forwards plain http with `X-Forwarded-Proto: https`; a browser
sends the Origin it sees (https://tessera.example.org).
"""

import re
import subprocess
import sys

import pytest
import requests
from django.contrib.auth.models import User

from tests.production.conftest import HOST, ROOT, production_env

BEHIND_TLS = {"Host": HOST, "X-Forwarded-Proto": "https"}


def set_cookies(response) -> dict[str, str]:
    """name -> the whole Set-Cookie line (attributes included)."""
    lines = response.raw.headers.getlist("Set-Cookie")
    return {line.split("=", 1)[0]: line for line in lines}


def test_static_files_are_served_with_debug_off(gunicorn):
    for path in ("/static/css/site.css", "/static/js/portal.js", "/static/admin/css/base.css"):
        response = requests.get(gunicorn + path, headers=BEHIND_TLS, timeout=10)
        assert response.status_code == 200, path
    assert response.headers["Content-Type"].startswith("text/css")


@pytest.mark.django_db(transaction=True)
def test_a_user_signs_in_through_the_tls_proxy_with_secure_cookies(gunicorn):
    User.objects.create_user("tina", password="tina-long-password-1")
    page = requests.get(f"{gunicorn}/accounts/login/", headers=BEHIND_TLS, timeout=10)
    assert page.status_code == 200
    assert page.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    csrf_cookie = set_cookies(page)["csrftoken"]
    assert "Secure" in csrf_cookie
    csrf = csrf_cookie.split("=", 1)[1].split(";", 1)[0]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)

    signed_in = requests.post(
        f"{gunicorn}/accounts/login/", allow_redirects=False, timeout=10,
        data={"csrfmiddlewaretoken": token, "username": "tina", "password": "tina-long-password-1"},
        headers={**BEHIND_TLS, "Cookie": f"csrftoken={csrf}", "Origin": f"https://{HOST}",
                 "Referer": f"https://{HOST}/accounts/login/"})
    assert signed_in.status_code == 302, signed_in.text[:500]
    assert "Secure" in set_cookies(signed_in)["sessionid"]


def test_plain_http_is_redirected_to_https_but_probes_are_not(gunicorn):
    page = requests.get(f"{gunicorn}/accounts/login/", headers={"Host": HOST}, allow_redirects=False, timeout=10)
    assert page.status_code == 301 and page.headers["Location"] == f"https://{HOST}/accounts/login/"
    probe = requests.get(f"{gunicorn}/healthz", headers={"Host": HOST}, allow_redirects=False, timeout=10)
    assert probe.status_code != 301


def test_check_deploy_is_clean_with_the_shipped_configmap():
    environment = production_env("postgres://tessera@db.invalid:5432/tessera")
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout
