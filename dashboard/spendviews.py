"""The spend pages: client keys (list and one key), and spend per model and provider. Figures from
``spendstats`` (the spend buckets), never from the request log."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import SafeString

from accounts.models import ApiKey, Provider

from . import charts, spendstats, stats
from .security import staff_page

# Sort keys of the client-key list: what a column sorts by, largest first (the name A to Z).
SORTS = {"cost": "cost_nanos", "tokens": "tokens", "requests": "requests", "errors": "errors", "name": "name"}
DEFAULT_SORT = "cost"
BUDGET_LABELS = ("per 5 hours", "per day", "per week", "per month")  # in the order of ApiKey.USD_BUDGETS


def _window(request: HttpRequest) -> stats.Window:
    return stats.window_from(request.GET.get("window"))


def _chart(points: list[dict[str, float]], field: str, title: str, window: stats.Window,
           unit: str = "") -> SafeString:
    return charts.bar_chart([(int(p["t"]), p[field]) for p in points], title=title, step=window.step, unit=unit)


def key_rows(window: stats.Window, sort: str) -> list[dict[str, Any]]:
    """Every client key with its spend in the window (keys deleted since: one row of their own), sorted."""

    spent = spendstats.by(window, "key")
    rows: list[dict[str, Any]] = [{"key": k, "name": k.name, "spend": spent.pop(k.pk, spendstats.Spend())}
                                  for k in ApiKey.objects.order_by("name")]
    gone = spendstats.Spend()
    for spend in spent.values():  # id 0 (no key: refused before authentication) or a deleted key
        for f in spendstats.FIELDS:
            setattr(gone, f, getattr(gone, f) + getattr(spend, f))
    if gone.requests:
        rows.append({"key": None, "name": "(no key or a deleted key)", "spend": gone})
    attr = SORTS[sort]
    if attr == "name":
        rows.sort(key=lambda r: str(r["name"]).lower())
    else:
        rows.sort(key=lambda r: getattr(r["spend"], attr), reverse=True)
    return rows


def named(spent: dict[Any, spendstats.Spend], names: dict[Any, str]) -> list[dict[str, Any]]:
    return sorted(({"name": names.get(ident) or str(ident or "—"), "spend": s} for ident, s in spent.items()),
                  key=lambda r: (-r["spend"].cost_nanos, -r["spend"].requests, r["name"]))


def provider_names() -> dict[Any, str]:
    return {0: "(none: refused before dispatch)", **dict(Provider.objects.values_list("id", "name"))}


@staff_page
def keys(request: HttpRequest) -> HttpResponse:
    window = _window(request)
    sort = request.GET.get("sort", DEFAULT_SORT)
    if sort not in SORTS:
        sort = DEFAULT_SORT
    return render(request, "dashboard/keys.html", {
        "window": window, "windows": stats.WINDOWS.values(), "sort": sort, "sorts": SORTS,
        "rows": key_rows(window, sort), "total": spendstats.total(window),
    })


@staff_page
def key_detail(request: HttpRequest, pk: int) -> HttpResponse:
    key = get_object_or_404(ApiKey, pk=pk)
    window = _window(request)
    points = spendstats.series(window, key.pk)
    return render(request, "dashboard/key.html", {
        "key": key, "window": window, "windows": stats.WINDOWS.values(),
        "total": spendstats.total(window, key.pk),
        "budgets": [(label, getattr(key, f)) for f, label in zip(ApiKey.USD_BUDGETS, BUDGET_LABELS)
                    if getattr(key, f) is not None],
        "cost_chart": _chart(points, "cost", f"Spend (USD), {window.label}", window, "USD"),
        "tokens_chart": _chart(points, "tokens", f"Tokens (in + out), {window.label}", window),
        "requests_chart": _chart(points, "requests", f"Requests, {window.label}", window),
        "errors_chart": _chart(points, "errors", f"Errors, {window.label}", window),
        "models": named(spendstats.by(window, "model", key.pk), {}),
        "providers": named(spendstats.by(window, "provider", key.pk), provider_names()),
    })


@staff_page
def spend(request: HttpRequest) -> HttpResponse:
    window = _window(request)
    return render(request, "dashboard/spend.html", {
        "window": window, "windows": stats.WINDOWS.values(), "total": spendstats.total(window),
        "models": named(spendstats.by(window, "model"), {}),
        "providers": named(spendstats.by(window, "provider"), provider_names()),
    })
