from django.urls import include, path
from rest_framework.routers import DefaultRouter

from ui.api import checkpoints, tokens, views

router = DefaultRouter()
router.register("jobs", views.JobViewSet, basename="job")
router.register("teams", views.TeamViewSet, basename="team")

app_name = "api"

urlpatterns = [
    path("checkpoints/", checkpoints.CheckpointConfirmView.as_view(), name="checkpoint-confirm"),
    path("cluster/", views.ClusterView.as_view(), name="cluster"),
    path("sizing/", views.SizingView.as_view(), name="sizing"),
    path("token/", tokens.TokenView.as_view(), name="token"),
    path("", include(router.urls)),
]
