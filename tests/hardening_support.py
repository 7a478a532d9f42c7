"""For the hardening tests: a JWKS served on loopback whose keys can be removed and added and
whose answers can be held (a hanging issuer), counting the fetches; tokens minted by PyJWT; the
names a gateway lists a server's tools under."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


_STRANGER: list[rsa.RSAPrivateKey] = []


def _stranger() -> rsa.RSAPrivateKey:
    if not _STRANGER:
        _STRANGER.append(new_key())
    return _STRANGER[0]


@dataclass
class Jwks:
    """An issuer's JWKS on loopback: ``keys`` (kid -> private key) is what it serves now;
    ``fetches`` counts the GETs; while ``hold`` is clear, answers wait (``waiting`` says how
    many)."""

    url: str
    keys: dict[str, rsa.RSAPrivateKey]
    fetches: int = 0
    waiting: int = 0
    hold: threading.Event = field(default_factory=threading.Event)

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks.json"

    def token(
        self,
        subject: str,
        *,
        audience: str,
        kid: str,
        key: rsa.RSAPrivateKey | None = None,
        scopes: Sequence[str] = ("mcp",),
        client_id: str | None = None,
    ) -> str:
        now = int(time.time())
        claims = {
            "iss": self.url,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "exp": now + 300,
            "scope": " ".join(scopes),
            "client_id": client_id or f"{subject}-laptop",
        }
        signing = key or self.keys[kid]
        return jwt.encode(claims, signing, algorithm="RS256", headers={"kid": kid})

    def random_kid_token(self, audience: str) -> str:
        """A token of a key the issuer never had, under a key id never seen."""
        return self.token("mallory", audience=audience, kid=uuid.uuid4().hex, key=_stranger())

    def body(self) -> bytes:
        keys = []
        for kid, key in list(self.keys.items()):
            public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            keys.append({**public, "kid": kid, "use": "sig", "alg": "RS256"})
        return json.dumps({"keys": keys}).encode()


@contextlib.contextmanager
def jwks_server(*kids: str) -> Iterator[Jwks]:
    """A JWKS endpoint on loopback serving a fresh RSA key per ``kid``."""
    state: list[Jwks] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            jwks = state[0]
            jwks.fetches += 1
            if not jwks.hold.is_set():
                jwks.waiting += 1
                jwks.hold.wait()
                jwks.waiting -= 1
            data = jwks.body()
            self.send_response(200 if self.path == "/jwks.json" else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the gateway gave up waiting
                self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    jwks = Jwks(f"http://127.0.0.1:{server.server_address[1]}", {k: new_key() for k in kids})
    jwks.hold.set()
    state.append(jwks)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield jwks
    finally:
        jwks.hold.set()
        server.shutdown()
        server.server_close()


def names(tools: Sequence[Any]) -> dict[str, str]:
    """Each listed tool by its server's own name (the part after a gateway's prefix)."""
    found: dict[str, str] = {}
    for tool in tools:
        found[tool.name] = tool.name
        _, _, tail = tool.name.partition("_")
        while tail:
            found.setdefault(tail, tool.name)
            _, _, tail = tail.partition("_")
    return found
