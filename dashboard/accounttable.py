"""The accounts page's table: which accounts, in which order, which page of them, from the querystring.

Sorting, filtering and paging happen in the database, so the page costs the same at 500 accounts
as at 5; only the page's accounts get window figures and sparklines (``stats`` by account ids).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django import forms
from django.core.paginator import Page, Paginator
from django.db.models import Count, F, OrderBy, QuerySet, Sum

from accounts import formats
from accounts.models import Account, Provider

from .templatetags.dash import num

PER_PAGE = 50

# Sort key → columns; nulls (no balance, never used) sort last either way.
SORTS: dict[str, tuple[str, ...]] = {
    "provider": ("provider__name", "label"),
    "status": ("status", "provider__name", "label"),
    "balance": ("balance",),
    "requests": ("requests",),
    "errors": ("errors",),
    "last_used": ("last_used_at",),
}
DEFAULT_SORT = "provider"


class AccountQuery(forms.Form):
    sort = forms.ChoiceField(required=False, choices=[(k, k) for k in SORTS])
    desc = forms.BooleanField(required=False)
    provider = forms.CharField(required=False)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *Account.STATUS_CHOICES])
    q = forms.CharField(required=False, max_length=100, label="Label contains")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = Provider.objects.order_by("name").values_list("name", flat=True)
        self.fields["provider"] = forms.ChoiceField(
            required=False, choices=[("", "any provider"), *((n, n) for n in names)])

    def criteria(self) -> dict[str, Any]:
        """The valid filters and sort; a value that is not valid is dropped (the page says so)."""

        self.is_valid()
        return {name: self.cleaned_data.get(name) for name in self.fields if name not in self.errors}


def accounts(criteria: dict[str, Any]) -> QuerySet[Account]:
    qs = Account.objects.select_related("provider")
    if criteria.get("provider"):
        qs = qs.filter(provider__name=criteria["provider"])
    if criteria.get("status"):
        qs = qs.filter(status=criteria["status"])
    if criteria.get("q"):
        qs = qs.filter(label__icontains=criteria["q"])
    desc = bool(criteria.get("desc"))
    columns = SORTS[criteria.get("sort") or DEFAULT_SORT]
    order: list[OrderBy] = [F(c).desc(nulls_last=True) if desc else F(c).asc(nulls_last=True) for c in columns]
    return qs.order_by(*order, "pk")


def page(qs: QuerySet[Account], number: str | None) -> Page[Account]:
    # A page past the end or not a number shows the nearest real page, never a 404.
    return Paginator(qs, PER_PAGE).get_page(number)


@dataclass
class ProviderSummary:
    name: str
    by_status: dict[str, int]
    balance: Decimal | None

    @property
    def total(self) -> int:
        return sum(self.by_status.values())

    def fields(self) -> dict[str, str]:
        """The summary row's cells as displayed (``data-field`` names on the accounts page)."""

        return {"accounts": num(self.total), **{status: num(n) for status, n in self.by_status.items()},
                "balance": formats.money(self.balance)}


def summary(provider_ids: list[int] | None = None) -> list[ProviderSummary]:
    """Per provider (all, or these): its accounts by status and their total balance (one grouped query)."""

    out: dict[str, ProviderSummary] = {}
    accounts = Account.objects.all() if provider_ids is None else Account.objects.filter(provider_id__in=provider_ids)
    rows = (accounts.values("provider__name", "status")
            .annotate(n=Count("id"), balance=Sum("balance")).order_by("provider__name"))
    for row in rows:
        s = out.setdefault(row["provider__name"], ProviderSummary(
            row["provider__name"], {status: 0 for status, _ in Account.STATUS_CHOICES}, None))
        s.by_status[row["status"]] = row["n"]
        if row["balance"] is not None:
            s.balance = (s.balance or Decimal(0)) + row["balance"]
    return list(out.values())
