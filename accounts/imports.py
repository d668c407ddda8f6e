"""Bulk import of upstream accounts (the admin's "Import accounts" page).

Input is text: one key per line, or CSV lines ``label,key[,balance]`` (a
``label,key,balance`` header and ``#`` comments are skipped). A labelled row
updates the provider's account of that label; a bare key updates the account
that already holds that key, so pasting the same list twice adds nothing. New
bare keys get the next free ``<prefix>-<n>`` label. A balance in the file is an opening balance: an
existing account's balance is live (spent by requests, set by ops) and only replaced when
``reset_balances`` asks for it.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from django.db import transaction

from . import configversion
from .models import Account, Provider

MAX_ROWS = 10_000
LABEL_MAX = Account._meta.get_field("label").max_length or 100


class ImportProblem(ValueError):
    pass


@dataclass(frozen=True)
class ImportRow:
    label: str | None
    key: str
    balance: Decimal | None


@dataclass(frozen=True)
class ImportResult:
    created: int
    updated: int
    unchanged: int


def parse(text: str) -> list[ImportRow]:
    rows: list[ImportRow] = []
    reader = csv.reader(io.StringIO(text))
    for fields in reader:
        n = reader.line_num
        fields = [f.strip() for f in fields]
        if not any(fields) or fields[0].startswith("#"):
            continue
        if len(fields) == 1:
            rows.append(ImportRow(None, _key(fields[0], n), None))
        elif fields[0].lower() == "label" and fields[1].lower() == "key":
            continue  # header line
        elif len(fields) > 3:
            raise ImportProblem(f"line {n}: expected label,key,balance — got {len(fields)} fields")
        else:
            label = fields[0] or None
            if label and len(label) > LABEL_MAX:
                raise ImportProblem(f"line {n}: the label is longer than {LABEL_MAX} characters")
            rows.append(ImportRow(label, _key(fields[1], n), _balance(fields[2] if len(fields) > 2 else "", n)))
        if len(rows) > MAX_ROWS:
            raise ImportProblem(f"more than {MAX_ROWS} accounts in one import; split the file")
    if not rows:
        raise ImportProblem("no keys found")
    return rows


def _key(value: str, n: int) -> str:
    # Never echo the value: it is a secret.
    if not value:
        raise ImportProblem(f"line {n}: the key is empty")
    if any(c.isspace() for c in value):
        raise ImportProblem(f"line {n}: the key contains whitespace")
    return value


def _balance(value: str, n: int) -> Decimal | None:
    if not value:
        return None
    try:
        balance = Decimal(value)
    except InvalidOperation:
        raise ImportProblem(f"line {n}: balance '{value[:20]}' is not a number") from None
    if not balance.is_finite():
        raise ImportProblem(f"line {n}: balance '{value[:20]}' is not a number")
    return balance


@transaction.atomic
def import_accounts(provider: Provider, rows: list[ImportRow], label_prefix: str = "acct",
                    reset_balances: bool = False) -> ImportResult:
    existing = list(Account.objects.filter(provider=provider))
    by_label = {a.label: a for a in existing}
    by_key: dict[str, Account] = {}
    for a in existing:
        try:
            by_key.setdefault(a.get_secret(), a)
        except ValueError:
            pass  # encrypted under an older key: it can still be matched by label
    new: list[Account] = []
    changed: dict[int, Account] = {}
    matched: set[int] = set()
    next_n = 1
    for row in rows:
        account = by_label.get(row.label) if row.label else by_key.get(row.key)
        if account is None:
            label = row.label
            if label is None:
                while f"{label_prefix}-{next_n}" in by_label:
                    next_n += 1
                label = f"{label_prefix}-{next_n}"
            account = Account(provider=provider, label=label)
            new.append(account)
            by_label[label] = account
        elif account.pk is not None:
            matched.add(account.pk)
        dirty = False
        if account.pk is None or account.get_secret() != row.key:
            account.set_secret(row.key)
            by_key[row.key] = account
            dirty = True
        if row.balance is not None and account.balance != row.balance and opening_balance(account, reset_balances):
            account.balance = row.balance
            dirty = True
        if dirty and account.pk is not None:
            changed[account.pk] = account
    Account.objects.bulk_create(new, batch_size=500)
    Account.objects.bulk_update(list(changed.values()), ["secret_encrypted", "key_hint", "balance"], batch_size=500)
    if new or changed:
        configversion.bump()  # bulk writes send no save signals
    return ImportResult(created=len(new), updated=len(changed), unchanged=len(matched - set(changed)))


def opening_balance(account: Account, reset_balances: bool) -> bool:
    """Whether a balance from a file may be written to ``account``: a new account, one without a
    balance, or a reset asked for. The one rule for loadconfig and the admin's import."""

    return account.pk is None or account.balance is None or reset_balances
