"""Page-number pagination for the hot list endpoints, over plain rows instead of model instances.

The count runs on the bare filtered queryset (no joins for the names a row shows) and the page
fetches only the row's columns as tuples, which become dicts without a serializer.
"""

from functools import partial

from django.core.paginator import Paginator
from rest_framework.pagination import PageNumberPagination

from ui.api.serializers import as_dicts


class RowsPaginator(Paginator):
    def __init__(self, object_list, per_page, *, shape: dict[str, str], **kwargs):
        super().__init__(object_list, per_page, **kwargs)
        self.shape = shape

    def _get_page(self, object_list, *args, **kwargs):
        rows = as_dicts(object_list.values_list(*self.shape.values()), self.shape)
        return super()._get_page(rows, *args, **kwargs)


class RowsPagination(PageNumberPagination):
    def paginate_rows(self, queryset, shape: dict[str, str], request, view=None) -> list[dict]:
        """The page of `queryset` as dicts shaped {API name: ORM path} by `shape`."""
        self.django_paginator_class = partial(RowsPaginator, shape=shape)
        return self.paginate_queryset(queryset, request, view)
