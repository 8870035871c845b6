"""Error responses: the portal's own pages for people, JSON for API clients, always.

Django's defaults are a bare HTML page whatever asked; an API client (a path under /api/, or one
that accepts JSON and not HTML) gets `{"detail": ...}` like every DRF error instead.
"""

from django.http import JsonResponse
from django.shortcuts import render
from django.views import defaults


def wants_json(request) -> bool:
    if request.path.startswith("/api/"):
        return True
    return "Accept" in request.headers and request.accepts("application/json") and \
        not request.accepts("text/html")


def bad_request(request, exception):
    if wants_json(request):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return defaults.bad_request(request, exception)


def permission_denied(request, exception):
    if wants_json(request):
        return JsonResponse({"detail": str(exception) or "You do not have permission to do this."}, status=403)
    return defaults.permission_denied(request, exception)


def page_not_found(request, exception):
    if wants_json(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if wants_json(request):
        return JsonResponse({"detail": "Server error; it has been logged."}, status=500)
    return defaults.server_error(request)


def csrf_failure(request, reason=""):
    """A form posted without a valid CSRF token (expired page, or another site posting it)."""
    if wants_json(request):
        return JsonResponse({"detail": f"CSRF check failed: {reason}"}, status=403)
    message = "The form could not be accepted: it expired or was sent from another site. Reload the page " \
              "and try again."
    return render(request, "403.html", {"exception": message}, status=403)
