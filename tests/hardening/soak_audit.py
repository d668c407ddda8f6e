"""What the soak leaves behind, measured: the gateway process, the database, and every place a secret could leak."""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from tests.servers import ROOT, Server
from tests.hardening.soak_load import COOLING, DISABLING, FAULT_MODELS

# ----------------------------------------------------------------- what the process holds


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def upstream_sockets(pid: int, port: int) -> dict[str, int]:
    """TCP sockets of process ``pid`` to ``port``: established, close_wait (the peer closed, we never
    did: a leak) and unread (established with bytes we never read: an abandoned response)."""

    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    counts = {"established": 0, "close_wait": 0, "unread": 0}
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            parts = line.split()
            if parts[9] not in inodes or int(parts[2].rsplit(":", 1)[1], 16) != port:
                continue
            rx_queue = int(parts[4].split(":")[1], 16)
            if parts[3] == "01":
                counts["established"] += 1
                counts["unread"] += rx_queue > 0
            elif parts[3] == "08":
                counts["close_wait"] += 1
    return counts


# ----------------------------------------------------------------- what the database holds


def log_figures(key_name: str) -> dict[str, int]:
    from accounts.models import RequestLog

    rows = RequestLog.objects.filter(client_key_name=key_name)
    attempts = 0
    kinds: Counter[str] = Counter()
    for stream, model, trace in rows.values_list("stream", "model_requested", "attempts").iterator():
        scenario = model.rsplit("/", 1)[-1]
        for a in trace:
            attempts += 1
            if a["verdict"] != "ok":
                kinds[f"{a['status'] or 'no answer'} {a['verdict']}"] += 1
            elif stream and scenario in FAULT_MODELS:
                kinds[scenario] += 1
    return {"rows": rows.count(), "distinct_request_ids": rows.values("request_id").distinct().count(),
            "cancelled_rows": rows.filter(error_class="client_disconnected").count(),
            "upstream_attempts": attempts, "faults_injected": sum(kinds.values()),
            "faults_by_kind": dict(kinds.most_common())}


def disable_figures(providers: list[str]) -> dict[str, Any]:
    """Disable events per account: overlapping ones are double disables."""

    from accounts.models import Account, DisableEvent

    events: dict[int, list[Any]] = defaultdict(list)
    for e in DisableEvent.objects.filter(account__provider__name__in=providers).order_by("created_at", "id"):
        events[e.account_id].append(e)
    double = 0
    for evs in events.values():
        for earlier, later in zip(evs, evs[1:]):
            double += earlier.ended_at is None or earlier.ended_at > later.created_at
    wrong: list[str] = []
    disabled_bad = total_bad = 0
    for account in Account.objects.filter(provider__name__in=providers).select_related("provider"):
        marker = account.label.rsplit("-", 1)[0]
        n = len(events.get(account.pk, []))
        if marker in DISABLING:
            total_bad += 1
            disabled_bad += n > 0
            if marker not in COOLING and n > 1:
                wrong.append(f"{account}: {n} disable events for a permanent fault")
        elif n:
            wrong.append(f"{account} ({marker}) was disabled {n} time(s)")
    return {"disable_events": sum(len(v) for v in events.values()), "double_disables": double,
            "bad_accounts_disabled": disabled_bad, "bad_accounts": total_bad, "wrong_disables": wrong}


def wait_for_rows(key_name: str, expected: int, timeout: float = 30.0) -> int:
    from accounts.models import RequestLog

    deadline = time.monotonic() + timeout
    while True:
        n = RequestLog.objects.filter(client_key_name=key_name).count()
        if n >= expected or time.monotonic() > deadline:
            return n
        time.sleep(0.25)


# ----------------------------------------------------------------- secrets


def secret_findings(secrets: list[str], sources: Iterable[tuple[str, str]]) -> list[str]:
    """Where a secret (whole, or its random part) shows up in any of ``(where, text)``."""

    needles = {s: s for s in secrets} | {s.rsplit("-", 1)[-1]: s for s in secrets}
    found = []
    for where, text in sources:
        for needle, secret in needles.items():
            if needle in text:
                found.append(f"{where}: {secret[:12]}…")
    return found


def stored_texts(providers: list[str]) -> Iterator[tuple[str, str]]:
    """Every request-log row and disable event, as the text of all their fields."""

    from accounts.models import DisableEvent, RequestLog

    for row in RequestLog.objects.all().values().iterator():
        yield f"RequestLog {row['request_id']}", orjson.dumps(row, default=str).decode()
    for event in DisableEvent.objects.all().values().iterator():
        yield f"DisableEvent {event['id']}", orjson.dumps(event, default=str).decode()


def rendered_pages(providers: list[str]) -> Iterator[tuple[str, str]]:
    """Admin and dashboard pages as a staff user sees them: lists, and each account, event and failed request."""

    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    from accounts.models import Account, ApiKey, DisableEvent, Provider, RequestLog

    user, _ = User.objects.get_or_create(username="soak-staff", defaults={"is_staff": True, "is_superuser": True})
    client = Client()
    client.force_login(user)
    urls = [reverse("admin:index"), reverse("admin:accounts_account_import")]
    for model in (Provider, Account, ApiKey, DisableEvent, RequestLog):
        info = (model._meta.app_label, model._meta.model_name)
        urls.append(reverse("admin:%s_%s_changelist" % info))
        objects = model.objects.all()
        if model is RequestLog:
            objects = objects.exclude(status=200)[:30]
        urls += [reverse("admin:%s_%s_change" % info, args=[o.pk]) for o in objects]
    urls += ["/dashboard/", "/dashboard/usage/", "/dashboard/events/", "/dashboard/requests/",
             "/dashboard/requests/?status=502"]
    urls += [f"/dashboard/accounts/{pk}/" for pk in Account.objects.values_list("pk", flat=True)]
    urls += [f"/dashboard/requests/{rid}/" for rid in
             RequestLog.objects.exclude(status=200).values_list("request_id", flat=True)[:30]]
    for url in urls:
        response = client.get(url)
        if response.status_code != 404:  # a page another part of the project has not built yet
            yield f"page {url} ({response.status_code})", response.content.decode("utf-8", "replace")


def log_file_text(server: Server) -> Iterator[tuple[str, str]]:
    path = ROOT / "artifacts" / f"server-{server.port}.log"
    if not path.exists():
        raise RuntimeError(f"{path} is missing: start the gateway with {ROOT / 'artifacts'} in place")
    yield str(path), path.read_text(errors="replace")


