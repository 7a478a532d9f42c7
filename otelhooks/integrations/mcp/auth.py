"""Who is calling: bearer tokens checked for the gateway, and the identity each one carries.

Two ways to know a caller, both the ``mcp`` SDK's ``TokenVerifier`` (the SDK's bearer middleware
answers 401 with ``WWW-Authenticate``, 403 for missing scopes, and serves the protected resource
metadata of RFC 9728):

* :class:`JWTVerifier`, for OAuth set-ups: a JWT signed by a key of the issuer's JWKS, with the
  expected ``iss`` and ``aud``, not expired; scopes from ``scope`` (or ``scp``), groups from a
  configurable claim.
* :class:`TokenFileVerifier`, for small teams: a TOML file of token *hashes* with the identity
  each stands for, made with ``otelhooks mcp token add``; edited while the gateway runs (a
  removed entry is a revoked token at once).

A refused token never says why to the caller (only "invalid_token"); the reason is logged,
without the token.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import os
import secrets
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mcp.server.auth.provider import AccessToken

logger = logging.getLogger("otelhooks.mcp.auth")

TOKEN_PREFIX: Final = "ohk_"
"""The prefix of the tokens ``otelhooks mcp token add`` makes (a secret scanner can find them)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """The caller of a request: who (``subject``), through which client (``client_id``), by
    which issuer, with which scopes and groups; ``via`` says how it was established (``jwt``,
    ``token``, ``stdio`` for the one host of a stdio proxy, ``loopback`` for an unauthenticated
    local listener)."""

    subject: str | None
    client_id: str
    issuer: str | None = None
    scopes: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    via: str = "jwt"

    @property
    def label(self) -> str:
        """What the audit log names the caller by: the subject, else the client."""
        return self.subject or self.client_id

    def digest(self) -> str:
        """A stable pseudonym of the caller (issuer, subject and client), for telemetry that
        must not name people: the first 16 hex digits of a SHA-256."""
        text = "\x1f".join((self.issuer or "", self.subject or "", self.client_id))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def of(cls, token: AccessToken, via: str) -> Identity:
        """The identity an access token (from one of the verifiers here) carries."""
        claims = token.claims or {}
        groups = claims.get("groups")
        issuer = claims.get("iss")
        return cls(
            subject=token.subject,
            client_id=token.client_id,
            issuer=str(issuer) if issuer is not None else None,
            scopes=tuple(token.scopes),
            groups=tuple(str(g) for g in groups) if isinstance(groups, list) else (),
            via=via,
        )


LOCAL_STDIO: Final = Identity(subject=None, client_id="stdio-host", via="stdio")
LOOPBACK: Final = Identity(subject=None, client_id="loopback-host", via="loopback")


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        return scope.split()
    scp = claims.get("scp")
    if isinstance(scp, list):
        return [str(s) for s in scp]
    if isinstance(scp, str):
        return scp.split()
    return []


class JWTVerifier:
    """Checks JWT bearer tokens against an issuer's JWKS (fetched, cached and refreshed when an
    unknown key id appears), its ``iss``, the gateway's ``aud``, ``exp`` (with ``leeway``
    seconds) and, when given, ``required_scopes``; ``groups_claim`` names the claim listing the
    caller's groups."""

    def __init__(
        self,
        jwks_url: str,
        *,
        issuer: str,
        audience: str | Sequence[str],
        algorithms: Sequence[str] = ("RS256", "ES256", "PS256", "EdDSA"),
        groups_claim: str = "groups",
        leeway: float = 30.0,
        timeout: float = 5.0,
    ) -> None:
        import jwt

        self.issuer = issuer
        self.audience = [audience] if isinstance(audience, str) else list(audience)
        self.algorithms = list(algorithms)
        self.groups_claim = groups_claim
        self.leeway = leeway
        self._jwt = jwt
        self._keys = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300, timeout=timeout)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token a valid JWT stands for; ``None`` (and a log line saying why) for
        any other."""
        jwt = self._jwt
        try:
            key = await asyncio.to_thread(self._keys.get_signing_key_from_jwt, token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=self.algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWKClientError as exc:
            logger.warning("bearer token refused: the issuer's keys: %s", exc)
            return None
        except jwt.InvalidTokenError as exc:
            logger.info("bearer token refused: %s: %s", type(exc).__name__, exc)
            return None
        groups = claims.get(self.groups_claim)
        audience = claims.get("aud")
        resource = audience if isinstance(audience, str) else None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or claims["sub"]),
            scopes=_scopes(claims),
            expires_at=int(claims["exp"]),
            resource=resource,
            subject=str(claims["sub"]),
            claims={**claims, "groups": list(groups) if isinstance(groups, list) else []},
        )


def token_hash(token: str) -> str:
    """How the token file stores a token: its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Entry:
    subject: str
    scopes: tuple[str, ...]
    groups: tuple[str, ...]
    expires: dt.datetime | None


class TokenFileError(ValueError):
    """A token file that cannot be read: the message names the file and the problem."""


class TokenFileVerifier:
    """Bearer tokens listed (as hashes) in a TOML file::

        [[token]]
        sha256 = "…"                 # of the token; the token itself is never stored
        subject = "alice"
        scopes = ["mcp"]
        groups = ["maintainers"]
        expires = 2027-06-30T00:00:00Z   # optional

    The file is read again when it changes, so an entry removed is a token revoked at once.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._mtime: float | None = None
        self._entries: dict[str, _Entry] = {}
        self._load()

    def _load(self) -> None:
        try:
            mtime = self.path.stat().st_mtime
        except OSError as exc:
            raise TokenFileError(f"{self.path}: cannot read the token file: {exc}") from None
        if mtime == self._mtime:
            return
        try:
            data = tomllib.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise TokenFileError(f"{self.path}: not a token file: {exc}") from None
        entries: dict[str, _Entry] = {}
        for index, item in enumerate(data.get("token", [])):
            where = f"{self.path}: token {index + 1}"
            digest = item.get("sha256") if isinstance(item, dict) else None
            subject = item.get("subject") if isinstance(item, dict) else None
            if not isinstance(digest, str) or len(digest) != 64 or not isinstance(subject, str):
                raise TokenFileError(f"{where} needs sha256 (64 hex digits) and subject")
            expires = item.get("expires")
            if expires is not None and not isinstance(expires, dt.datetime):
                raise TokenFileError(f"{where}: expires must be a TOML date-time")
            if isinstance(expires, dt.datetime) and expires.tzinfo is None:
                expires = expires.replace(tzinfo=dt.UTC)
            entries[digest.lower()] = _Entry(
                subject,
                tuple(str(s) for s in item.get("scopes", [])),
                tuple(str(g) for g in item.get("groups", [])),
                expires,
            )
        self._entries, self._mtime = entries, mtime

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token a listed, unexpired token stands for; ``None`` for any other."""
        try:
            self._load()
        except TokenFileError as exc:  # keep the last good list: an edit in progress
            logger.error("%s", exc)
        # Looked up by its hash: a timing difference could tell only about hashes, not tokens.
        entry = self._entries.get(token_hash(token))
        if entry is None:
            logger.info("bearer token refused: not in %s", self.path)
            return None
        if entry.expires is not None and entry.expires <= dt.datetime.now(dt.UTC):
            logger.info("bearer token refused: the token of %s expired", entry.subject)
            return None
        return AccessToken(
            token=token,
            client_id=entry.subject,
            scopes=list(entry.scopes),
            expires_at=int(entry.expires.timestamp()) if entry.expires else None,
            subject=entry.subject,
            claims={"iss": f"file:{self.path.name}", "groups": list(entry.groups)},
        )


def add_token(
    path: str | os.PathLike[str],
    subject: str,
    *,
    scopes: Sequence[str] = (),
    groups: Sequence[str] = (),
    expires: dt.datetime | None = None,
) -> str:
    """Make a new token for ``subject``, append its hash to the token file (created, readable by
    its owner only) and return the token: the only time it is seen."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    lines = [
        "",
        "[[token]]",
        f'sha256 = "{token_hash(token)}"',
        f"subject = {_toml_string(subject)}",
        f"scopes = [{', '.join(_toml_string(s) for s in scopes)}]",
        f"groups = [{', '.join(_toml_string(g) for g in groups)}]",
    ]
    if expires is not None:
        lines.append(f"expires = {expires.astimezone(dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}")
    file = Path(path)
    new = not file.exists()
    with open(file, "a", encoding="utf-8") as out:
        if new:
            out.write("# otelhooks mcp gateway tokens: hashes only (otelhooks mcp token add)\n")
        out.write("\n".join(lines) + "\n")
    if new:
        file.chmod(0o600)
    return token


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
