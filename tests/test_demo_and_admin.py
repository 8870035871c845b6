"""The demo data loads, the login page and the admin work with it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from scheduling.models import Gpu, Job, MigInstance, Node
from ui.demo import demo_load

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):
    demo_load()
    client.login(username="admin", password="admin-demo-pass")
    return client


def test_the_demo_cluster_has_three_node_groups_tiers_and_jobs():
    demo_load()
    assert Node.objects.count() == 10
    assert Gpu.objects.count() == 4 * 8 + 4 * 8 + 2 * 4
    assert set(Node.objects.values_list("tier__name", flat=True)) == {"reserved", "on-demand", "spot"}
    assert MigInstance.objects.count() == 16
    assert Job.objects.filter(status="running").exists() and Job.objects.filter(status="pending").exists()


def test_the_login_page_is_served(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b"Sign in" in response.content


def test_pages_need_a_signed_in_user(client):
    response = client.get(reverse("home"))
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_a_demo_user_signs_in_and_sees_their_team(client):
    demo_load()
    assert client.login(username="alice", password="alice-demo-pass")
    response = client.get(reverse("home"), follow=True)
    assert response.redirect_chain == [("/teams/search/", 302)] and b"search" in response.content


@pytest.mark.parametrize("model", [m for m in apps.get_models() if m in admin.site._registry
                                   and m._meta.app_label in {"portal", "scheduling", "billing"}],
                         ids=lambda m: m._meta.label)
def test_every_admin_list_and_search_works(staff_client, model):
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    assert staff_client.get(url).status_code == 200
    if admin.site._registry[model].search_fields:
        assert staff_client.get(url, {"q": "a"}).status_code == 200
    first = model.objects.first()
    if first is not None:
        change = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[first.pk])
        assert staff_client.get(change).status_code == 200


def test_every_project_model_is_in_the_admin():
    ours = [m for m in apps.get_models() if m._meta.app_label in {"portal", "scheduling", "billing"}]
    assert [m for m in ours if m not in admin.site._registry] == []


def test_the_embedded_demo_sets_up_on_sqlite(tmp_path):
    environment = dict(os.environ, DEBUG="1", DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}")
    environment.pop("SECRET_KEY", None)
    result = subprocess.run([sys.executable, "manage.py", "demo", "--no-serve"], cwd=ROOT, env=environment,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "alice" in result.stdout and "Demo data loaded" in result.stdout
