"""What every API endpoint accepts as input, beyond its own fields (settings.REST_FRAMEWORK), and
the base of every write's serializer (unknown fields refused).

Two inputs used to get past validation and fail in PostgreSQL or Python, as 500s: JSON nested
deeper than Python's recursion limit, and times whose offset PostgreSQL cannot store (it takes up
to ±15:59; Python up to ±23:59). Times are therefore turned into UTC before any query, and a
time that has no UTC equivalent (year 1 east of Greenwich, year 9999 west of it) is a 400.
"""

import difflib
from collections.abc import Mapping
from datetime import UTC, datetime

import django_filters
import redis
from django import forms
from django.conf import settings
from django.db import models
from django_filters import rest_framework as drf_filters
from rest_framework import exceptions, parsers, serializers, throttling

OUT_OF_RANGE = "This time is out of range once turned into UTC."


def as_utc(moment: datetime) -> datetime:
    """`moment` (aware) in UTC; ValueError when UTC cannot represent it."""
    try:
        return moment.astimezone(UTC)
    except OverflowError as error:
        raise ValueError(OUT_OF_RANGE) from error


class RequestRate(throttling.UserRateThrottle):
    """Each user's API requests per minute (signed out: each address's), TESSERA_API_REQUESTS_PER_MINUTE.

    Counted in the shared cache; when that cache is down the request goes through, since a
    limit on load must not itself take the API down.
    """

    def get_rate(self):
        return f"{settings.TESSERA_API_REQUESTS_PER_MINUTE}/min"

    def allow_request(self, request, view):
        try:
            return super().allow_request(request, view)
        except redis.RedisError:
            return True


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


class StrictSerializer(serializers.Serializer):
    """A write's fields, where a field the endpoint does not know is a 400 naming it.

    Dropping it silently would lose what the client meant (a misspelt GPU-model pin would vanish).
    """

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: [_unknown(name, self.fields)] for name in unknown})
        return super().to_internal_value(data)


def _unknown(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"Unknown field; did you mean {close[0]!r}?" if close else "Unknown field."
