import django_filters

from portal.api_input import FilterSet, UtcDateTimeFilter
from scheduling.models import Job, Node


class JobFilter(FilterSet):
    team = django_filters.CharFilter(field_name="team__name")
    project = django_filters.CharFilter(field_name="project__name")
    status = django_filters.MultipleChoiceFilter(choices=Job.Status.choices)
    kind = django_filters.ChoiceFilter(choices=Job.Kind.choices)
    priority_class = django_filters.CharFilter(field_name="priority_class__name")
    submitted_by = django_filters.CharFilter(field_name="submitted_by__username")
    submitted_after = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields = ["team", "project", "status", "kind", "priority_class", "submitted_by", "borrowed"]


class NodeFilter(FilterSet):
    tier = django_filters.CharFilter(field_name="tier__name")
    leaf = django_filters.CharFilter(field_name="leaf_switch__name")

    class Meta:
        model = Node
        fields = ["tier", "leaf", "gpu_model", "state", "interconnect"]
