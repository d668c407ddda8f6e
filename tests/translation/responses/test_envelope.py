from translation import ir
from translation.protocol import EncodeContext
from translation.responses.envelope import echoed_fields, response_object


def test_body_wins_over_request_which_wins_over_defaults():
    req = ir.Request(model="m", messages=[], temperature=0.4, top_p=0.8, user="from-ir")
    fields = echoed_fields(EncodeContext(model="m", request=req, body={"temperature": 0.9, "user": None}))
    assert fields["temperature"] == 0.9, "the client's own value"
    assert fields["top_p"] == 0.8 and fields["user"] == "from-ir", "what the parsed request implies"
    assert fields["truncation"] == "disabled" and fields["store"] is True, "the API's defaults"


def test_partial_reasoning_object_is_completed():
    fields = echoed_fields(EncodeContext(model="m", body={"reasoning": {"summary": "auto"}}))
    assert fields["reasoning"] == {"effort": None, "summary": "auto"}


def test_disabled_reasoning_in_the_request_is_not_echoed_as_an_effort():
    req = ir.Request(model="m", messages=[], reasoning=ir.Reasoning(enabled=False, effort="low"))
    assert echoed_fields(EncodeContext(model="m", request=req))["reasoning"] == {"effort": None, "summary": None}


def test_response_object_lists_every_sop_field():
    obj = response_object(EncodeContext(model="m", created=5), "resp_1", "in_progress", [])
    assert list(obj) == ["id", "object", "created_at", "status", "model", "output", "usage", "error",
                         "incomplete_details", "instructions", "metadata", "parallel_tool_calls", "temperature",
                         "tool_choice", "tools", "top_p", "max_output_tokens", "previous_response_id",
                         "reasoning", "store", "truncation", "user", "text"]
    assert obj["created_at"] == 5 and obj["usage"] is None and obj["incomplete_details"] is None
