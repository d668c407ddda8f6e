"""Compaction summaries sealed by the gateway: only a gateway with the same key reads them back."""

from __future__ import annotations

import base64

from gateway.endpoints.sealing import Sealer, ours
from gateway.options import Options

SUMMARY = "The user is fixing the parser in src/parse.py; tests 3 and 4 still fail. Ünïcode ok."


def test_round_trip_gives_back_the_summary() -> None:
    sealer = Sealer("key-one")
    token = sealer.seal(SUMMARY)
    assert SUMMARY not in token and "parser" not in token
    assert ours(token)
    assert sealer.open(token) == SUMMARY


def test_two_gateways_with_the_same_key_read_each_others_summaries() -> None:
    assert Sealer("shared").open(Sealer("shared").seal(SUMMARY)) == SUMMARY


def test_a_tampered_token_is_refused() -> None:
    sealer = Sealer("key-one")
    token = sealer.seal(SUMMARY)
    body = bytearray(base64.urlsafe_b64decode(token[len("gwc1."):]))
    body[40] ^= 1  # one bit of the ciphertext
    assert sealer.open("gwc1." + base64.urlsafe_b64encode(bytes(body)).decode()) is None
    assert sealer.open(token[:-4]) is None


def test_a_token_sealed_under_another_key_is_refused() -> None:
    assert Sealer("key-two").open(Sealer("key-one").seal(SUMMARY)) is None


def test_openai_own_compaction_content_is_not_ours() -> None:
    foreign = "gAAAAABpZ2VuZXJhdGVkLWJ5LW9wZW5haQ=="
    assert not ours(foreign)
    assert Sealer("key-one").open(foreign) is None
    assert Sealer("key-one").open(None) is None


def test_the_sealing_key_stays_out_of_the_options_repr() -> None:
    assert "s3cret-material" not in repr(Options(sealing_key="s3cret-material"))
