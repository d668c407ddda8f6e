"""The model listing in each client's shape: Anthropic's pages, OpenAI's objects, Codex CLI's catalog."""

from __future__ import annotations

from datetime import datetime

import pytest

from gateway.edge.request import ApiRequest
from gateway.endpoints.model_shapes import anthropic_model, anthropic_page, codex_catalog, openai_model, wants_anthropic
from gateway.endpoints.models_list import ModelEntry
from gateway.errors import InvalidRequest

ENTRIES = [ModelEntry(f"m{i:02d}", "up") for i in range(7)]


def ids(page: dict[str, object]) -> list[str]:
    data = page["data"]
    assert isinstance(data, list)
    return [m["id"] for m in data]


def test_anthropic_pages_walk_forward_and_back_with_the_cursors_they_return() -> None:
    first = anthropic_page(ENTRIES, {"limit": "3"})
    assert ids(first) == ["m00", "m01", "m02"] and first["has_more"] is True
    assert (first["first_id"], first["last_id"]) == ("m00", "m02")
    second = anthropic_page(ENTRIES, {"limit": "3", "after_id": first["last_id"]})
    last = anthropic_page(ENTRIES, {"limit": "3", "after_id": second["last_id"]})
    assert ids(second) == ["m03", "m04", "m05"] and ids(last) == ["m06"] and last["has_more"] is False
    back = anthropic_page(ENTRIES, {"limit": "2", "before_id": second["first_id"]})
    assert ids(back) == ["m01", "m02"] and back["has_more"] is True  # m00 lies before it


def test_anthropic_default_page_is_twenty_and_an_empty_page_has_no_ids() -> None:
    many = [ModelEntry(f"m{i:02d}", "up") for i in range(25)]
    assert len(ids(anthropic_page(many, {}))) == 20
    empty = anthropic_page(ENTRIES, {"after_id": "zzz"})
    assert empty == {"data": [], "has_more": False, "first_id": None, "last_id": None}


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "1001"}, {"limit": "ten"},
                                   {"after_id": "m01", "before_id": "m05"}])
def test_anthropic_paging_refuses_what_anthropic_refuses(query: dict[str, str]) -> None:
    with pytest.raises(InvalidRequest):
        anthropic_page(ENTRIES, query)


def test_an_anthropic_model_has_an_rfc3339_time_and_the_configured_limits() -> None:
    plain = anthropic_model(ModelEntry("m", "up"))
    assert plain["type"] == "model" and plain["display_name"] == "m"
    assert datetime.fromisoformat(plain["created_at"]).timestamp() == 0  # release date unknown: the epoch
    rich = anthropic_model(ModelEntry("m", "up", {"display_name": "Model M", "created_at": "2025-05-14T00:00:00Z",
                                                  "context_window": 200000, "max_output_tokens": 64000}))
    assert rich["display_name"] == "Model M" and rich["created_at"].startswith("2025-05-14T00:00:00")
    assert rich["max_input_tokens"] == 200000 and rich["max_tokens"] == 64000


def test_the_openai_object_gives_the_release_time_in_unix_seconds_and_the_routing_provider() -> None:
    model = openai_model(ModelEntry("m", "up", {"created_at": "2025-05-14T00:00:00Z"}))
    assert model == {"id": "m", "object": "model", "created": 1747180800, "owned_by": "up"}


def test_the_caller_is_anthropic_by_its_x_api_key_or_its_anthropic_version_header() -> None:
    def request(name: bytes, value: bytes) -> ApiRequest:
        return ApiRequest("GET", "/v1/models", raw_headers=[(name, value)])

    assert wants_anthropic(request(b"x-api-key", b"k")) and wants_anthropic(request(b"anthropic-version", b"2023-06-01"))
    assert not wants_anthropic(request(b"authorization", b"Bearer k"))


def test_codex_gets_only_models_with_instructions_each_with_every_field_it_requires() -> None:
    entries = [ModelEntry("bare", "up"),
               ModelEntry("tuned", "up", {"base_instructions": "Be brief.", "context_window": 128000,
                                          "supported_reasoning_levels": ["low", {"effort": "high", "description": "Deep"}],
                                          "default_reasoning_level": "low"})]
    models = codex_catalog(entries)["models"]
    assert [m["slug"] for m in models] == ["tuned"]
    tuned = models[0]
    # the fields Codex 0.169.0 cannot do without (it drops the whole catalog when one is missing)
    for required in ("display_name", "supported_reasoning_levels", "shell_type", "visibility", "supported_in_api",
                     "priority", "base_instructions", "support_verbosity", "truncation_policy",
                     "experimental_supported_tools"):
        assert required in tuned, required
    assert tuned["context_window"] == 128000 and tuned["base_instructions"] == "Be brief."
    assert [lvl["effort"] for lvl in tuned["supported_reasoning_levels"]] == ["low", "high"]
    assert all(isinstance(lvl["description"], str) for lvl in tuned["supported_reasoning_levels"])
