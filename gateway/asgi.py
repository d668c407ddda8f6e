"""ASGI entry point: HTTP through Django (behind the body-size guard), websockets for the dashboard."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from dashboard.routing import websocket_urlpatterns  # noqa: E402

from .api_handler import ApiASGIHandler, SplitByPath  # noqa: E402
from .bodylimit import BodyLimit, guard_daphne  # noqa: E402
from .shutdown import Drain, stop_gracefully_on_signals  # noqa: E402

guard_daphne()  # under Daphne, oversized bodies are refused as they arrive, not once buffered

drain = Drain(BodyLimit(SplitByPath(ApiASGIHandler(), django_app)))
stop_gracefully_on_signals(drain)  # SIGTERM lets open requests end cleanly, each with its log row

application = ProtocolTypeRouter({
    "http": drain,
    "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
