"""Compaction summaries sealed by the gateway: only a gateway with the same key reads them back."""

from __future__ import annotations

import base64
import time

from gateway.endpoints.sealing import Opened, Refusal, Sealer, ours
from gateway.options import Options

SUMMARY = "The user is fixing the parser in src/parse.py; tests 3 and 4 still fail. Ünïcode ok."


def test_round_trip_gives_back_the_summary() -> None:
    sealer = Sealer("key-one")
    token = sealer.seal(SUMMARY, 1)
    assert SUMMARY not in token and "parser" not in token
    assert ours(token)
    assert sealer.open(token, 1).summary == SUMMARY


def test_two_gateways_with_the_same_key_read_each_others_summaries() -> None:
    assert Sealer("shared").open(Sealer("shared").seal(SUMMARY, 1), 1).summary == SUMMARY


def test_a_tampered_token_is_refused() -> None:
    sealer = Sealer("key-one")
    token = sealer.seal(SUMMARY, 1)
    body = bytearray(base64.urlsafe_b64decode(token[len("gwc2."):]))
    body[40] ^= 1  # one bit of the ciphertext
    assert sealer.open("gwc2." + base64.urlsafe_b64encode(bytes(body)).decode(), 1) == Opened(None, Refusal.NOT_OURS)
    assert sealer.open(token[:-4], 1).summary is None


def test_a_token_sealed_under_another_key_is_refused() -> None:
    assert Sealer("key-two").open(Sealer("key-one").seal(SUMMARY, 1), 1) == Opened(None, Refusal.NOT_OURS)


def test_openai_own_compaction_content_is_not_ours() -> None:
    foreign = "gAAAAABpZ2VuZXJhdGVkLWJ5LW9wZW5haQ=="
    assert not ours(foreign)
    assert Sealer("key-one").open(foreign, 1).summary is None
    assert Sealer("key-one").open(None, 1).summary is None


def test_the_sealing_key_stays_out_of_the_options_repr() -> None:
    assert "s3cret-material" not in repr(Options(sealing_key="s3cret-material"))


def test_an_item_opens_only_for_the_key_it_was_sealed_for_and_only_in_its_time() -> None:
    sealer = Sealer("key-one", ttl=3600)
    token = sealer.seal(SUMMARY, 1)
    assert sealer.open(token, 2) == Opened(None, Refusal.OTHER_KEY)
    stamped = time.time()
    assert sealer.open(token, 1, now=stamped + 3500).summary == SUMMARY
    assert sealer.open(token, 1, now=stamped + 3700) == Opened(None, Refusal.EXPIRED)
    assert Sealer("key-one").open(token, 1, now=stamped + 10**9).summary == SUMMARY  # no ttl: for ever


def test_an_item_sealed_before_items_were_bound_to_a_key_is_not_opened() -> None:
    assert Sealer("key-one").open("gwc1.gAAAAABanything", 1) == Opened(None, Refusal.UNBOUND)
