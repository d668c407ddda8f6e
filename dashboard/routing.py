from django.urls import path

from .consumers import DashboardConsumer

# Channels routes ASGI applications with Django's path(), whose stubs take views only.
websocket_urlpatterns = [
    path("ws/dashboard/", DashboardConsumer.as_asgi()),  # type: ignore[arg-type]
]
