from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupClaims(OAuth2Validator):
    """The claims a company's provider sends: name, email and the user's groups (Django groups here)."""

    oidc_claim_scope = None  # every claim below, in the ID token and from userinfo

    def get_additional_claims(self, request):
        user = request.user
        return {"preferred_username": user.username, "email": user.email, "given_name": user.first_name,
                "family_name": user.last_name, "groups": sorted(user.groups.values_list("name", flat=True))}
