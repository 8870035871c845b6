"""What every API endpoint accepts as input, beyond its own fields (settings.REST_FRAMEWORK).

Two inputs used to get past validation and fail in PostgreSQL or Python, as 500s: JSON nested
deeper than Python's recursion limit, and times whose offset PostgreSQL cannot store (it takes up
to ±15:59; Python up to ±23:59). Times are therefore turned into UTC before any query, and a
time that has no UTC equivalent (year 1 east of Greenwich, year 9999 west of it) is a 400.
"""

from datetime import UTC, datetime

import django_filters
from django import forms
from django.db import models
from django_filters import rest_framework as drf_filters
from rest_framework import exceptions, parsers

OUT_OF_RANGE = "This time is out of range once turned into UTC."


def as_utc(moment: datetime) -> datetime:
    """`moment` (aware) in UTC; ValueError when UTC cannot represent it."""
    try:
        return moment.astimezone(UTC)
    except OverflowError as error:
        raise ValueError(OUT_OF_RANGE) from error


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, with nesting too deep for Python a 400 instead of a RecursionError."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deep.") from None


class UtcDateTimeField(django_filters.fields.IsoDateTimeField):
    def to_python(self, value):
        moment = super().to_python(value)
        try:
            return None if moment is None else as_utc(moment)
        except ValueError as error:
            raise forms.ValidationError(str(error), code="invalid") from error


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


class FilterSet(drf_filters.FilterSet):
    """django-filter's DRF FilterSet, with every datetime column filtered in UTC."""

    FILTER_DEFAULTS = {**drf_filters.FilterSet.FILTER_DEFAULTS,
                       models.DateTimeField: {"filter_class": UtcDateTimeFilter}}


class FilterBackend(drf_filters.DjangoFilterBackend):
    """The default filter backend; views with `filterset_fields` get the FilterSet above."""

    filterset_base = FilterSet
