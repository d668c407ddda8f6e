"""The stored responses: chains read oldest first and per client key, and pruned by age."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import call_command
from django.utils import timezone

from conversations import store
from conversations.models import StoredResponse

pytestmark = pytest.mark.django_db


def entry(response_id: str, previous: str = "", key: int = 1, text: str = "") -> store.Entry:
    return store.Entry(response_id=response_id, client_key_id=key, previous_response_id=previous,
                       input_items=[{"type": "message", "id": f"in-{response_id}", "role": "user", "content": text}],
                       response={"id": response_id, "output": [{"type": "message", "id": f"out-{response_id}"}]})


def test_a_chain_is_the_conversation_in_order() -> None:
    store.save(entry("r1"))
    store.save(entry("r2", "r1"))
    store.save(entry("r3", "r2"))
    items = store.conversation(store.chain("r3", 1))
    assert [i["id"] for i in items] == ["in-r1", "out-r1", "in-r2", "out-r2", "in-r3", "out-r3"]


def test_a_missing_link_is_named_not_skipped() -> None:
    store.save(entry("r1"))
    store.save(entry("r2", "r1"))
    store.save(entry("r3", "r2"))
    assert store.delete("r2", 1)
    with pytest.raises(store.MissingLink) as caught:
        store.chain("r3", 1)
    assert caught.value.response_id == "r2"


def test_another_keys_response_is_not_found_nor_deleted() -> None:
    store.save(entry("r1", key=1))
    assert store.find("r1", 2) is None and not store.delete("r1", 2)
    with pytest.raises(store.MissingLink):
        store.chain("r1", 2)
    assert store.find("r1", 1) is not None


def test_text_a_jsonb_column_would_refuse_is_kept() -> None:
    store.save(entry("r1", text="nul \u0000 and a lone \ud800 surrogate"))
    got = store.find("r1", 1)
    assert got is not None and got.input_items[0]["content"].startswith("nul \u0000 and a lone ")
    assert got.input_items[0]["content"].endswith(" surrogate")


def test_prunelogs_deletes_responses_older_than_their_retention(settings: object) -> None:
    setattr(settings, "GATEWAY_RESPONSES_RETENTION_DAYS", 7)
    for name in ("old1", "old2", "new"):
        store.save(entry(name))
    StoredResponse.objects.filter(response_id__startswith="old").update(
        created_at=timezone.now() - dt.timedelta(days=8))
    out = io.StringIO()
    call_command("prunelogs", "--days", "30", "--dry-run", stdout=out)
    assert "would delete 2 stored responses" in out.getvalue()
    call_command("prunelogs", "--days", "30", stdout=out)
    assert "deleted 2 stored responses" in out.getvalue()
    assert list(StoredResponse.objects.values_list("response_id", flat=True)) == ["new"]


def test_a_chain_longer_than_the_bound_is_refused_not_walked_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "MAX_CHAIN", 3)
    for n in range(6):
        store.save(entry(f"r{n}", f"r{n - 1}" if n else ""))
    assert [e.response_id for e in store.chain("r3", 1)] == ["r0", "r1", "r2", "r3"]
    with pytest.raises(store.MissingLink):
        store.chain("r5", 1)


def test_the_input_of_a_response_is_what_is_still_stored_before_it_then_its_own() -> None:
    store.save(entry("r1"))
    store.save(entry("r2", "r1"))
    store.save(entry("r3", "r2"))
    found = store.find_with_input("r3", 1)
    assert found is not None
    assert [i["id"] for i in found[1]] == ["in-r1", "out-r1", "in-r2", "out-r2", "in-r3"]
    store.delete("r1", 1)
    found = store.find_with_input("r3", 1)
    assert found is not None and [i["id"] for i in found[1]] == ["in-r2", "out-r2", "in-r3"]
