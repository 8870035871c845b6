from django.urls import path

from billing import views

app_name = "billing"

urlpatterns = [
    path("", views.chargeback, name="chargeback"),
    path("export.csv", views.chargeback_csv, name="csv"),
    path("statement.pdf", views.statement, name="statement"),
    path("procurement/", views.procurement, name="procurement"),
]
