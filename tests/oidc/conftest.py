"""A real OpenID Connect provider (django-oauth-toolkit, tests/oidc/provider/) on loopback, and a
browser that signs in through it to a Tessera configured for single sign-on."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.loopback import free_port, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
CLIENT = {"id": "tessera-portal", "secret": "tessera-client-secret-for-tests-0123456789",
          "redirect_uri": "http://testserver/oidc/callback/"}  # the Django test client's host


class Provider:
    def __init__(self, url: str, environment: dict):
        self.url, self.environment = url, environment
        self.discovery = requests.get(f"{url}/o/.well-known/openid-configuration", timeout=10).json()

    def seed(self, **spec) -> None:
        """Create or update the provider's client and users (tests/oidc/provider/seed.py)."""
        subprocess.run([sys.executable, "-m", "tests.oidc.provider.seed", json.dumps(spec)], cwd=ROOT,
                       env=self.environment, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def provider(tmp_path_factory):
    folder = tmp_path_factory.mktemp("oidc-provider")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    environment = {**{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_"))},
                   "DJANGO_SETTINGS_MODULE": "tests.oidc.provider.settings", "PROVIDER_RSA_KEY": pem,
                   "PROVIDER_DB": str(folder / "provider.sqlite3")}
    django = [sys.executable, "-m", "django"]
    subprocess.run([*django, "migrate", "--verbosity", "0"], cwd=ROOT, env=environment, check=True, timeout=300)
    port = free_port()
    log = (folder / "server.log").open("w+")
    server = subprocess.Popen([*django, "runserver", f"127.0.0.1:{port}", "--noreload"], cwd=ROOT,
                              env=environment, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until_serving(f"{url}/o/.well-known/openid-configuration", server):
            log.seek(0)
            pytest.fail(f"the OIDC provider did not start: {log.read()[-2000:]}")
        running = Provider(url, environment)
        running.seed(client=CLIENT)
        yield running
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


@pytest.fixture
def sso(settings, provider):
    """Tessera with single sign-on through the provider; the mapping is the tests' company."""
    settings.TESSERA_OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT["id"], CLIENT["secret"]
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = provider.discovery["authorization_endpoint"]
    settings.OIDC_OP_TOKEN_ENDPOINT = provider.discovery["token_endpoint"]
    settings.OIDC_OP_USER_ENDPOINT = provider.discovery["userinfo_endpoint"]
    settings.OIDC_OP_JWKS_ENDPOINT = provider.discovery["jwks_uri"]
    settings.TESSERA_OIDC_PROVIDER_NAME = "Example Corp"
    settings.TESSERA_OIDC_GROUP_MAP = {"gpu-search-leads": "search:lead", "gpu-search": "search:member",
                                       "gpu-vision": "vision:viewer", "platform-admins": "staff",
                                       "finance-team": "finance"}
    return provider


def sign_in_through(provider: Provider, client, username: str, password: str):
    """Drive the code flow as a browser would: Tessera -> provider sign-in -> Tessera's callback.

    `client` is the Django test client (Tessera); a requests session is the browser at the provider.
    Returns Tessera's answer to the callback.
    """
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302, start.content[:300]
    browser = requests.Session()
    authorize = start["Location"]
    to_login = browser.get(authorize, allow_redirects=False, timeout=10)
    assert to_login.status_code == 302, to_login.text[:300]
    login_url = requests.compat.urljoin(authorize, to_login.headers["Location"])
    form = browser.get(login_url, timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    next_url = re.search(r'name="next" value="([^"]*)"', form.text).group(1).replace("&amp;", "&")
    signed = browser.post(login_url, allow_redirects=False, timeout=10, headers={"Referer": login_url},
                          data={"csrfmiddlewaretoken": token, "username": username, "password": password,
                                "next": next_url})
    assert signed.status_code == 302, signed.text[:500]
    back = browser.get(requests.compat.urljoin(authorize, signed.headers["Location"]), allow_redirects=False,
                       timeout=10)
    assert back.status_code == 302, back.text[:500]
    callback = urlparse(back.headers["Location"])
    assert callback.netloc == "testserver", back.headers["Location"]
    return client.get(f"{callback.path}?{callback.query}")
