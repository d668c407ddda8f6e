"""Spend limits in the shape of Anthropic's admin API (``/v1/organizations/spend_limits``), mapped
onto the budgets the gateway already enforces.

A spend limit is one USD budget field of a developer's own client key (``scope: user``, the key
whose ``user`` is that Django user, named by username) or of a team (``scope: rbac_group``, named
by the team's name). The periods are the rolling windows of those fields:

========== ======================= =====================================
period     field                   counted over
========== ======================= =====================================
``daily``  ``usd_budget_day``      any 24 hours (up to 30 minutes more)
``weekly`` ``usd_budget_week``     any 7 days (up to 3 hours more)
``monthly````usd_budget_month``    any 30 days (up to 12 hours more)
========== ======================= =====================================

The 5-hour budget has no period in Anthropic's shape: it is set in the Django admin only and not
listed here. ``amount`` is a whole number of US cents, as a string, on the way in; on the way out
the budget's cents, as a string (with decimals when a budget set in the admin has fractions of a
cent). An organization-wide limit (``scope: organization``) has no field to map onto and is refused.

A limit's id names what it is: ``spl_user_<key id>_<period>``, ``spl_group_<team id>_<period>``.
Each change is written with its audit row (``AdminAuditEvent``: who, before, after) in one
transaction. Synchronous ORM code: the gateway calls it through ``accounts.db.hop``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from .models import AdminAuditEvent, ApiKey, Team
from .secrets import new_client_key

PERIODS = {"daily": "usd_budget_day", "weekly": "usd_budget_week", "monthly": "usd_budget_month"}
_ID = re.compile(r"^spl_(user|group)_(\d{1,18})_(daily|weekly|monthly)$")
_CENTS = re.compile(r"^\d{1,12}$")
HUNDRED = Decimal(100)


class SpendLimitError(Exception):
    """A request the API refuses: ``status`` 400 (bad input) or 404 (nothing by that name)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Owner:
    kind: str  # "user" | "group"
    obj: Any  # the ApiKey (user) or Team (group)

    @property
    def scope(self) -> dict[str, str]:
        if self.kind == "user":
            return {"type": "user", "user_id": self.obj.user.get_username()}
        return {"type": "rbac_group", "rbac_group_id": self.obj.name}

    def limit_id(self, period: str) -> str:
        return f"spl_{self.kind}_{self.obj.pk}_{period}"


def cents_text(usd: Decimal) -> str:
    return f"{(usd * HUNDRED).normalize():f}"


def _document(owner: Owner, period: str, usd: Decimal) -> dict[str, Any]:
    limit_id = owner.limit_id(period)
    events = AdminAuditEvent.objects.filter(target=limit_id).order_by("created_at", "id")
    first, last = events.first(), events.last()
    created = first.created_at if first is not None else owner.obj.created_at
    updated = last.created_at if last is not None else created
    return {"type": "spend_limit", "id": limit_id, "created_at": _iso(created), "updated_at": _iso(updated),
            "scope": owner.scope, "amount": cents_text(usd), "currency": "USD", "period": period}


def _iso(when: Any) -> str:
    return str(when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def _limits_of(owner: Owner) -> list[dict[str, Any]]:
    return [_document(owner, period, getattr(owner.obj, field)) for period, field in PERIODS.items()
            if getattr(owner.obj, field) is not None]


def _owners(scope_type: str | None) -> list[Owner]:
    owners: list[Owner] = []
    if scope_type in (None, "user"):
        keys = ApiKey.objects.filter(user__isnull=False).select_related("user").order_by("pk")
        owners += [Owner("user", k) for k in keys]
    if scope_type in (None, "rbac_group"):
        owners += [Owner("group", t) for t in Team.objects.order_by("pk")]
    return owners


def list_limits(scope_type: str | None, limit: int, after_id: str | None, before_id: str | None) -> dict[str, Any]:
    if scope_type not in (None, "user", "rbac_group", "organization"):
        raise SpendLimitError(400, "scope_type: must be one of organization, rbac_group, user")
    if after_id is not None and before_id is not None:
        raise SpendLimitError(400, "after_id and before_id are mutually exclusive")
    rows = [] if scope_type == "organization" else [d for o in _owners(scope_type) for d in _limits_of(o)]
    ids = [row["id"] for row in rows]
    if after_id is not None or before_id is not None:
        mark = after_id if after_id is not None else before_id
        if mark not in ids:
            raise SpendLimitError(400, f"{'after_id' if after_id is not None else 'before_id'}: no spend limit "
                                       "with this id")
        at = ids.index(mark)
        rows = rows[at + 1:] if after_id is not None else rows[:at][::-1]
    page, more = rows[:limit], len(rows) > limit
    if before_id is not None:
        page = page[::-1]
    return {"data": page, "has_more": more, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None}


def _owner_by_id(limit_id: str) -> tuple[Owner, str]:
    found = _ID.match(limit_id)
    if found is None:
        raise SpendLimitError(404, "spend limit not found")
    kind, pk, period = found.groups()
    if kind == "user":
        key = ApiKey.objects.filter(pk=int(pk), user__isnull=False).select_related("user").first()
        if key is None:
            raise SpendLimitError(404, "spend limit not found")
        return Owner("user", key), period
    team = Team.objects.filter(pk=int(pk)).first()
    if team is None:
        raise SpendLimitError(404, "spend limit not found")
    return Owner("group", team), period


def get_limit(limit_id: str) -> dict[str, Any]:
    owner, period = _owner_by_id(limit_id)
    usd = getattr(owner.obj, PERIODS[period])
    if usd is None:
        raise SpendLimitError(404, "spend limit not found")
    return _document(owner, period, usd)


def _owner_of_scope(scope: Any) -> Owner:
    if not isinstance(scope, dict) or not isinstance(scope.get("type"), str):
        raise SpendLimitError(400, "scope: Required")
    kind = scope["type"]
    if kind == "organization":
        raise SpendLimitError(400, "scope: an organization-wide limit is not supported by this gateway; set one "
                                   "per rbac_group (team) or per user")
    if kind == "rbac_group":
        name = scope.get("rbac_group_id")
        if not isinstance(name, str) or not name:
            raise SpendLimitError(400, "scope.rbac_group_id: Required")
        team = Team.objects.filter(name=name).first()
        if team is None:
            raise SpendLimitError(400, f"scope.rbac_group_id: no team named {name[:100]!r}")
        return Owner("group", team)
    if kind == "user":
        username = scope.get("user_id")
        if not isinstance(username, str) or not username:
            raise SpendLimitError(400, "scope.user_id: Required")
        user = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: username}).first()
        if user is None:
            raise SpendLimitError(400, f"scope.user_id: no user named {username[:100]!r}")
        key = ApiKey.objects.filter(user=user).select_related("user").first()
        if key is None:
            # The developer's own key, made now so that the cap is in place before they first sign in.
            key = ApiKey(name=_free_key_name(username), user=user)
            key.set_key(new_client_key())  # a secret nobody is told: their sign-ins act as this key
            key.save()
        return Owner("user", key)
    raise SpendLimitError(400, "scope.type: must be one of user, rbac_group, organization")


def _free_key_name(username: str) -> str:
    base = f"user:{username}"[:90]
    name, n = base, 1
    while ApiKey.objects.filter(name=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _amount(value: Any) -> Decimal:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    if not isinstance(value, str) or not _CENTS.match(value):
        raise SpendLimitError(400, "amount: must be a whole-number decimal string of cents")
    return Decimal(value) / HUNDRED


def set_limit(body: Any, actor: str) -> dict[str, Any]:
    """Create or replace the limit of ``body["scope"]`` for ``body["period"]`` (default monthly)."""

    if not isinstance(body, dict):
        raise SpendLimitError(400, "the request body must be a JSON object")
    period = body.get("period", "monthly")
    if period not in PERIODS:
        raise SpendLimitError(400, "period: must be one of daily, weekly, monthly")
    if body.get("currency", "USD") != "USD":
        raise SpendLimitError(400, "currency: must be USD")
    if "amount" not in body:
        raise SpendLimitError(400, "amount: Required")
    usd = _amount(body["amount"])
    with transaction.atomic():
        owner = _owner_of_scope(body.get("scope"))
        obj = type(owner.obj).objects.select_for_update().get(pk=owner.obj.pk)
        owner = Owner(owner.kind, obj if owner.kind == "group" else _with_user(obj, owner.obj))
        field = PERIODS[period]
        before = getattr(obj, field)
        setattr(obj, field, usd)
        obj.save(update_fields=[field])
        limit_id = owner.limit_id(period)
        AdminAuditEvent.objects.create(
            actor=actor, action="spend_limit.upsert", target=limit_id,
            before=None if before is None else _audit(owner, period, before), after=_audit(owner, period, usd))
        return _document(owner, period, usd)


def _with_user(locked: ApiKey, read: ApiKey) -> ApiKey:
    locked.user = read.user  # the locked row, with the user already read
    return locked


def delete_limit(limit_id: str, actor: str) -> dict[str, Any]:
    with transaction.atomic():
        owner, period = _owner_by_id(limit_id)
        field = PERIODS[period]
        obj = type(owner.obj).objects.select_for_update().get(pk=owner.obj.pk)
        before = getattr(obj, field)
        if before is None:
            raise SpendLimitError(404, "spend limit not found")
        setattr(obj, field, None)
        obj.save(update_fields=[field])
        AdminAuditEvent.objects.create(actor=actor, action="spend_limit.delete", target=limit_id,
                                       before=_audit(owner, period, before), after=None)
    return {"type": "spend_limit_deleted", "id": limit_id}


def _audit(owner: Owner, period: str, usd: Decimal) -> dict[str, Any]:
    return {"scope": owner.scope, "period": period, "amount": cents_text(usd), "currency": "USD"}
