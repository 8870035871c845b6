"""Issue 15 item 5: the demo's published accounts (admin/admin-demo-pass) never reach production."""

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def test_load_demo_is_refused_when_debug_is_off(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG=1"):
        call_command("load_demo")
    assert not User.objects.filter(username="admin").exists()
