"""POST /api/v1/token/: a named, expiring API token for a username and password.

The password check goes through the sign-in lockout (tessera/signin.py): after too many wrong
passwords for a username the right one is refused with a 429 until the cool-off has passed.
"""

from django.contrib.auth import authenticate
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import tokens
from portal.api_input import StrictSerializer
from ui.api.auth import ApiTokenAuthentication


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = ApiTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <token>`: a named, expiring token made on the portal's API tokens page "
                               "or with POST /api/v1/token/."}


class TokenRequest(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, style={"input_type": "password"}, trim_whitespace=False)
    name = serializers.CharField(max_length=100, default="api", help_text="What the token is for.")
    days = serializers.IntegerField(min_value=1, max_value=36500, default=30, help_text="How long it lasts.")


class TokenIssued(serializers.Serializer):
    token = serializers.CharField(help_text="Shown once; only its digest is kept.")
    name = serializers.CharField()
    expires_at = serializers.DateTimeField()


class TokenView(APIView):
    """Make a named, expiring API token with a username and password."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(request=TokenRequest, responses={
        201: TokenIssued, 400: OpenApiResponse(description="Wrong username or password, or a bad name or days."),
        429: OpenApiResponse(description="Too many failed sign-ins for this username: wait for the cool-off.")})
    def post(self, request):
        incoming = TokenRequest(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        # The Django request: the lockout marks it, and its middleware answers 429 (tessera/signin.py).
        user = authenticate(request._request, username=data["username"], password=data["password"])
        if user is None:
            raise exceptions.ValidationError({"non_field_errors": ["Unable to sign in with these credentials."]})
        try:
            token, secret = tokens.token_issue(user, data["name"], data["days"])
        except DjangoValidationError as error:
            raise exceptions.ValidationError(error.message_dict) from error
        return Response({"token": secret, "name": token.name, "expires_at": token.expires_at},
                        status=status.HTTP_201_CREATED)
