from django.contrib import admin
from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.root),
    path("v1/chat/completions", views.chat_completions),
    path("v1/messages", views.messages),
    path("v1/messages/count_tokens", views.count_tokens),
    path("v1/responses", views.responses),
    path("v1/models", views.models),
    path("healthz", views.healthz),
    path("readyz", views.readyz),
    path("admin/", admin.site.urls),
    path("dashboard/", include("dashboard.urls")),
]
