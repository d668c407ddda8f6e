from django.urls import path

from . import views

app_name = "dashboard"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("usage/", views.usage, name="usage"),
    path("accounts/<int:pk>/", views.account_detail, name="account"),
    path("events/", views.events, name="events"),
    path("events/<int:pk>/enable/", views.enable, name="enable"),
    path("requests/", views.requests_list, name="requests"),
    path("requests/<str:request_id>/", views.request_detail, name="request"),
]
