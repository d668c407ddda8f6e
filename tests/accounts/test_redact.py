"""Secrets never reach what is stored or shown: every common format, known keys, few false alarms.

Every sample is built here from parts (a prefix and seeded random characters), so this
file holds no string a secret scanner would flag, yet each has its format's real shape.
"""

from __future__ import annotations

import json
import random
import string
import time

import orjson
import pytest

from accounts.redact import MARK, SecretSet, redact, redact_shapes

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def chars(alphabet: str, n: int, seed: int) -> str:
    return "".join(random.Random(seed).choices(alphabet, k=n))


def upper_digits(n: int, seed: int) -> str:
    return chars(string.ascii_uppercase + string.digits, n, seed)


def pem(kind: str, seed: int) -> str:
    body = "\n".join(chars(B64, 64, seed + i) for i in range(4))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


def jwt() -> str:
    def segment(obj: dict[str, object]) -> str:
        import base64

        return base64.urlsafe_b64encode(orjson.dumps(obj)).decode().rstrip("=")

    return ".".join([segment({"alg": "HS256", "typ": "JWT"}), segment({"sub": "1234567890", "admin": True}),
                     chars(URLSAFE, 43, 7)])


# (name, the secret as it is written in the text); the whole string must go.
SAMPLES: list[tuple[str, str]] = [
    ("openai legacy", "sk-" + chars(ALNUM, 48, 1)),
    ("openai project", "sk-" + "proj-" + chars(URLSAFE, 156, 2)),
    ("openai service account", "sk-" + "svcacct-" + chars(URLSAFE, 120, 3)),
    ("anthropic", "sk-" + "ant-api03-" + chars(URLSAFE, 93, 4) + "AA"),
    ("gateway client key", "gw-" + chars(URLSAFE, 43, 5)),
    ("google api key", "AI" + "za" + chars(URLSAFE, 35, 6)),
    ("google oauth", "ya" + "29." + chars(URLSAFE, 150, 8)),
    ("aws access key id", "AK" + "IA" + upper_digits(16, 9)),
    ("aws temporary key id", "AS" + "IA" + upper_digits(16, 10)),
    ("github personal", "gh" + "p_" + chars(ALNUM, 36, 11)),
    ("github oauth", "gh" + "o_" + chars(ALNUM, 36, 12)),
    ("github user-to-server", "gh" + "u_" + chars(ALNUM, 36, 13)),
    ("github server-to-server", "gh" + "s_" + chars(ALNUM, 36, 14)),
    ("github refresh", "gh" + "r_" + chars(ALNUM, 36, 15)),
    ("github fine-grained", "github" + "_pat_" + chars(ALNUM, 22, 16) + "_" + chars(ALNUM, 59, 17)),
    ("slack bot", "xo" + "xb-" + "-".join([chars(string.digits, 12, 18), chars(string.digits, 13, 19),
                                         chars(ALNUM, 24, 20)])),
    ("slack user", "xo" + "xp-" + "-".join([chars(string.digits, 12, 21), chars(ALNUM, 32, 22)])),
    ("slack app", "xa" + "pp-1-" + chars(ALNUM, 11, 23) + "-" + chars(string.digits, 13, 24) + "-"
     + chars("0123456789abcdef", 64, 25)),
    ("stripe live", "sk" + "_live_" + chars(ALNUM, 99, 26)),
    ("stripe restricted", "rk" + "_live_" + chars(ALNUM, 99, 27)),
    ("jwt", jwt()),
    ("rsa private key", pem("RSA ", 100)),
    ("private key", pem("", 110)),
    ("openssh private key", pem("OPENSSH ", 120)),
]
# (name, text, the part that must go, the part that must stay)
IN_CONTEXT: list[tuple[str, str, str, str]] = [
    ("aws secret", "aws_secret_access_key = " + chars(B64, 40, 30), chars(B64, 40, 30), "aws_secret_access_key = "),
    ("aws secret json", '"SecretAccessKey": "' + chars(ALNUM, 40, 31) + '"', chars(ALNUM, 40, 31),
     '"SecretAccessKey": "'),
    ("bearer header", "Authorization: Bearer " + chars(URLSAFE, 40, 32), chars(URLSAFE, 40, 32), "Authorization: "),
    ("basic header", "authorization: Basic " + "dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNz", "authorization: "),
    ("proxy header", "Proxy-Authorization: Basic " + chars(B64, 24, 33), chars(B64, 24, 33), "Proxy-Authorization: "),
    ("json header", '{"authorization": "Bearer ' + chars(URLSAFE, 30, 34) + '"}', chars(URLSAFE, 30, 34),
     '"authorization": "'),
    ("bearer in prose", "call it with bearer " + chars(ALNUM, 20, 35) + "9 please", chars(ALNUM, 20, 35), "please"),
    ("api_key assignment", "API_KEY=" + chars(ALNUM, 32, 36) + "1", chars(ALNUM, 32, 36), "API_KEY="),
    ("x-api-key header", "x-api-key: " + chars("0123456789abcdef", 32, 37), chars("0123456789abcdef", 32, 37),
     "x-api-key: "),
    ("password", '"password": "hunter2-' + chars(ALNUM, 6, 38) + '"', "hunter2-", '"password": "'),
    ("url credentials", "https://deploy:" + chars(ALNUM, 20, 39) + "@git.example.com/repo.git",
     chars(ALNUM, 20, 39), "@git.example.com/repo.git"),
    ("url query key", "https://maps.example.com/api?key=" + chars(ALNUM, 30, 40) + "7&q=x", chars(ALNUM, 30, 40),
     "&q=x"),
    ("access token", "access_token=" + chars(ALNUM, 30, 41) + "5", chars(ALNUM, 30, 41), "access_token="),
]


def as_logged(text: str) -> str:
    """``text`` as a logged request body holds it: a prompt inside JSON, after a newline."""

    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": f"here:\n{text}\nthanks"}]}).decode()


@pytest.mark.parametrize("name, secret", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_each_secret_format_is_removed_in_prose_and_in_a_logged_body(name: str, secret: str) -> None:
    for text in (f"my key is {secret} — keep it safe", as_logged(secret), json.dumps(as_logged(secret))):
        out = redact(text, limit=len(text))
        assert secret not in out and MARK in out, out
        # Not even a recognisable piece of it is left (a JSON-escaped key block is one string).
        assert secret[8:40].replace("\n", "") not in out.replace("\\n", "").replace("\\\\n", ""), out
    assert redact(f"my key is {secret} — keep it safe", limit=10_000).startswith("my key is [redacted]")


@pytest.mark.parametrize("name, text, secret, kept", IN_CONTEXT, ids=[c[0] for c in IN_CONTEXT])
def test_named_credentials_lose_their_value_and_keep_their_name(name: str, text: str, secret: str,
                                                                 kept: str) -> None:
    for sample in (text, as_logged(text)):
        out = redact_shapes(sample)
        assert secret not in out, out
        assert MARK in out
    assert kept in redact_shapes(text)


def test_a_private_key_cut_by_the_log_cap_goes_to_the_end() -> None:
    key = pem("EC ", 130)
    out = redact("config:\n" + key[: len(key) // 2], limit=10_000)
    assert out == "config:\n" + MARK


ORDINARY = [
    "Please make a task-list for the risk-free desk-top migration; ask-me-anything sessions too.",
    "Bearer instruments and the bearer of bad news; the key: responsibilities of a manager.",
    "The Asia-Pacific region (ASIA) and AKIA are words here, not keys.",
    '{"model": "gpt-5-mini", "max_tokens": 1024, "temperature": 0.2, "stream": true, "input_tokens": 12}',
    "sha256: " + chars("0123456789abcdef", 64, 50) + " uuid 3f2b8c1e-9a4d-4e7b-8c2f-1a2b3c4d5e6f",
    "data:image/png;base64," + chars(B64, 2000, 51),
    "See https://docs.example.com:8443/v1/guide#auth and mailto:ops@example.com for help.",
    "def handler(request):\n    token_count = len(tokens)\n    return {'key_id': key_id, 'ok': True}\n",
    "Authorization is required for this endpoint; passwords must be rotated every 90 days.",
    "The skill-set, whisk-based recipes and kiosk-mode flags: sk-8 is a shoe size, gw-1 a gateway.",
    "Basic instructions: keep the secret safe; the access key rotation runs weekly.",
    "JSON Web Tokens start with eyJ and the 'ya29' prefix belongs to Google.",
    "-----BEGIN CERTIFICATE-----\n" + chars(B64, 64, 52) + "\n-----END CERTIFICATE-----",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_passes_untouched(text: str) -> None:
    assert redact_shapes(text) == text


def test_known_keys_are_removed_whatever_their_shape() -> None:
    plain = chars("0123456789abcdef", 40, 60)  # no vendor prefix: only the set knows it
    slashy = chars(ALNUM, 20, 61) + "/" + chars(ALNUM, 12, 62) + "+=="  # base64 characters inside
    quoted = 'pass"word\\' + chars(ALNUM, 12, 63)  # JSON escapes both of its odd characters
    known = SecretSet([plain, slashy, quoted, "short"])
    for secret in (plain, slashy, quoted):
        for text in (f"key {secret}.", as_logged(secret), orjson.dumps({"k": secret}).decode(),
                     json.dumps({"k": secret}).replace("/", "\\/")):
            out = redact(text, known, limit=10_000)
            assert secret not in out and MARK in out, out
            assert json.dumps(secret)[1:-1] not in out
    # A key only as part of a longer token is another token; short keys are not matched at all.
    assert redact(f"x{plain}y short", known) == f"x{plain}y short"
    assert not SecretSet(["short", ""]) and len(known) >= 3


def test_one_known_key_is_found_among_a_thousand() -> None:
    keys = [chars(URLSAFE, 40 + i % 30, 1000 + i) for i in range(1000)]
    known = SecretSet(keys)
    text = as_logged(" ".join(["lorem"] * 50 + [keys[737]] + ["ipsum"] * 50))
    assert keys[737] not in redact(text, known, limit=10_000)


def body_16k() -> str:
    rng = random.Random(99)
    words = ("the of and to in is you that it for on are as with they be this have from one had by not "
             "what all were when your can said there use each which how their will other about many").split()
    code = 'def handle(request):\n    token = request.headers.get("x-request-id")\n    return {"ok": True}\n'
    text = ""
    while len(text) < 16_000:
        text += " ".join(rng.choice(words) for _ in range(60)) + ". " + code
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).decode()[:16_384]


def best_of(fn: object, rounds: int = 7, n: int = 50) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()  # type: ignore[operator]
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def test_redacting_a_16_kb_body_costs_a_fraction_of_a_millisecond(capsys: pytest.CaptureFixture[str]) -> None:
    body = body_16k()
    known = SecretSet([chars(URLSAFE, 50, 2000 + i) for i in range(1000)])
    shapes = best_of(lambda: redact(body, limit=16_384))
    with_known = best_of(lambda: redact(body, known, limit=16_384))
    start = time.perf_counter()
    SecretSet([chars(URLSAFE, 50, 3000 + i) for i in range(1000)])
    build = time.perf_counter() - start
    with capsys.disabled():
        print(f"\nredact a 16 KB body: {shapes * 1e6:.0f} µs; with 1,000 known keys {with_known * 1e6:.0f} µs; "
              f"building the set of 1,000 keys {build * 1e3:.1f} ms")
    # Generous bounds: a shared machine is noisy; the figures above are what to read.
    assert shapes < 0.002 and with_known < 0.0025


KEY = "sk-proj-a1b2/c3d4+e5f6=g7h8"


@pytest.mark.parametrize("spelled", [
    KEY,
    KEY.replace("/", "\\/"),  # PHP's and some Java encoders' escaped slash
    "".join(f"\\u{ord(c):04x}" for c in KEY),  # every character escaped
    "".join(f"\\u{ord(c):04X}" if i % 2 else c for i, c in enumerate(KEY)),  # some, in upper case
    json.dumps(json.dumps(KEY.replace("/", "\\/"))[1:-1])[1:-1],  # JSON inside a JSON string: escapes escaped
])
def test_a_known_key_is_removed_however_json_spells_it(spelled: str) -> None:
    from accounts.redact import without_secret

    text = f'{{"error": {{"message": "The key {spelled} may not use this model."}}}}'
    cleaned = without_secret(text, KEY)
    assert cleaned == text.replace(spelled, MARK)
    assert KEY not in json.dumps(json.loads(cleaned))
    assert redact(text, [KEY], limit=10_000) == cleaned


def test_escapes_that_spell_another_text_are_left_alone() -> None:
    from accounts.redact import without_secret

    text = '{"m": "sk\\u002dproj\\u002da1b2\\/c3d4 and C:\\\\path\\/to"}'  # the key's start only
    assert without_secret(text, KEY) == text
