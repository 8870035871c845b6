from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from portal import views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("billing/", include("billing.urls")),
    path("api/v1/billing/", include("billing.api_urls")),
    path("admin/", admin.site.urls),
]
