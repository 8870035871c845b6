from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated

from tessera import health
from tessera.metrics import metrics
from tessera.signin import PortalLoginView
from ui import views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/login/", PortalLoginView.as_view(), name="login"),
    path("oidc/", include("mozilla_django_oidc.urls")),  # single sign-on (tessera/oidc.py)
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("", include("ui.urls")),
    path("", include("notifications.urls")),
    path("billing/", include("billing.urls")),
    path("whatif/", include("whatif.urls")),
    path("api/v1/billing/", include("billing.api_urls")),
    path("api/v1/", include("ui.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[IsAuthenticated]),
         name="api-docs"),
    path("admin/", admin.site.urls),
]

# Error pages in the portal's style; JSON for API clients (tessera/errors.py).
handler400 = "tessera.errors.bad_request"
handler403 = "tessera.errors.permission_denied"
handler404 = "tessera.errors.page_not_found"
handler500 = "tessera.errors.server_error"
