"""ASGI entry point: the app object built once, behind the edge (gateway.edge.edge).

Served by ``python -m gateway.serve`` (uvicorn, which drains on SIGTERM through
``application.drain``) or by ``daphne gateway.asgi:application`` (where :mod:`gateway.edge.daphne`
sets up the same drain and Twisted's request limits when the reactor starts).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
# The event loop gives up the GIL at every socket call and must win it back from the request-log
# writer thread; at the default 5 ms switch interval that wait showed as lost throughput under
# Daphne. Under uvicorn, three interleaved pairs of runs put 1 ms and 5 ms within each other's noise.
sys.setswitchinterval(0.001)

from django.core.asgi import get_asgi_application  # noqa: E402

django_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from dashboard.routing import websocket_urlpatterns  # noqa: E402

from .app import build  # noqa: E402
from .edge import daphne  # noqa: E402
from .edge.api import api_routes  # noqa: E402
from .edge.edge import Edge  # noqa: E402

gateway = build(settings, api_routes())

application = Edge(
    gateway,
    pages=django_app,  # admin, dashboard, static files: Django's full stack
    # Django's path() gives URLPatterns; channels' stubs name those that hold ASGI apps a type of their own.
    sockets=AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),  # type: ignore[arg-type]
)
daphne.adopt(application)  # under Daphne: SIGTERM drains, request heads bounded; elsewhere nothing
