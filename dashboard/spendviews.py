"""The spend pages: client keys (list and one key) and teams, and spend per model and provider. Figures from
``spendstats`` (the spend buckets), never from the request log."""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import SafeString

from accounts.budgetwindows import KEY, TEAM, WINDOWS, Subject
from accounts.models import ApiKey, Team

from . import charts, spendstats, stats
from . import spend as spend_buckets
from .security import staff_page



def budgets(owner: ApiKey | Team) -> list[dict[str, Any]]:
    """Each USD budget of a key (or a team) with what it (or its keys) spent in the budget's rolling window,
    counted as the gateway counts it (the same slices, from the spend buckets: ``GATEWAY_USD_SPENT``)."""

    now = time.time()
    out = []
    subject = Subject(TEAM if isinstance(owner, Team) else KEY, owner.pk, owner.name)
    for name, limit in owner.usd_budget_limits():
        window = WINDOWS[name]
        since = dt.datetime.fromtimestamp(window.first(now), dt.timezone.utc)
        spent = sum(spend_buckets.spent_by_slice(subject, since, window.width).values(), Decimal(0))
        out.append({"window": window, "limit": limit, "spent": spent, "over": spent >= limit})
    return out


def _window(request: HttpRequest) -> stats.Window:
    return stats.window_from(request.GET.get("window"))


def _chart(points: list[dict[str, float]], field: str, title: str, window: stats.Window,
           unit: str = "") -> SafeString:
    return charts.bar_chart([(int(p["t"]), p[field]) for p in points], title=title, step=window.step, unit=unit)


KEY_CHARTS = (("cost", "Spend (USD)", "USD"), ("tokens", "Tokens (in + out)", ""), ("requests", "Requests", ""),
              ("errors", "Errors", ""))


def _titled(points: list[dict[str, float]], field: str, what: str, window: stats.Window, unit: str) -> dict[str, Any]:
    """A chart and its title, shown above it: what one bar counts, over which window."""

    title = f"{what} {charts.bucket_phrase(window.step)}, {window.label}"
    return {"title": title, "svg": _chart(points, field, title, window, unit)}


@staff_page
def keys(request: HttpRequest) -> HttpResponse:
    window = _window(request)
    sort = request.GET.get("sort", spendstats.DEFAULT_SORT)
    if sort not in spendstats.SORTS:
        sort = spendstats.DEFAULT_SORT
    return render(request, "dashboard/keys.html", {
        "window": window, "windows": stats.WINDOWS.values(), "sort": sort,
        "rows": spendstats.key_rows(window, sort), "total": spendstats.total(window),
        "teams": [{**row, "budgets": budgets(row["team"])} for row in spendstats.team_rows(window)],
    })


@staff_page
def key_detail(request: HttpRequest, pk: int) -> HttpResponse:
    key = get_object_or_404(ApiKey, pk=pk)
    window = _window(request)
    points = spendstats.series(window, key.pk)
    return render(request, "dashboard/key.html", {
        "key": key, "window": window, "windows": stats.WINDOWS.values(),
        "total": spendstats.total(window, key.pk),
        "budgets": budgets(key),
        "charts": [_titled(points, field, what, window, unit) for field, what, unit in KEY_CHARTS],
        "models": spendstats.named(spendstats.by(window, "model", key.pk), {}),
        "providers": spendstats.named(spendstats.by(window, "provider", key.pk), spendstats.provider_names()),
    })


@staff_page
def spend(request: HttpRequest) -> HttpResponse:
    window = _window(request)
    return render(request, "dashboard/spend.html", {
        "window": window, "windows": stats.WINDOWS.values(), "total": spendstats.total(window),
        "models": spendstats.named(spendstats.by(window, "model"), {}),
        "providers": spendstats.named(spendstats.by(window, "provider"), spendstats.provider_names()),
    })


@staff_page
def reported(request: HttpRequest) -> HttpResponse:
    """What Claude Code reported over OTLP per client key (telemetry), beside what the gateway counted."""

    from telemetry.store import reported_by_key

    window = _window(request)
    figures = reported_by_key(dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=window.seconds))
    rows = [{**row, "reported": figures.get(row["key"].pk if row["key"] else None, {})}
            for row in spendstats.key_rows(window, "name")]
    rows = [row for row in rows if row["reported"] or row["spend"].requests]
    return render(request, "dashboard/reported.html", {"window": window, "windows": stats.WINDOWS.values(),
                                                       "rows": rows})
