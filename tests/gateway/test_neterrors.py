"""Network failures: their kind for the client, aiohttp's words (redacted) for the trace."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from gateway.exchange.neterrors import NetworkFailure, client_message, failure_kind, trace_text
from tests.servers import free_port


def raised(call: Callable[[aiohttp.ClientSession], Awaitable[Any]]) -> BaseException:
    async def scenario() -> BaseException:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, connect=2)) as session:
            try:
                await call(session)
            except (aiohttp.ClientError, OSError) as exc:
                return exc
        raise AssertionError("no failure")

    return asyncio.run(scenario())


def test_a_refused_connection_is_told_as_such_without_the_address() -> None:
    port = free_port()
    exc = raised(lambda s: s.get(f"http://127.0.0.1:{port}/v1/models"))
    assert failure_kind(exc) == NetworkFailure.REFUSED
    assert client_message(failure_kind(exc)) == "The upstream could not be reached (connection refused)"
    assert f"127.0.0.1:{port}" in trace_text(exc)  # ops see where


def test_an_unknown_host_is_a_name_failure_and_only_the_trace_names_it() -> None:
    exc = raised(lambda s: s.get("http://internal-llm.example.invalid:8443/v1"))
    assert failure_kind(exc) == NetworkFailure.DNS
    assert "internal-llm" not in client_message(failure_kind(exc))
    assert "internal-llm.example.invalid:8443" in trace_text(exc)


def test_a_proxy_that_cannot_be_reached_is_a_proxy_error_and_its_password_is_never_kept() -> None:
    port = free_port()
    exc = raised(lambda s: s.get("http://127.0.0.1:9/v1", proxy=f"http://ops:proxy-pass-123456@127.0.0.1:{port}"))
    assert failure_kind(exc) == NetworkFailure.PROXY
    assert "proxy-pass" not in trace_text(exc)


def test_timeouts_tls_and_lost_connections_by_kind() -> None:
    assert failure_kind(asyncio.TimeoutError()) == NetworkFailure.TIMEOUT
    assert trace_text(asyncio.TimeoutError()) == "timed out: waiting for the upstream"
    assert failure_kind(aiohttp.ServerDisconnectedError()) == NetworkFailure.LOST
    assert failure_kind(aiohttp.ClientPayloadError("cut")) == NetworkFailure.LOST
    assert failure_kind(ssl.SSLCertVerificationError("certificate verify failed")) == NetworkFailure.TLS
    assert failure_kind(socket.gaierror(-2, "Name or service not known")) == NetworkFailure.DNS
    assert failure_kind(OSError(113, "No route to host")) == NetworkFailure.OTHER


def test_a_certificate_the_gateway_does_not_trust_is_a_tls_error(tmp_path: Any) -> None:
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def scenario() -> BaseException:
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        try:
            async with aiohttp.ClientSession() as session:
                try:
                    await session.get(f"https://127.0.0.1:{port}/")
                except aiohttp.ClientError as exc:
                    return exc
        finally:
            server.close()
        raise AssertionError("no failure")

    exc = asyncio.run(scenario())
    assert failure_kind(exc) == NetworkFailure.TLS
    assert client_message(failure_kind(exc)) == "The upstream could not be reached (TLS error)"


def self_signed(tmp_path: Any) -> tuple[str, str]:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.mark.parametrize("kind", list(NetworkFailure))
def test_no_client_message_names_anything_of_the_deployment(kind: NetworkFailure) -> None:
    message = client_message(kind)
    assert message.startswith("The upstream could not be reached (") and not any(c.isdigit() for c in message)
