"""`python -m tests.oidc.provider.seed '<json>'`: the provider's client and users, as the tests say.

{"client": {"id": ..., "secret": ..., "redirect_uri": ...},
 "users": {"name": {"password": ..., "email": ..., "groups": [...]}}}  (users are created or updated)
"""

import json
import sys

import django


def seed(spec: dict) -> None:
    from django.contrib.auth.models import Group, User
    from oauth2_provider.models import Application

    client = spec.get("client")
    if client:
        Application.objects.update_or_create(client_id=client["id"], defaults={
            "name": "tessera", "client_secret": client["secret"], "redirect_uris": client["redirect_uri"],
            "client_type": Application.CLIENT_CONFIDENTIAL, "skip_authorization": True,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE, "algorithm": Application.RS256_ALGORITHM})
    for name, fields in spec.get("users", {}).items():
        user, _ = User.objects.get_or_create(username=name)
        user.set_password(fields["password"])
        user.email = fields.get("email", "")
        user.save()
        user.groups.set([Group.objects.get_or_create(name=group)[0] for group in fields.get("groups", [])])


if __name__ == "__main__":
    django.setup()
    seed(json.loads(sys.argv[1]))
