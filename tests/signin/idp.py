"""A scripted OpenID Connect identity provider on loopback, for the verification page's company login.

It serves what a real provider does for the authorization code flow: discovery, ``/authorize``
(which signs in the scripted person at once and redirects back with a code), ``/token`` (checks the
code, the redirect URI, the client's secret and the PKCE verifier, and answers an RS256-signed ID
token carrying the nonce, e-mail and groups) and the JWKS to check it with.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

from joserfc import jwt
from joserfc.jwk import RSAKey

CLIENT_ID, CLIENT_SECRET = "gateway", "idp-secret-for-tests"


@dataclass
class Person:
    sub: str
    email: str
    groups: list[str]
    name: str = ""


@dataclass
class IdP:
    port: int = 0
    person: Person = field(default_factory=lambda: Person("u-1001", "bob@corp.example", ["eng-platform"], "bob"))
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256"}))
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    token_requests: int = 0
    server: ThreadingHTTPServer | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> IdP:
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                if url.path == "/.well-known/openid-configuration":
                    self._json(idp.discovery())
                elif url.path == "/jwks":
                    self._json({"keys": [idp.key.as_dict(private=False)]})
                elif url.path == "/authorize":
                    query = {k: v[0] for k, v in parse_qs(url.query).items()}
                    self.send_response(302)
                    self.send_header("Location", idp.authorize(query))
                    self.end_headers()
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()).items()}
                if urlparse(self.path).path != "/token":
                    self.send_error(404)
                    return
                status, body = idp.token(form, self.headers.get("Authorization", ""))
                self._json(body, status)

            def _json(self, body: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def discovery(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "authorization_endpoint": self.issuer + "/authorize",
                "token_endpoint": self.issuer + "/token", "jwks_uri": self.issuer + "/jwks",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"]}

    def authorize(self, query: dict[str, str]) -> str:
        """The person signs in at once: back to the client with a code (or an error for a wrong client)."""

        if query.get("client_id") != CLIENT_ID or query.get("response_type") != "code":
            return f"{query.get('redirect_uri', '')}?{urlencode({'error': 'unauthorized_client'})}"
        code = secrets.token_urlsafe(16)
        self.codes[code] = query
        return f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query.get('state', '')})}"

    def token(self, form: dict[str, str], authorization: str) -> tuple[int, dict[str, Any]]:
        self.token_requests += 1
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        if authorization.startswith("Basic "):
            client_id, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
        if (client_id, secret) != (CLIENT_ID, CLIENT_SECRET):
            return 401, {"error": "invalid_client"}
        asked = self.codes.pop(form.get("code", ""), None)
        if asked is None or form.get("redirect_uri") != asked["redirect_uri"]:
            return 400, {"error": "invalid_grant"}
        if "code_challenge" in asked:
            verifier = form.get("code_verifier", "").encode()
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
            if challenge != asked["code_challenge"]:
                return 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": self.person.sub, "aud": CLIENT_ID, "iat": now, "exp": now + 300,
                  "email": self.person.email, "email_verified": True, "groups": self.person.groups,
                  "preferred_username": self.person.name or self.person.sub}
        if "nonce" in asked:
            claims["nonce"] = asked["nonce"]
        id_token = jwt.encode({"alg": "RS256", "kid": "k1"}, claims, self.key)
        return 200, {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer", "expires_in": 300,
                     "id_token": id_token}
