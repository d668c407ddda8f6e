"""Secrets never reach what is stored or shown."""

from accounts.redact import redact


def test_redact_removes_known_secrets_and_key_shaped_strings() -> None:
    text = 'Invalid key sk-live-abcdef123456 for account; header "Bearer gw-client-secret-xyz"'
    out = redact(text, ["sk-live-abcdef123456"])
    assert "sk-live-abcdef123456" not in out
    assert "gw-client-secret-xyz" not in out
    assert "Invalid key" in out
