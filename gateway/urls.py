"""Django's URLconf: the pages (admin, dashboard, ``/``). The API's paths are the route table's
(``gateway.edge.routes``), served by the API handler without Django's generic request machinery."""

from django.contrib import admin
from django.urls import include, path

from .edge import pages

urlpatterns = [
    path("", pages.root),
    path("admin/", admin.site.urls),
    path("dashboard/", include("dashboard.urls")),
    path("", include("signin.urls")),  # Claude Code's sign-in: OAuth endpoints and the verification page
]
