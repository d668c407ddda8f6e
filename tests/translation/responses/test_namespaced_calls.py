"""A call of a Codex namespace tool that went through another protocol comes back
to the Responses client as ``namespace`` + inner ``name`` (how Codex routes it)."""

from openai.types.responses import Response

from tests.translation.responses.helpers import encode, validate_wire
from translation import ir, responses
from translation.protocol import EncodeContext

TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
    {"type": "namespace", "name": "multi_agent_v1", "description": "agents", "tools": [
        {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}]},
]
CTX = EncodeContext(model="client-model", id="resp_ns", created=1700000000,
                    body={"model": "client-model", "input": "hi", "tools": TOOLS})


def call_stream(name: str) -> list[ir.Event]:
    return [ir.MessageStart(), ir.BlockStart(0, "tool_call", id="toolu_1", name=name),
            ir.BlockDelta(0, "arguments", '{"task": "x"}'), ir.BlockStop(0), ir.Finish(ir.FinishReason.TOOL_CALLS)]


def test_the_stream_gives_a_namespaced_call_back_with_its_namespace():
    events = validate_wire(encode(call_stream("multi_agent_v1__spawn_agent"), CTX))
    added = next(e for e in events if e["type"] == "response.output_item.added")["item"]
    done = next(e for e in events if e["type"] == "response.output_item.done")["item"]
    for item in (added, done):
        assert (item["name"], item["namespace"]) == ("spawn_agent", "multi_agent_v1")
    final = Response.model_validate(events[-1]["response"])
    assert final.output[0].namespace == "multi_agent_v1"  # type: ignore[union-attr]


def test_a_plain_call_has_no_namespace():
    events = validate_wire(encode(call_stream("exec_command"), CTX))
    done = next(e for e in events if e["type"] == "response.output_item.done")["item"]
    assert done["name"] == "exec_command" and "namespace" not in done


def test_the_json_response_gives_the_namespace_back_too():
    resp = ir.Response(blocks=[ir.Block("tool_call", text="{}", id="toolu_1", name="multi_agent_v1__spawn_agent")],
                       finish=ir.Finish(ir.FinishReason.TOOL_CALLS))
    body = responses.render_response(resp, CTX)
    assert (body["output"][0]["name"], body["output"][0]["namespace"]) == ("spawn_agent", "multi_agent_v1")


def test_the_parsed_request_and_the_answer_agree_on_the_flat_name():
    # What the parser offers the upstream is exactly what the encoder splits back.
    req = responses.parse_request({"model": "m", "input": "hi", "tools": TOOLS})
    flat = [t.name for t in req.tools if t.name != "exec_command"][0]
    events = validate_wire(encode(call_stream(flat), CTX))
    done = next(e for e in events if e["type"] == "response.output_item.done")["item"]
    assert (done["namespace"], done["name"]) == ("multi_agent_v1", "spawn_agent")
