"""REST API views: declarative viewsets scoped by the same selectors and services as the pages."""

import hashlib

from django.core.cache import cache
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import FloatField, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import access, freshness
from scheduling import services, sizing
from scheduling.models import Placement
from scheduling.selectors import cluster_gpu_models, team_queue
from ui import cluster_view, selectors
from ui.api import filtersets
from ui.api import serializers as s
from ui.api.pagination import RowsPagination


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The job changed state meanwhile."
    default_code = "conflict"


def _call(service, **kwargs):
    """Run a service; its field errors become a 400 (Django's ValidationError would be a 500)."""
    try:
        return service(**kwargs)
    except services.StateConflict as conflict:
        detail = conflict.message_dict if hasattr(conflict, "error_dict") else {"detail": conflict.messages}
        raise Conflict(detail) from conflict
    except DjangoValidationError as error:
        detail = error.message_dict if hasattr(error, "error_dict") else error.messages
        raise exceptions.ValidationError(detail) from error


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                 viewsets.GenericViewSet):
    """Jobs of the teams you belong to (staff: all). Finance sees usage, not jobs."""

    serializer_class = s.JobSerializer
    filterset_class = filtersets.JobFilter
    pagination_class = RowsPagination

    def get_queryset(self):
        return selectors.jobs_visible_to(self.request.user).order_by("-submitted_at", "-pk")

    def list(self, request, *args, **kwargs):
        page = self.paginator.paginate_rows(self.filter_queryset(self.get_queryset()), s.JOB_ROW, request, self)
        return self.get_paginated_response(page)

    @extend_schema(request=s.JobSubmitSerializer, responses={
        201: s.JobSerializer,
        400: OpenApiResponse(description="A field is wrong (the body names it), or the team has as many jobs waiting "
                                         "as its limit allows."),
        429: OpenApiResponse(description="The team's submissions per minute, or your API requests per minute, are "
                                         "at their limit; Retry-After says when to try again.")})
    def create(self, request, *args, **kwargs):
        incoming = s.JobSubmitSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = dict(incoming.validated_data)
        team = selectors.teams_visible_to(request.user).filter(name=data.pop("team")).first()
        if team is None:
            raise exceptions.ValidationError({"team": ["No such team, or not yours."]})
        try:
            job = _call(services.job_submit, user=request.user, team=team, **data)
        except services.TooManySubmits as limit:
            raise exceptions.Throttled(wait=limit.retry_after_s, detail=str(limit)) from limit
        return Response(s.JobSerializer(selectors.job_get(request.user, job.pk)).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.NoFieldsSerializer, responses=s.JobSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        s.NoFieldsSerializer(data=request.data).is_valid(raise_exception=True)
        job = _call(services.job_cancel, user=request.user, job=self.get_object())
        return Response(s.JobSerializer(selectors.job_get(request.user, job.pk)).data)

    @extend_schema(request=s.ReprioritiseSerializer, responses={200: s.JobSerializer, 409: OpenApiResponse(
        description="The job is no longer active (cancelled or finished meanwhile).")})
    @action(detail=True, methods=["post"])
    def reprioritise(self, request, pk=None):
        incoming = s.ReprioritiseSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        job = _call(services.job_reprioritise, user=request.user, job=self.get_object(),
                    priority_class=incoming.validated_data["priority_class"])
        return Response(s.JobSerializer(selectors.job_get(request.user, job.pk)).data)


def _held(team_filter):
    placements = (Placement.objects.filter(ended_at__isnull=True, job__team=OuterRef("pk")).filter(team_filter)
                  .values("job__team").annotate(units=Sum(selectors.PLACEMENT_UNITS)).values("units"))
    return Coalesce(Subquery(placements), Value(0.0), output_field=FloatField())


class TeamViewSet(viewsets.ReadOnlyModelViewSet):
    """Teams with quota and current usage; `queue` lists the waiting jobs with positions and reasons."""

    serializer_class = s.TeamSerializer
    pagination_class = RowsPagination
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9-]+"

    def get_queryset(self):
        if self.action in ("queue", "reorder"):  # the queue needs the team, not its usage
            return selectors.teams_visible_to(self.request.user)
        return (selectors.teams_visible_to(self.request.user).prefetch_related("allowed_priority_classes")
                .annotate(in_use=_held(Q()), borrowed_units=_held(Q(job__borrowed=True))).order_by("name"))

    def _team_with_jobs(self):
        team = self.get_object()
        if not access.can_see_jobs(self.request.user, team.pk):
            raise exceptions.PermissionDenied("Finance sees usage, not the queue.")
        return team

    @extend_schema(responses=s.QueueEntrySerializer(many=True), filters=False)
    @action(detail=True, methods=["get"])
    def queue(self, request, name=None):
        team = self._team_with_jobs()
        # Keyed by the team's version, so a reorder, submit, cancel or scheduling cycle shows at once.
        url = hashlib.sha256(request.build_absolute_uri().encode()).hexdigest()[:32]
        key = f"portal:queue:{team.pk}:{freshness.team_version(team.pk)}:{url}"
        data = cache.get(key)
        if data is None:
            page = self.paginator.paginate_rows(team_queue(team), s.QUEUE_ROW, request, self)
            data = self.get_paginated_response(page).data
            cache.set(key, data, freshness.TEAM_CACHE_S)
        return Response(data)

    @extend_schema(request=s.ReorderSerializer, responses=s.QueueEntrySerializer(many=True))
    @action(detail=True, methods=["post"], url_path="queue/reorder", pagination_class=None)  # the whole queue
    def reorder(self, request, name=None):
        team = self._team_with_jobs()
        incoming = s.ReorderSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        jobs = _call(services.team_queue_reorder, user=request.user, team=team,
                     job_ids=incoming.validated_data["job_ids"])
        return Response(s.QueueEntrySerializer(jobs, many=True).data)


class ClusterView(GenericAPIView):
    """Nodes with tier, leaf switch and GPUs (MIG instances in their slots); details per role."""

    filterset_class = filtersets.NodeFilter
    serializer_class = s.ClusterNodeSerializer

    def get_queryset(self):
        return selectors.cluster_nodes()

    @extend_schema(responses=s.ClusterPageSerializer)
    def get(self, request):
        if not access.sees_cluster(request.user):
            raise exceptions.PermissionDenied("The cluster is shown to members of a team.")
        nodes = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        response = self.get_paginated_response(cluster_view.heat_rows(request.user, nodes))
        response.data["free_by_model"] = selectors.free_by_model(nodes)
        return response


class SizingView(APIView):
    """Memory need of a model and what it gets on each GPU model of the cluster."""

    @extend_schema(parameters=[s.SizingSerializer], responses=inline_serializer(
        "Sizing", {"need_gb": serializers.FloatField(), "fits": serializers.ListField()}))
    def get(self, request):
        incoming = s.SizingSerializer(data=request.query_params)
        incoming.is_valid(raise_exception=True)
        try:
            need = sizing.memory_need_gb(**incoming.validated_data)
        except ValueError as error:
            raise exceptions.ValidationError({"precision": [str(error)]}) from error
        models = {m: v["memory_gb"] for m, v in cluster_gpu_models().items()}
        return Response({"need_gb": need, "fits": [fit.__dict__ for fit in sizing.fits(need, models)]})
