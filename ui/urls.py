from django.urls import path

from ui import account, history, live, views

app_name = "ui"

urlpatterns = [
    path("teams/", views.teams, name="teams"),
    path("teams/<slug:team>/", views.dashboard, name="dashboard"),
    path("teams/<slug:team>/live/", live.team_live, name="team_live"),
    path("teams/<slug:team>/priorities/", views.priorities, name="priorities"),
    path("teams/<slug:team>/queue/move/", views.queue_move, name="queue_move"),
    path("jobs/", history.job_history, name="jobs"),
    path("jobs/new/", views.job_new, name="job_new"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/live/", live.job_live, name="job_live"),
    path("jobs/<int:pk>/logs/", views.job_logs, name="job_logs"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    path("jobs/<int:pk>/priority/", views.job_priority, name="job_priority"),
    path("cluster/", views.cluster, name="cluster"),
    path("account/tokens/", account.api_tokens, name="api_tokens"),
    path("account/tokens/<int:pk>/revoke/", account.api_token_revoke, name="api_token_revoke"),
]
