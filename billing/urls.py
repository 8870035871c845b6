from django.urls import path

from billing import months, team, views

app_name = "billing"

urlpatterns = [
    path("", views.chargeback, name="chargeback"),
    path("export.csv", views.chargeback_csv, name="csv"),
    path("statement.pdf", views.statement, name="statement"),
    path("procurement/", views.procurement, name="procurement"),
    path("export.focus.csv", views.focus_csv, name="focus"),
    path("teams/<str:team>/", team.team_spend, name="team"),
    path("months/", months.months, name="months"),
    path("months/close/", months.close, name="close"),
    path("months/corrections/", months.book_corrections, name="corrections"),
]
