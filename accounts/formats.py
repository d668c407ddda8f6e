"""How staff pages write a time and an amount of money: one place, used by the dashboard's filters
(``dash.when``, ``dash.money``), its live updates (a cell patched over the websocket reads exactly like
the one rendered on reload) and the admin's lists."""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal

from django.utils import timezone

NONE = "—"
CENT = Decimal("0.01")
# when()'s shape in Django's date format language: the admin's lists, change forms and every template
# ``|date`` without a format write times this way (``accounts.formatlocale``, FORMAT_MODULE_PATH).
DJANGO_DATETIME = "Y-m-d H:i:s T"
DJANGO_DATE = "Y-m-d"
DJANGO_TIME = "H:i:s"


def when(value: dt.datetime | None) -> str:
    """``2026-11-25 07:12:37 UTC``: to the second, in the site's zone, the zone named."""

    if value is None:
        return NONE
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return value.strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()


def short_when(value: dt.datetime | None) -> str:
    """``11-25 07:12:37 UTC``: a list cell's time, the year left to the record's own page."""

    return NONE if value is None else when(value)[5:]


def amount(value: Decimal | float | int | str | None) -> str:
    """An amount in a form's input: the digits that mean something, at least the cents, no dollar sign
    (``56.37``, ``0.50``, ``0.0004``, not ``56.37000000``), so that it reads back as the same value."""

    if value is None or value == "":
        return ""
    number = Decimal(str(value))
    text = f"{number:f}"
    whole, dot, frac = text.partition(".")
    frac = frac.rstrip("0").ljust(2, "0")
    return f"{whole}.{frac}"


def money(value: Decimal | float | int | str | None) -> str:
    """``$1,234.57`` from a dollar up; below it two significant digits, never fewer than the cents
    (``$0.50``, ``$0.021``, ``$0.0004``), so a cheap request's cost or a small budget does not
    read as nothing or as a rounded neighbour."""

    if value is None or value == "":
        return NONE
    amount = Decimal(str(value))
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    if amount == 0 or amount >= 1:
        return f"{sign}${amount.quantize(CENT, ROUND_HALF_UP):,}"
    places = max(2, -amount.adjusted() + 1)
    shown = f"{amount.quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP):f}"
    whole, _, frac = shown.partition(".")
    frac = frac.rstrip("0").ljust(2, "0")
    return f"{sign}${whole}.{frac}"
