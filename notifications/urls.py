from django.urls import path

from notifications import views

app_name = "notifications"

urlpatterns = [
    path("account/notifications/", views.preferences, name="preferences"),
    path("teams/<slug:team>/webhooks/", views.team_webhooks, name="team_webhooks"),
    path("teams/<slug:team>/webhooks/<int:pk>/delete/", views.team_webhook_delete, name="team_webhook_delete"),
]
