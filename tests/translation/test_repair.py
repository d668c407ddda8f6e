"""repair.defer_system_messages: where a mid-conversation system message may stand."""

from translation import ir
from translation.repair import defer_system_messages


def U(text: str) -> ir.Message:
    return ir.Message("user", [ir.TextPart(text)])


def A(*parts: ir.Part) -> ir.Message:
    return ir.Message("assistant", list(parts))


def S(text: str) -> ir.Message:
    return ir.Message("system", [ir.TextPart(text)])


def texts(messages: list[ir.Message]) -> list[str]:
    return [f"{m.role}:{m.parts[0].text}" if isinstance(m.parts[0], ir.TextPart) else m.role for m in messages]


def test_openai_targets_keep_a_system_message_after_the_assistant_where_it_is() -> None:
    messages = [U("q"), A(ir.TextPart("a")), S("s"), U("u")]
    assert defer_system_messages(messages, after_user_only=False) == messages


def test_anthropic_moves_it_after_the_next_user_turn_and_keeps_the_order_of_several() -> None:
    messages = [U("q"), A(ir.TextPart("a")), S("s1"), S("s2"), U("u"), S("s3")]
    assert texts(defer_system_messages(messages, after_user_only=True)) == [
        "user:q", "assistant:a", "user:u", "system:s1", "system:s2", "system:s3"]


def test_no_target_puts_it_between_tool_calls_and_their_results() -> None:
    call = A(ir.ToolCallPart("c", "f", "{}"))
    results = ir.Message("user", [ir.ToolResultPart("c", [ir.TextPart("42")])])
    for after_user_only in (False, True):
        moved = defer_system_messages([U("q"), call, S("s"), results], after_user_only=after_user_only)
        assert moved == [U("q"), call, results, S("s")]


def test_with_no_user_turn_left_it_stays_last() -> None:
    messages = [U("q"), A(ir.TextPart("a")), S("s")]
    assert defer_system_messages(messages, after_user_only=True) == messages
