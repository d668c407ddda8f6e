"""Request-log search: the filter form and keyset pagination.

Pages are cut by (created_at, id) rather than by OFFSET, newest first, so page
1,000 costs what page 1 does; every filter keeps the ``created_at`` ordering,
which the (x, created_at) indexes on the log serve without sorting.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from django import forms
from django.db.models import F, Q, QuerySet

from accounts.models import PROTOCOL_CHOICES, Account, ApiKey, Provider, RequestLog
from accounts.outcomes import ErrorClass

PAGE_SIZE = 50
ATTEMPTED_AT = "attempted_at"  # the account filter's time column (``attempted``)
NAME_LIST_ID = "account-names"  # the account box's datalist
MATCHES_SHOWN = 5
_STATUS = re.compile(r"^\s*(?:(?P<code>[1-5]\d\d)|(?P<cls>[1-5])xx|(?P<error>errors?))\s*$", re.I)


class RequestFilter(forms.Form):
    since = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    until = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    # A search box, not a select of every account (500 options nobody can scroll): part of a name
    # finds the account, the datalist offers the names as one types.
    account = forms.CharField(required=False, max_length=202, help_text="Every request it was attempted in",
                              widget=forms.TextInput(attrs={"list": NAME_LIST_ID, "placeholder": "name or part of it",
                                                            "autocomplete": "off"}))
    provider = forms.ModelChoiceField(Provider.objects.order_by("name"), required=False)
    client_key = forms.ModelChoiceField(ApiKey.objects.order_by("name"), required=False, label="Client key")
    model = forms.CharField(required=False, max_length=200, help_text="Model asked for (exact)")
    status = forms.CharField(required=False, max_length=10, help_text="e.g. 429, 5xx or error")
    protocol = forms.ChoiceField(choices=[("", "any"), *PROTOCOL_CHOICES], required=False,
                                 label="Client protocol")
    # Not "error_class": that name is the form's own (the class of its error lists).
    error = forms.ChoiceField(choices=[("", "any"), *ErrorClass.choices[1:]], required=False, label="Error class")
    stream = forms.ChoiceField(choices=[("", "any"), ("yes", "streaming"), ("no", "not streaming")],
                               required=False)
    min_cost = forms.DecimalField(required=False, min_value=0, max_digits=20, decimal_places=8,
                                  label="Cost at least (USD)", widget=forms.NumberInput(attrs={"step": "any"}))

    def clean_account(self) -> Account | None:
        return find_account(self.cleaned_data.get("account") or "")

    def clean_status(self) -> str:
        value: str = self.cleaned_data.get("status") or ""
        if value and not _STATUS.match(value):
            raise forms.ValidationError("Use a code (429), a class (5xx) or 'error'")
        return value.strip()


def account_names() -> list[str]:
    """Every account's name, for the account box's datalist (one query)."""

    return [f"{p}/{label}" for p, label in
            Account.objects.order_by("provider__name", "label").values_list("provider__name", "label")]


def find_account(text: str) -> Account | None:
    """The account a search names: its whole name (provider/label), its label, its id (the links of
    the admin and of older pages), else the one account whose name contains the text. None for no text;
    a text that names none, or several, is an error that says which."""

    term = text.strip()
    if not term:
        return None
    accounts = Account.objects.select_related("provider").order_by("provider__name", "label")
    provider, _, label = term.partition("/")
    exact = (list(accounts.filter(provider__name=provider, label=label)[:1]) if label else []) or \
        list(accounts.filter(label__iexact=term)[:2])
    if len(exact) == 1:
        return exact[0]
    if not exact and term.isdigit() and (by_id := accounts.filter(pk=int(term)).first()):
        return by_id
    part = (Q(provider__name__icontains=provider, label__icontains=label) if label
            else Q(label__icontains=term) | Q(provider__name__icontains=term))
    found = exact or list(accounts.filter(part)[:MATCHES_SHOWN + 1])
    if len(found) == 1:
        return found[0]
    if not found:
        raise forms.ValidationError(f"No account's name contains {term!r}")
    names = ", ".join(str(a) for a in found[:MATCHES_SHOWN]) + (", …" if len(found) > MATCHES_SHOWN else "")
    raise forms.ValidationError(f"Several accounts match {term!r} ({names}): type more of the name")


def apply(qs: QuerySet[RequestLog], data: dict[str, Any]) -> QuerySet[RequestLog]:
    """The log narrowed by a valid filter form's cleaned data."""

    if data.get("since"):
        qs = qs.filter(created_at__gte=data["since"])
    if data.get("until"):
        qs = qs.filter(created_at__lt=data["until"])
    if data.get("account") is not None:
        qs = attempted(qs, data["account"])
    for name in ("provider", "client_key"):
        if data.get(name) is not None:
            qs = qs.filter(**{name: data[name]})
    if data.get("model"):
        qs = qs.filter(model_requested=data["model"])
    if data.get("protocol"):
        qs = qs.filter(client_protocol=data["protocol"])
    if data.get("error"):
        # The redundant "not empty" lets SQLite use the partial (error_class, created_at) index too.
        qs = qs.filter(error_class=data["error"]).exclude(error_class="")
    if data.get("stream"):
        qs = qs.filter(stream=data["stream"] == "yes")
    if data.get("min_cost") is not None:
        qs = qs.filter(cost__gte=data["min_cost"])  # unpriced requests (no cost) are left out
    match = _STATUS.match(data.get("status") or "")
    if match and match["code"]:
        qs = qs.filter(status=int(match["code"]))
    elif match and match["cls"]:
        base = int(match["cls"]) * 100
        qs = qs.filter(status__gte=base, status__lt=base + 100)
    elif match and match["error"]:
        qs = qs.filter(~Q(status__gte=200, status__lt=300) | ~Q(error_class=""))
    return qs


def attempted(qs: QuerySet[RequestLog], account: Any) -> QuerySet[RequestLog]:
    """The requests in which ``account`` was attempted: those it answered, and those it failed and
    that went on to another account or ended there (``RequestAttempt``: its (account, created_at)
    index serves the account's requests newest first, whatever the size of the log)."""

    # Ordered and cut by the attempt's own created_at (the request's): PostgreSQL then walks the
    # account's attempts newest first and fetches their rows (1.5 ms at 500,000 rows); ordered by
    # the log's created_at it walked the log probing each row's attempts (150 ms, and the whole log
    # for an account rarely tried).
    return qs.filter(attempt_rows__account=account).annotate(**{ATTEMPTED_AT: F("attempt_rows__created_at")})


@dataclass
class Page:
    rows: list[RequestLog]
    next_cursor: str | None


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICRO = dt.timedelta(microseconds=1)


def encode_cursor(row: RequestLog) -> str:
    """The last row shown, exactly: integer microseconds (a float would round them) and the id."""

    return f"{(row.created_at - _EPOCH) // _MICRO}_{row.pk}"


def decode_cursor(cursor: str | None) -> tuple[dt.datetime, int] | None:
    """(created_at, id) of the last row shown, or None for the first page (also for garbage)."""

    try:
        micros, pk = (cursor or "").split("_", 1)
        return _EPOCH + int(micros) * _MICRO, int(pk)
    except (ValueError, OverflowError):
        return None


def time_column(qs: QuerySet[RequestLog]) -> str:
    """What the pages are ordered and cut by: the log's created_at, or the same time on the attempt
    an account filter joined (``attempted``)."""

    return ATTEMPTED_AT if ATTEMPTED_AT in qs.query.annotations else "created_at"


def older_than(qs: QuerySet[RequestLog], at: dt.datetime, pk: int) -> QuerySet[RequestLog]:
    """The rows after (``at``, ``pk``) in the log's newest-first order."""

    # "<= at" is the index range; the rows sharing the timestamp are cut by id.
    column = time_column(qs)
    return qs.filter(**{f"{column}__lte": at}).exclude(**{column: at, "id__gte": pk})


def page(qs: QuerySet[RequestLog], cursor: str | None, size: int = PAGE_SIZE) -> Page:
    after = decode_cursor(cursor)
    if after is not None:
        qs = older_than(qs, *after)
    rows = list(qs.select_related("account", "provider").order_by(f"-{time_column(qs)}", "-id")[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows, encode_cursor(rows[-1]) if more and rows else None)

