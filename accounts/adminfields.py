"""Admin fields that write money the project's one way: the client keys', teams' and accounts' admins use them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin

from .formats import amount, money


def money_column(field: str, description: str) -> Callable[[Any], str]:
    """A list column of an amount of dollars as the project writes money (``$0.50``, not the column's
    ``0.500000``): for the budgets of client keys and teams as for balances and costs."""

    @admin.display(description=description, ordering=field)
    def column(obj: Any) -> str:
        return money(getattr(obj, field))

    column.__name__ = f"{field}_in_dollars"
    return column


class AmountInput(forms.NumberInput):
    """A dollar amount in a form: ``56.37``, not the column's eight places (``56.37000000``)."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__({"step": "any", **(attrs or {})})

    def format_value(self, value: Any) -> str | None:
        return amount(value) or None
