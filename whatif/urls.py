from django.urls import path

from whatif import views

app_name = "whatif"

urlpatterns = [
    path("", views.whatif_new, name="new"),
    path("<int:pk>/", views.whatif_run, name="run"),
    path("<int:pk>/progress/", views.whatif_progress, name="progress"),
    path("<int:pk>/<str:name>", views.whatif_input, name="input"),
]
