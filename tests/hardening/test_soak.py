"""A CI-sized fault soak (``make soak`` runs a longer one): nothing hangs, breaks, leaks or goes missing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from accounts.config_file import load
from tests.hardening.soak import GATEWAY_ENV, run
from tests.hardening.soak_load import soak_pool
from tests.servers import ROOT, Server, database_url, start_gateway

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # about a minute

CLIENTS = 200
WARMUP_SECONDS = 15.0
SOAK_SECONDS = 40.0


def test_a_fault_soak_loses_nothing_leaks_nothing_and_reveals_no_secret(mock_upstream: Server) -> None:
    (ROOT / "artifacts").mkdir(exist_ok=True)  # the gateway's log file lands there, for the secret scan
    pool = soak_pool(mock_upstream.url)
    load(pool.config)
    gateway = start_gateway(database_url(connection.settings_dict), GATEWAY_ENV)
    try:
        report = run(gateway, mock_upstream, pool, clients=CLIENTS, seconds=SOAK_SECONDS, warmup=WARMUP_SECONDS)
    finally:
        gateway.stop()
    report.print()
    (ROOT / "artifacts" / "soak-ci.json").write_text(json.dumps(report.figures, indent=2, default=str))
    figures: dict[str, Any] = report.figures
    assert not report.failures(), (report.failures(), figures, report.problems)
    assert figures["requests_sent"] > 1000 and figures["streams"] > 300  # it did real work
