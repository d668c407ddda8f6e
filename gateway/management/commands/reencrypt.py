"""``python manage.py reencrypt``: write everything the gateway keeps encrypted again under the current key.

After ``GATEWAY_ENCRYPTION_KEY`` changes (the old value moved to ``GATEWAY_ENCRYPTION_OLD_KEYS``): the
upstream keys, the stored Responses answers and the logged request and response bodies are read with
whichever key they were written under and written under the current one; then the old value can go
(``atrest`` describes the key management). Rows kept in plain text are encrypted on the way. Safe to
run again, and while the gateway serves.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

import atrest
from accounts import secrets
from accounts.models import Account, RequestLog
from conversations.models import StoredResponse


class Command(BaseCommand):
    help = "Encrypt upstream keys, stored answers and logged bodies again under the current key."

    def handle(self, *args: Any, **options: Any) -> None:
        ring = atrest.keyring(secrets.PURPOSE)
        accounts = 0
        with transaction.atomic():
            for pk, token in Account.objects.values_list("pk", "secret_encrypted"):
                Account.objects.filter(pk=pk).update(secret_encrypted=ring.rotate(token.encode()).decode())
                accounts += 1
        answers = atrest.reencrypt(StoredResponse, ["input_items", "response"])
        bodies = atrest.reencrypt(RequestLog, ["request_body", "response_body"])
        self.stdout.write(f"encrypted again under the current key: {accounts} upstream keys, {answers} stored "
                          f"answers, {bodies} request-log rows with bodies")
