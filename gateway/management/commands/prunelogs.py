"""``python manage.py prunelogs --days N``: delete request-log rows (and usage and spend buckets) older than N
days, stored responses older than ``GATEWAY_RESPONSES_RETENTION_DAYS`` (their own retention: a
conversation may be meant to outlive the log), and the figures clients reported over OTLP older than
``GATEWAY_TELEMETRY_RETENTION_DAYS``."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from accounts.models import RequestLog
from conversations import store
from dashboard import rollup, spend
from telemetry import store as telemetry_store
from telemetry.models import ReportedFigure

CHUNK = 5_000


class Command(BaseCommand):
    help = "Delete request-log rows and dashboard usage buckets older than --days days."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, required=True, help="keep this many days (0 deletes everything older than now)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        days: int = options["days"]
        if days < 0:
            raise CommandError("--days must be 0 or more")
        cutoff = timezone.now() - dt.timedelta(days=days)
        old = RequestLog.objects.filter(created_at__lt=cutoff)
        # Buckets wholly before the cutoff, in every tier: a bucket that straddles it keeps its counts.
        old_buckets = [tier.model.objects.filter(start__lte=int(cutoff.timestamp()) - tier.seconds)
                       for tier in (*rollup.TIERS, *spend.TIERS)]
        kept_days: int = settings.GATEWAY_RESPONSES_RETENTION_DAYS
        responses_cutoff = timezone.now() - dt.timedelta(days=max(kept_days, 0))
        reported_cutoff = timezone.now() - dt.timedelta(days=max(settings.GATEWAY_TELEMETRY_RETENTION_DAYS, 0))
        if options["dry_run"]:
            counted = sum(b.count() for b in old_buckets)
            self.stdout.write(f"would delete {old.count()} request-log rows and {counted} usage buckets "
                              f"older than {cutoff:%Y-%m-%d %H:%M:%S} UTC")
            self.stdout.write(f"would delete {store.count_before(responses_cutoff)} stored responses "
                              f"older than {responses_cutoff:%Y-%m-%d %H:%M:%S} UTC")
            reported = ReportedFigure.objects.filter(hour__lt=telemetry_store.hour_of(reported_cutoff)).count()
            self.stdout.write(f"would delete {reported} reported telemetry figures "
                              f"older than {reported_cutoff:%Y-%m-%d %H:%M:%S} UTC")
            return
        rows = 0
        # In chunks: one huge DELETE would hold the write lock (SQLite) or bloat one transaction for long.
        while True:
            ids = list(old.order_by("created_at").values_list("id", flat=True)[:CHUNK])
            if not ids:
                break
            with transaction.atomic():
                # Their RequestAttempt rows go with them; the count is the log's own.
                rows += RequestLog.objects.filter(id__in=ids).delete()[1].get(RequestLog._meta.label, 0)
        buckets = sum(b.delete()[0] for b in old_buckets)
        self.stdout.write(f"deleted {rows} request-log rows and {buckets} usage buckets "
                          f"older than {cutoff:%Y-%m-%d %H:%M:%S} UTC")
        responses = store.prune(responses_cutoff, CHUNK)
        self.stdout.write(f"deleted {responses} stored responses older than {responses_cutoff:%Y-%m-%d %H:%M:%S} UTC")
        reported = telemetry_store.prune(reported_cutoff)
        self.stdout.write(f"deleted {reported} reported telemetry figures older than "
                          f"{reported_cutoff:%Y-%m-%d %H:%M:%S} UTC")
