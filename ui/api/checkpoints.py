"""The checkpoint endpoint: a job's pods confirm the checkpoints they saved (CONTRACTS.md).

It takes no user: a pod shows its own token (`Authorization: Bearer <token>`, mounted from a
Secret), which names the job, so a token can confirm its own job and nothing else. Everything
else about the channel is in checkpoints/.
"""

from datetime import datetime

from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from checkpoints import services
from checkpoints.models import CheckpointConfirmation, CheckpointToken
from portal.api_input import JSONParser, StrictSerializer, as_utc


class CheckpointTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>`: the pod's checkpoint token; request.auth is its row."""

    def authenticate(self, request):
        words = get_authorization_header(request).split()
        if not words or words[0].lower() != b"bearer":
            return None
        if len(words) != 2:
            raise exceptions.AuthenticationFailed("Send the token as 'Authorization: Bearer <token>'.")
        try:
            token = services.token_holder(words[1].decode("ascii"))
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("The token must be ASCII.") from None
        except services.TokenRefused as refused:
            raise exceptions.AuthenticationFailed(str(refused)) from None
        return AnonymousUser(), token

    def authenticate_header(self, request):
        return 'Bearer realm="tessera-checkpoints"'  # makes a missing token a 401, not a 403


class CheckpointTokenScheme(OpenApiAuthenticationExtension):
    target_class = CheckpointTokenAuthentication
    name = "checkpointToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "The pod's checkpoint token, mounted at "
                               "/var/run/secrets/tessera/checkpoint-token/token."}


class HoldsCheckpointToken(BasePermission):
    message = "Send the pod's checkpoint token as 'Authorization: Bearer <token>'."

    def has_permission(self, request, view):
        return isinstance(request.auth, CheckpointToken)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer: no strings, booleans or fractions passed off as one."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class Rfc3339Field(serializers.DateTimeField):
    default_error_messages = {"invalid": "Give an RFC 3339 time with its zone, e.g. 2025-01-31T12:00:00Z."}

    def to_internal_value(self, value):
        try:
            parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            self.fail("invalid")
        try:
            return as_utc(parsed)  # PostgreSQL stores offsets up to ±15:59 only
        except ValueError:
            self.fail("invalid")


class ConfirmSerializer(StrictSerializer):
    checkpoint_id = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9._:-]*$", max_length=100,
        help_text="The id from the pod's tessera.io/checkpoint-request annotation, or 'periodic' for a checkpoint "
                  "the workload made on its own.")
    step = StrictIntegerField(min_value=0, max_value=2**63 - 1, help_text="The training step saved.")
    progress_s = StrictFloatField(min_value=0, max_value=services.MAX_PROGRESS_S,
                                  help_text="Seconds of training done at this checkpoint, over all runs.")
    saved_at = Rfc3339Field(help_text="When the checkpoint was written (RFC 3339, with zone).")
    path = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="",
                                 help_text="Where it was written (informational).")


class ConfirmationSerializer(serializers.ModelSerializer):
    job_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = CheckpointConfirmation
        fields = ["job_id", "checkpoint_id", "pod_name", "step", "progress_s", "saved_at", "path", "recorded_at"]
        read_only_fields = fields


class CheckpointConfirmView(APIView):
    """Confirm a checkpoint of your own job: 201 the first time, 200 for the same again."""

    authentication_classes = [CheckpointTokenAuthentication]
    permission_classes = [HoldsCheckpointToken]
    parser_classes = [JSONParser]

    @extend_schema(
        request=ConfirmSerializer,
        responses={201: ConfirmationSerializer, 200: ConfirmationSerializer,
                   400: OpenApiResponse(description="A field is missing, malformed or unknown; the body says which."),
                   401: OpenApiResponse(description="No token, an unknown one, or the run has ended."),
                   409: OpenApiResponse(description="This request was already confirmed with other values.")})
    def post(self, request):
        if not isinstance(request.data, dict):
            raise exceptions.ValidationError({"non_field_errors": ["Send a JSON object."]})
        incoming = ConfirmSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        token = request.auth
        try:
            record, created = services.checkpoint_confirm(
                job_id=token.job_id, pod_name=token.pod_name, saved=services.Saved(**incoming.validated_data))
        except DjangoValidationError as error:
            raise exceptions.ValidationError(error.message_dict) from error
        except services.ConfirmationConflict as conflict:
            return Response({"detail": str(conflict)}, status=status.HTTP_409_CONFLICT)
        return Response(ConfirmationSerializer(record).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
