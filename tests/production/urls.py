"""The portal's URLs plus views that fail on purpose, to see each error response."""

from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.urls import path

from tessera import urls


def fails_with(error: Exception):
    def view(request):
        raise error
    return view


FAILURES = {"boom": RuntimeError("boom"), "denied": PermissionDenied("Only leads may do this."),
            "suspicious": SuspiciousOperation("odd")}
urlpatterns = [path(f"{prefix}{name}/", fails_with(error)) for name, error in FAILURES.items()
               for prefix in ("api/v1/", "pages/")] + urls.urlpatterns
handler400, handler403 = urls.handler400, urls.handler403
handler404, handler500 = urls.handler404, urls.handler500
