"""The organization admin API, in the shape of Anthropic's: spend limits (``accounts.spendlimits``) and
the cost report (``accounts.costreport``), for automation.

Authenticated by an admin key (``accounts.AdminKey``, made in the Django admin) in ``x-api-key``
(or ``Authorization: Bearer``): a ``read`` key lists, a ``write`` key also sets and removes, and
every change is an audit row (``accounts.AdminAuditEvent``, shown in the admin). Client keys and
bearer tokens are no admin keys: they get 401 here. Errors in Anthropic's envelope.
"""

from __future__ import annotations

import datetime as dt
import hmac
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from django.utils import timezone

from accounts.db import DatabaseUnavailable, hop
from accounts.secrets import hash_admin_key

from ..edge.request import ApiRequest
from ..edge.responses import ApiResponse, error_response, json_response
from ..errors import AuthenticationFailed, GatewayError, InvalidRequest, NotFound, PermissionDenied, unavailable
from .auth import presented_key
from .views import json_object

if TYPE_CHECKING:
    from ..app import Gateway

T = TypeVar("T")
ENVELOPE = "anthropic"


def admin_actor(plain: str, write: bool) -> str:
    """The acting admin key's ``"admin-key:<name>"`` (sync), or AuthenticationFailed / PermissionDenied."""

    from accounts.models import AdminKey

    digest = hash_admin_key(plain)
    key = AdminKey.objects.filter(key_hash=digest, active=True).first()
    if key is None or not hmac.compare_digest(key.key_hash, digest):
        raise AuthenticationFailed("missing or invalid admin credentials: send an admin key in x-api-key")
    if write and key.scope != AdminKey.WRITE:
        raise PermissionDenied("requires write:spend_limits: this admin key may only read")
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > dt.timedelta(minutes=1):
        AdminKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return f"admin-key:{key.name}"


async def _serve(request: ApiRequest, write: bool, act: Callable[[str], T]) -> ApiResponse:
    """``act(actor)`` on a worker thread for an admin key that may (``write``: change things)."""

    from accounts.spendlimits import SpendLimitError

    plain = presented_key(request, allow_x_api_key=True)

    def run() -> T:
        if not plain:
            raise AuthenticationFailed("missing or invalid admin credentials: send an admin key in x-api-key")
        return act(admin_actor(plain, write))

    try:
        result = await hop(run)
    except SpendLimitError as exc:
        err: GatewayError = InvalidRequest(exc.message) if exc.status == 400 else NotFound(exc.message)
        return error_response(ENVELOPE, err)
    except GatewayError as exc:
        return error_response(ENVELOPE, exc)
    except DatabaseUnavailable as exc:
        return error_response(ENVELOPE, unavailable(exc))
    return json_response(result, headers={"Cache-Control": "no-store"})


def _int(request: ApiRequest, name: str, default: int) -> int:
    value = request.params.get(name)
    try:
        number = int(value) if value is not None else default
    except ValueError:
        number = 0
    if not 1 <= number <= 1000:
        raise InvalidRequest(f"{name}: must be between 1 and 1000")
    return number


async def spend_limits(gw: Gateway, request: ApiRequest) -> ApiResponse:
    from accounts import spendlimits

    if request.method == "POST":
        try:
            body: Any = json_object(request.body, "request body")
        except GatewayError as err:
            return error_response(ENVELOPE, err)
        response = await _serve(request, True, lambda actor: spendlimits.set_limit(body, actor))
        if response.status == 200:
            gw.config.invalidate()  # this process enforces the new cap on its next request
        return response
    try:
        limit = _int(request, "limit", 20)
    except GatewayError as err:
        return error_response(ENVELOPE, err)
    q = request.params
    return await _serve(request, False, lambda actor: spendlimits.list_limits(
        q.get("scope_type"), limit, q.get("after_id"), q.get("before_id")))


async def spend_limit(gw: Gateway, request: ApiRequest, limit_id: str) -> ApiResponse:
    from accounts import spendlimits

    if request.method == "DELETE":
        response = await _serve(request, True, lambda actor: spendlimits.delete_limit(limit_id, actor))
        if response.status == 200:
            gw.config.invalidate()
        return response
    return await _serve(request, False, lambda actor: spendlimits.get_limit(limit_id))


async def cost(gw: Gateway, request: ApiRequest) -> ApiResponse:
    from accounts.costreport import cost_report

    query = request.param_lists()
    return await _serve(request, False, lambda actor: cost_report(query, timezone.now()))
