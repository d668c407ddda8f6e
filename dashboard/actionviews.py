"""The account actions' endpoints: POST forms with the CSRF token, staff only; each goes back to the page
it was sent from with what came of it on the account's row (``actions``)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts import testnow
from accounts.db import hop
from accounts.models import Account

from . import actions
from .security import staff_page


def _back(request: HttpRequest, account: Account) -> HttpResponseRedirect:
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
        back = reverse("dashboard:account", args=[account.pk])
    return HttpResponseRedirect(f"{back}#account-{account.pk}")


def _user_id(request: HttpRequest, user: Any = None) -> int:
    pk = (user or request.user).pk
    assert pk is not None  # staff_page let only a signed-in staff user through
    return int(pk)


def _account(pk: int) -> Account:
    return get_object_or_404(Account.objects.select_related("provider"), pk=pk)


@staff_page
@require_POST
def enable(request: HttpRequest, pk: int) -> HttpResponse:
    account = _account(pk)
    if actions.enable(_user_id(request), account):
        actions.tell(request, account, "enabled: back in the pool")
    else:
        actions.tell(request, account, "already in the pool: nothing changed", messages.INFO)
    return _back(request, account)


@staff_page
@require_POST
def disable(request: HttpRequest, pk: int) -> HttpResponse:
    account = _account(pk)
    reason = " ".join(request.POST.get("reason", "").split())[:actions.REASON_MAX]
    if not reason:
        actions.tell(request, account, "not disabled: say why (the reason is kept on its disable event)",
                     messages.ERROR)
    elif actions.disable(_user_id(request), account, reason):
        actions.tell(request, account, f"disabled by hand: {reason}")
    else:
        actions.tell(request, account, "already disabled by hand: nothing changed", messages.INFO)
    return _back(request, account)


@staff_page
@require_POST
async def test(request: HttpRequest, pk: int) -> HttpResponse:
    """Async: the probe goes out through this process's gateway, on the server's own loop."""

    account = await hop(_account, pk)
    user_id = _user_id(request, await request.auser())
    tested = await actions.test_now(account)
    if tested.queued:
        await hop(testnow.queue, account.pk)
    await hop(actions.audit, user_id, account, f"Tested from the dashboard: {tested.sentence()}")
    actions.tell(request, account, tested.sentence(),
                 messages.INFO if tested.queued else messages.SUCCESS if tested.ok else messages.ERROR)
    return _back(request, account)
