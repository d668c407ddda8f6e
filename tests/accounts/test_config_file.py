"""``loadconfig`` creates or updates the pool from TOML, idempotently by name."""

from __future__ import annotations

import io
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accounts.models import Account, ApiKey, ModelAlias, Provider
from accounts.secrets import hash_client_key

CONFIG = """
[[providers]]
name = "pool-a"
protocol = "openai_chat"
base_url = "http://127.0.0.1:9300/v1"
models = ["gpt-5-mini"]
selection = "lru"
[[providers.accounts]]
label = "a1"
api_key = "sk-first-account-key"
balance = 12.5
[[providers.accounts]]
label = "a2"
api_key = "sk-second-account-key"

[[aliases]]
name = "claude-*"
provider = "pool-a"
model = "gpt-5-mini"

[[client_keys]]
name = "dev"
key = "gw-dev-key"
max_concurrent_requests = 4
usd_budget_day = 2.5
usd_budget_month = 40
"""

pytestmark = pytest.mark.django_db


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return str(path)


def test_loads_providers_accounts_aliases_and_keys(tmp_path: Path) -> None:
    call_command("loadconfig", write(tmp_path, CONFIG))
    provider = Provider.objects.get(name="pool-a")
    assert provider.protocol == "openai_chat" and provider.served_models == ["gpt-5-mini"]
    a1 = Account.objects.get(provider=provider, label="a1")
    assert a1.get_secret() == "sk-first-account-key"
    assert "sk-first-account-key" not in a1.secret_encrypted  # encrypted at rest
    assert a1.key_hint == "sk-…-key"
    assert float(a1.balance) == 12.5
    assert ModelAlias.objects.get(name="claude-*").upstream_model == "gpt-5-mini"
    key = ApiKey.objects.get(name="dev")
    assert key.key_hash == hash_client_key("gw-dev-key")
    assert "gw-dev-key" not in key.key_hash
    assert key.max_concurrent_requests == 4 and key.daily_token_limit is None
    assert key.usd_budget_day == Decimal("2.5") and key.usd_budget_month == Decimal("40") and key.usd_budget_5h is None


def test_a_dash_reads_the_config_from_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    # `make run` pipes the demo config through sed to point it at MOCK_PORT.
    monkeypatch.setattr("sys.stdin", io.StringIO(CONFIG.replace(":9300/", ":9411/")))
    call_command("loadconfig", "-")
    assert Provider.objects.get(name="pool-a").base_url == "http://127.0.0.1:9411/v1"


def test_loading_twice_changes_nothing_and_updates_by_name(tmp_path: Path) -> None:
    call_command("loadconfig", write(tmp_path, CONFIG))
    call_command("loadconfig", write(tmp_path, CONFIG.replace("sk-second-account-key", "sk-rotated-account-key")))
    assert Provider.objects.count() == 1
    assert Account.objects.count() == 2
    assert ModelAlias.objects.count() == 1
    assert ApiKey.objects.count() == 1
    assert Account.objects.get(label="a2").get_secret() == "sk-rotated-account-key"


def test_bad_config_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"providers\[0\].*protocol"):
        call_command("loadconfig", write(tmp_path, CONFIG.replace('"openai_chat"', '"carrier-pigeon"')))
    with pytest.raises(CommandError, match="unknown provider"):
        call_command("loadconfig", write(tmp_path, CONFIG.replace('provider = "pool-a"', 'provider = "nope"')))


PRICED = CONFIG.replace('selection = "lru"\n', '''selection = "lru"
auto_prefix = true
prices = { "gpt-5-mini" = { input = 0.25, output = 2, cached = 0.025 } }
''')


def test_a_provider_can_carry_a_price_table_and_auto_prefix(tmp_path: Path) -> None:
    call_command("loadconfig", write(tmp_path, PRICED))
    provider = Provider.objects.get(name="pool-a")
    assert provider.auto_prefix
    assert provider.prices == {"gpt-5-mini": {"input": 0.25, "output": 2, "cached": 0.025}}


def test_a_bad_price_table_is_refused_with_its_place(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"providers\[0\]\.prices: gpt-5-mini: input must be a non-negative"):
        call_command("loadconfig", write(tmp_path, PRICED.replace("input = 0.25", "input = -1")))


def test_an_alias_carries_the_metadata_model_listings_give(tmp_path: Path) -> None:
    meta = CONFIG.replace('model = "gpt-5-mini"\n\n[[client_keys]]', 'model = "gpt-5-mini"\n'
                          'metadata = { display_name = "House", context_window = 200000 }\n\n[[client_keys]]')
    call_command("loadconfig", write(tmp_path, meta))
    assert ModelAlias.objects.get(name="claude-*").metadata == {"display_name": "House", "context_window": 200000}
    with pytest.raises(CommandError, match=r"aliases\[0\]\.metadata: 'context_window'"):
        call_command("loadconfig", write(tmp_path, meta.replace("200000", '"lots"')))


def test_a_negative_usd_budget_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"client_keys\[0\].usd_budget_week: must be a non-negative amount of USD"):
        call_command("loadconfig", write(tmp_path, CONFIG + "usd_budget_week = -3\n"))


def test_a_second_run_keeps_a_live_balance_unless_asked_to_reset_it(tmp_path: Path) -> None:
    path = write(tmp_path, CONFIG)
    call_command("loadconfig", path)
    # The account spent money (or ops set its balance) since the first load.
    Account.objects.filter(label="a1").update(balance=Decimal("3.25"))
    out = io.StringIO()
    call_command("loadconfig", path, stdout=out)
    assert Account.objects.get(label="a1").balance == Decimal("3.25")
    assert "1 live account balance(s) differ from the file and were kept" in out.getvalue()
    call_command("loadconfig", path, "--reset-balances")
    assert Account.objects.get(label="a1").balance == Decimal("12.5")


def test_a_balance_added_to_the_file_reaches_an_account_that_had_none(tmp_path: Path) -> None:
    call_command("loadconfig", write(tmp_path, CONFIG))
    assert Account.objects.get(label="a2").balance is None
    call_command("loadconfig", write(tmp_path, CONFIG.replace('api_key = "sk-second-account-key"',
                                                              'api_key = "sk-second-account-key"\nbalance = 4')))
    assert Account.objects.get(label="a2").balance == Decimal("4")


def test_a_selection_nobody_knows_is_refused_and_the_pool_settings_load(tmp_path: Path) -> None:
    """loadconfig used to take ``selection = "sticky"`` silently and run least-recently-used."""

    with pytest.raises(CommandError, match=r"providers\[0\]: 'selection' must be one of lru, balance, weighted, "
                                           r"priority, not 'sticky'"):
        call_command("loadconfig", write(tmp_path, CONFIG.replace('selection = "lru"', 'selection = "sticky"')))
    assert not Provider.objects.exists()
    pooled = CONFIG.replace('selection = "lru"', 'selection = "priority"\naffinity = false\naffinity_ttl = 3600') \
        .replace('balance = 12.5', 'balance = 12.5\ntier = 2\nweight = 3\nmax_concurrent = 4')
    call_command("loadconfig", write(tmp_path, pooled))
    provider = Provider.objects.get(name="pool-a")
    assert (provider.selection, provider.affinity, provider.affinity_ttl) == ("priority", False, 3600.0)
    a1 = Account.objects.get(label="a1")
    assert (a1.tier, a1.weight, a1.max_concurrent) == (2, 3, 4)
    with pytest.raises(CommandError, match=r"accounts\[0\]: 'tier' must be a whole number of 1 or more"):
        call_command("loadconfig", write(tmp_path, pooled.replace("tier = 2", "tier = 0")))
    with pytest.raises(CommandError, match=r"'affinity_ttl' must be at least 1"):
        call_command("loadconfig", write(tmp_path, pooled.replace("affinity_ttl = 3600", "affinity_ttl = 0")))


def test_the_model_and_the_database_refuse_an_unknown_selection() -> None:
    from django.core.exceptions import ValidationError
    from django.db import IntegrityError, transaction

    provider = Provider(name="p", protocol="openai_chat", base_url="http://127.0.0.1:9/v1", selection="sticky")
    with pytest.raises(ValidationError, match="selection"):
        provider.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        provider.save()


PLACED = CONFIG.replace('usd_budget_month = 40\n', '''usd_budget_month = 40
team = "platform"
expires_at = 2027-06-30T12:00:00Z
''')


def test_a_key_is_put_in_its_team_and_given_its_expiry_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    import datetime as dt

    from accounts.config_file import load_file
    from accounts.models import Team

    call_command("loadconfig", write(tmp_path, PLACED))
    key = ApiKey.objects.select_related("team").get(name="dev")
    assert key.team is not None and key.team.name == "platform"
    assert key.expires_at == dt.datetime(2027, 6, 30, 12, tzinfo=dt.timezone.utc)
    assert not load_file(write(tmp_path, PLACED)).changed  # the team exists now; nothing to write
    assert Team.objects.count() == 1


def test_a_file_that_names_no_team_or_expiry_leaves_the_admins_and_an_empty_one_clears_it(tmp_path: Path) -> None:
    call_command("loadconfig", write(tmp_path, PLACED))
    call_command("loadconfig", write(tmp_path, CONFIG))  # written before either existed
    key = ApiKey.objects.select_related("team").get(name="dev")
    assert key.team is not None and key.expires_at is not None
    call_command("loadconfig", write(tmp_path, PLACED.replace('"platform"', '""').replace(
        "2027-06-30T12:00:00Z", '""')))
    key.refresh_from_db()
    assert key.team is None and key.expires_at is None


@pytest.mark.parametrize("line, complaint", [
    ("expires_at = 2027-06-30T12:00:00", r"client_keys\[0\]\.expires_at: .*offset"),  # no offset: whose midnight?
    ('expires_at = "soon"', r"client_keys\[0\]\.expires_at"),
    ("team = 7", r"client_keys\[0\]\.team"),
    (f'team = "{"t" * 101}"', r"client_keys\[0\]\.team: .*100 characters"),
])
def test_a_bad_team_or_expiry_is_refused_with_its_place(tmp_path: Path, line: str, complaint: str) -> None:
    with pytest.raises(CommandError, match=complaint):
        call_command("loadconfig", write(tmp_path, CONFIG + line + "\n"))
    assert not ApiKey.objects.exists()  # nothing of a refused file is kept
