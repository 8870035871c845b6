import django_filters
from django import forms
from django.db.models import Exists, OuterRef, Q

from portal.api_input import FilterSet, UtcDateTimeFilter
from scheduling.models import Job, Node, Placement


class JobFilterForm(forms.Form):
    """Refuses a date range that ends before it starts (it would silently match nothing)."""

    def clean(self):
        data = super().clean()
        first, last = data.get("submitted_from"), data.get("submitted_to")
        if first and last and first > last:
            self.add_error("submitted_to", "The range ends before it starts.")
        return data


class JobFilter(FilterSet):
    """The job list's filters, for the API list and the job history page alike."""

    team = django_filters.CharFilter(field_name="team__name")
    project = django_filters.CharFilter(field_name="project__name")
    status = django_filters.MultipleChoiceFilter(choices=Job.Status.choices, label="State")
    kind = django_filters.ChoiceFilter(choices=Job.Kind.choices)
    priority_class = django_filters.CharFilter(field_name="priority_class__name")
    submitted_by = django_filters.CharFilter(field_name="submitted_by__username", label="Submitted by")
    submitted_after = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="lt")
    # Whole UTC days, both ends included: what a date picker means by "from" and "to".
    submitted_from = django_filters.DateFilter(field_name="submitted_at", lookup_expr="date__gte",
                                             label="Submitted from")
    submitted_to = django_filters.DateFilter(field_name="submitted_at", lookup_expr="date__lte",
                                           label="Submitted to")
    gpu_model = django_filters.CharFilter(method="filter_gpu_model", max_length=40, label="GPU model", help_text=(
        "Jobs that ran on a GPU of this model, or were pinned to it."))
    q = django_filters.CharFilter(method="filter_text", max_length=100, label="Search",
                               help_text="Part of the job's name, or its id.")

    class Meta:
        model = Job
        fields = ["team", "project", "status", "kind", "priority_class", "submitted_by", "borrowed"]
        form = JobFilterForm

    def filter_gpu_model(self, queryset, name, value):
        ran_on = Exists(Placement.objects.filter(job=OuterRef("pk"), gpu__model=value))
        pinned = Q(gpu_models=value) | Q(gpu_models__startswith=f"{value}|") | Q(gpu_models__endswith=f"|{value}") \
            | Q(gpu_models__contains=f"|{value}|")
        return queryset.filter(ran_on | pinned)

    def filter_text(self, queryset, name, value):
        text = value.strip().lstrip("#")
        match = Q(name__icontains=text)
        if text.isdigit() and len(text) < 10:
            match |= Q(pk=int(text))
        return queryset.filter(match)


class NodeFilter(FilterSet):
    tier = django_filters.CharFilter(field_name="tier__name")
    leaf = django_filters.CharFilter(field_name="leaf_switch__name")

    class Meta:
        model = Node
        fields = ["tier", "leaf", "gpu_model", "state", "interconnect"]
