from django.urls import path

from . import actionviews, export, spendviews, views

app_name = "dashboard"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("usage/", views.usage, name="usage"),
    path("accounts/<int:pk>/", views.account_detail, name="account"),
    path("accounts/<int:pk>/enable/", actionviews.enable, name="account_enable"),
    path("accounts/<int:pk>/disable/", actionviews.disable, name="account_disable"),
    path("accounts/<int:pk>/test/", actionviews.test, name="account_test"),
    path("events/", views.events, name="events"),
    path("events/<int:pk>/enable/", views.enable, name="enable"),
    path("keys/", spendviews.keys, name="keys"),
    path("keys/<int:pk>/", spendviews.key_detail, name="key"),
    path("spend/", spendviews.spend, name="spend"),
    path("claude-code/", spendviews.reported, name="reported"),
    path("spend.csv", export.spend_csv, name="spend_csv"),
    path("requests.csv", export.requests_csv, name="requests_csv"),
    path("requests/", views.requests_list, name="requests"),
    path("requests/<str:request_id>/", views.request_detail, name="request"),
]
