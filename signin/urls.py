from django.urls import path

from . import views

app_name = "signin"
urlpatterns = [
    path(".well-known/oauth-authorization-server", views.metadata, name="metadata"),
    path("oauth/device_authorization", views.device_authorization, name="device_authorization"),
    path("oauth/token", views.token, name="token"),
    path("oauth/revoke", views.revoke, name="revoke"),
    path("device", views.device, name="device"),
    path("device/login", views.PasswordLogin.as_view(), name="login"),
    path("oidc/login", views.oidc_login, name="oidc_login"),
    path("oidc/callback", views.oidc_callback, name="oidc_callback"),
]
