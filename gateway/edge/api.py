"""The API's route table: which view serves which path, in which protocol's envelope.

Kept apart from the table's machinery (``gateway.edge.routes``) so that the app object, which holds a
table, never imports the views, which take the app object.
"""

from __future__ import annotations

from ..endpoints import managed, oauth, orgadmin, stored, telemetry, usage, views
from ..endpoints import websocket as responses_socket
from .routes import Route, RouteTable

POST, GET = frozenset({"POST"}), frozenset({"GET", "HEAD"})
GET_DELETE = GET | {"DELETE"}
GET_POST = GET | POST


def api_routes() -> RouteTable:
    return RouteTable([
        Route("/v1/chat/completions", views.chat_completions, "openai_chat", POST),
        Route("/v1/messages", views.messages, "anthropic", POST),
        Route("/v1/messages/count_tokens", views.count_tokens, "anthropic", POST),
        Route("/v1/responses", views.responses, "responses", POST, socket=responses_socket.serve),
        Route("/v1/responses/compact", views.responses_compact, "responses", POST),
        Route("/v1/responses/{response_id}", stored.response, "responses", GET_DELETE),
        Route("/v1/responses/{response_id}/input_items", stored.input_items, "responses", GET),
        Route("/v1/responses/{response_id}/cancel", stored.cancel, "responses", POST),
        Route("/v1/models", views.models, "openai_chat", GET),
        Route("/v1/models/{model_id...}", views.model, "openai_chat", GET),
        # Claude Code's gateway protocol: the sign-in's machine endpoints (the verification page is a
        # page: signin.urls) and the signed-in developer's managed settings.
        Route("/.well-known/oauth-authorization-server", oauth.metadata, None, GET),
        Route("/oauth/device_authorization", oauth.device_authorization, None, POST),
        Route("/oauth/token", oauth.token, None, POST),
        Route("/oauth/revoke", oauth.revoke, None, POST),
        Route("/managed/settings", managed.managed_settings, "anthropic", GET),
        Route("/v1/organizations/spend_limits", orgadmin.spend_limits, "anthropic", GET_POST),
        Route("/v1/organizations/spend_limits/{limit_id}", orgadmin.spend_limit, "anthropic", GET_DELETE),
        Route("/v1/organizations/analytics/cost", orgadmin.cost, "anthropic", GET),
        Route("/v1/metrics", telemetry.metrics, "anthropic", POST),
        Route("/v1/logs", telemetry.logs, "anthropic", POST),
        Route("/v1/traces", telemetry.traces, "anthropic", POST),
        Route("/api/oauth/usage", usage.oauth_usage, "anthropic", GET),
        Route("/healthz", views.healthz, None, GET, served_when_stopping=True),
        Route("/readyz", views.readyz, None, GET),
        Route("/metrics", views.metrics, None, GET),
    ])
