from django.urls import path

from . import views

# The OAuth endpoints (discovery, device authorization, token, revocation) are API routes: gateway.edge.api.

app_name = "signin"
urlpatterns = [
    path("device", views.device, name="device"),
    path("device/login", views.PasswordLogin.as_view(), name="login"),
    path("oidc/login", views.oidc_login, name="oidc_login"),
    path("oidc/callback", views.oidc_callback, name="oidc_callback"),
]
