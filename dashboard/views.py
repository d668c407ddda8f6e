"""The ops dashboard's pages. Thin: figures come from ``stats``, searches from ``logsearch``."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts import pool
from accounts.models import Account, DisableEvent, RequestAttempt, RequestLog
from accounts.outcomes import Verdict

from . import accounttable, actions, charts, logsearch, overviewfigures, stats
from .security import staff_page

RECENT = 20
EVENTS_PAGE = 100


def _window(request: HttpRequest) -> stats.Window:
    return stats.window_from(request.GET.get("window"))


def _recent_requests(n: int = RECENT, **filters: object) -> list[RequestLog]:
    return list(RequestLog.objects.filter(**filters).select_related("account", "provider")
                .order_by("-created_at", "-id")[:n])


def _events() -> QuerySet[DisableEvent]:
    return DisableEvent.objects.select_related("account__provider").order_by("-created_at", "-id")


@staff_page
def overview(request: HttpRequest) -> HttpResponse:
    window = _window(request)
    return render(request, "dashboard/overview.html", {
        "window": window, "windows": stats.WINDOWS.values(), **overviewfigures.figures(window),
        "recent": _recent_requests(),
        "events": list(_events()[:10]),
    })


@staff_page
def usage(request: HttpRequest) -> HttpResponse:
    window = _window(request)
    query = accounttable.AccountQuery(request.GET)
    criteria = query.criteria()
    page = accounttable.page(accounttable.accounts(criteria), request.GET.get("page"))
    shown = list(page)
    ids = [a.pk for a in shown]
    totals = stats.per_account(window, [*ids, 0])  # 0: the requests that reached no account
    sparks = stats.per_account_series(window, account_ids=ids)
    rows = [{"account": a, "window": totals.get(a.pk, stats.Totals()),
             "spark": charts.sparkline(sparks.get(a.pk, []), title=f"{a} requests, {window.label}")}
            for a in shown]
    return render(request, "dashboard/usage.html", {
        **actions.context(request, shown),
        "window": window, "windows": stats.WINDOWS.values(), "rows": rows, "page": page,
        "query": query, "sort": criteria.get("sort") or accounttable.DEFAULT_SORT, "desc": criteria.get("desc"),
        "summary": accounttable.summary(), "unattributed": totals.get(0),
    })


@staff_page
def account_detail(request: HttpRequest, pk: int) -> HttpResponse:
    account = get_object_or_404(Account.objects.select_related("provider"), pk=pk)
    window = _window(request)
    points = stats.series(window, account.pk)
    totals = stats.totals(window, account.pk)
    return render(request, "dashboard/account.html", {
        **actions.context(request, [account]),
        "account": account, "window": window, "windows": stats.WINDOWS.values(), "totals": totals,
        "ttfb": {p: totals.ttfb_percentile(p) for p in (50, 95, 99)},
        **overviewfigures.charts_of(points, window),
        "events": list(_events().filter(account=account)[:20]),
        "recent": _recent_requests(account=account),
        "failed_attempts": _failed_attempts(account),
    })


def _failed_attempts(account: Account, n: int = RECENT) -> list[RequestAttempt]:
    """The account's latest attempts that did not answer, each with its request (which may have been
    answered by another account): newest first from the (account, created_at) index."""

    return list(RequestAttempt.objects.filter(account=account).exclude(verdict=Verdict.OK)
                .select_related("request__account").order_by("-created_at", "-id")[:n])


@staff_page
def events(request: HttpRequest) -> HttpResponse:
    qs = _events()
    only_open = request.GET.get("open") == "1"
    if only_open:
        qs = qs.filter(ended_at__isnull=True)
    return render(request, "dashboard/events.html", {
        "events": list(qs[:EVENTS_PAGE]),
        "only_open": only_open, "limit": EVENTS_PAGE,
    })


@staff_page
@require_POST
def enable(request: HttpRequest, pk: int) -> HttpResponse:
    """Re-enable the account of a disable event; the event is closed as ended by hand."""

    event = get_object_or_404(DisableEvent.objects.select_related("account"), pk=pk)
    pool.enable_account(event.account_id, "hand")
    messages.success(request, f"{event.account} re-enabled.")
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
        back = reverse("dashboard:events")
    return HttpResponseRedirect(back)


@staff_page
def requests_list(request: HttpRequest) -> HttpResponse:
    form = logsearch.RequestFilter(request.GET or None)
    filtered = form.is_bound and form.is_valid()
    qs = RequestLog.objects.all()
    if filtered:
        qs = logsearch.apply(qs, form.cleaned_data)
    cursor = request.GET.get("after")
    page = logsearch.page(qs, cursor)
    params = request.GET.copy()
    params.pop("after", None)
    return render(request, "dashboard/requests.html", {
        "form": form, "page": page, "query": params.urlencode(), "account_names": logsearch.account_names(),
        "account_names_id": logsearch.NAME_LIST_ID,
        # New rows are pushed live only into the unfiltered first page, where they belong.
        "live": not cursor and not any(v for k, v in request.GET.items()),
    })


@staff_page
def request_detail(request: HttpRequest, request_id: str) -> HttpResponse:
    row = (RequestLog.objects.filter(request_id=request_id)
           .select_related("account__provider", "provider", "client_key").first())
    if row is None:
        raise Http404("No such request")
    return render(request, "dashboard/request_detail.html", {"row": row})
