"""Who is calling: bearer tokens checked for the gateway, and the identity each one carries.

Two ways to know a caller, both the ``mcp`` SDK's ``TokenVerifier`` (the SDK's bearer middleware
answers 401 with ``WWW-Authenticate``, 403 for missing scopes, and serves the protected resource
metadata of RFC 9728):

* :class:`JWTVerifier`, for OAuth set-ups: a JWT signed by a key of the issuer's JWKS, with the
  expected ``iss`` and ``aud``, not expired; scopes from ``scope`` (or ``scp``), groups from a
  configurable claim. The keys come from :class:`JWKSCache`: kept at most ``ttl`` seconds
  (default 60, so a key removed from the JWKS is refused within about a minute), fetched by one
  request at a time, an unknown key id causing at most one fetch per ``refetch`` seconds (10)
  and a failed fetch a growing back-off; nobody waits on a fetch but callers whose key is
  unknown (or when no key was ever fetched).
* :class:`TokenFileVerifier`, for small teams: a TOML file of token *hashes* with the identity
  each stands for, made with ``otelhooks mcp token add``; edited while the gateway runs (a
  removed entry is a revoked token at once).

:class:`GatewayVerifier` puts them together: a token that starts with ``ohk_`` (the token file's)
goes to the token file only and never waits on the JWKS; any other to the JWT verifier.

A refused token never says why to the caller (only "invalid_token"); the reason is kept for the
log and the audit (:class:`LoginRefusals`: one line per client address and interval, so that an
unauthenticated client cannot make the gateway write once per request), never the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime as dt
import hashlib
import logging
import os
import secrets
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mcp.server.auth.provider import AccessToken

from ...core import digest as canonical

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

    @property
    def principal(self) -> str:
        """Who it is, whatever the client: the issuer and the subject (the client when there
        is no subject). Budgets and limits count per principal."""
        return "\x1f".join((self.issuer or "", self.subject or f"client:{self.client_id}"))

    def digest(self) -> str:
        """A short key of the caller (issuer, subject and client) for tables in this process;
        never for telemetry (an unkeyed hash of a name is reversed by trying names): use
        :meth:`pseudonym` there."""
        text = "\x1f".join((self.issuer or "", self.subject or "", self.client_id))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def pseudonym(self, key: bytes) -> str:
        """A stable pseudonym of the principal for telemetry that must not name people: a keyed
        digest (see :func:`otelhooks.core.digest.pseudonym`) nobody without the key reverses."""
        return canonical.pseudonym(key, self.issuer, self.subject or f"client:{self.client_id}")

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


VIA_CLAIM: Final = "otelhooks.via"
"""The claim a verifier here adds to say how a token was checked (``token``; JWTs have none)."""

LOCAL_STDIO: Final = Identity(subject=None, client_id="stdio-host", via="stdio")
LOOPBACK: Final = Identity(subject=None, client_id="loopback-host", via="loopback")

REQUEST_SCOPE: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "otelhooks_request_scope", default=None
)
"""The ASGI scope of the HTTP request being served (its ``user`` set by the token check), for
what runs before the SDK server's middleware knows the caller."""


def identity_in(scope: Mapping[str, Any]) -> Identity:
    """The caller of an HTTP request: its bearer token's identity, else the loopback host."""
    token = getattr(scope.get("user"), "access_token", None)
    if token is None:
        return LOOPBACK
    return Identity.of(token, str((token.claims or {}).get(VIA_CLAIM, "jwt")))


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


class KeyUnavailable(Exception):
    """No key to check a token with (unknown key id, or the JWKS cannot be fetched)."""


JWKS_TTL: Final = 60.0
"""Seconds a fetched JWKS is trusted before it is fetched again (a removed key's bound)."""
JWKS_REFETCH: Final = 10.0
"""Seconds between two fetches caused by unknown key ids (and the first back-off step)."""
JWKS_MAX_BACKOFF: Final = 300.0
JWKS_MAX_STALE: Final = 3600.0
"""Seconds the last good keys are used while the JWKS cannot be fetched; then JWTs are refused."""
_MAX_JWKS_BYTES: Final = 1_000_000


class JWKSCache:
    """An issuer's signing keys, fetched from its JWKS URL (see the module's docs for the
    rules). ``fetches`` counts the fetches started."""

    def __init__(
        self,
        url: str,
        *,
        ttl: float = JWKS_TTL,
        refetch: float = JWKS_REFETCH,
        max_backoff: float = JWKS_MAX_BACKOFF,
        max_stale: float = JWKS_MAX_STALE,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.ttl, self.refetch, self.max_backoff = ttl, refetch, max_backoff
        self.max_stale, self.timeout, self.clock = max_stale, timeout, clock
        self.fetches = 0
        self._keys: dict[str, Any] = {}
        self._fetched: float | None = None  # the last good fetch
        self._next_attempt = 0.0  # no fetch for an unknown key id before this
        self._failures = 0
        self._inflight: asyncio.Future[None] | None = None

    async def key(self, kid: str) -> Any:
        """The key ``kid`` (a ``jwt.PyJWK``); :class:`KeyUnavailable` when there is none."""
        age = self._age()
        if age is None or age >= self.max_stale:
            await self._fetch_once(wait=True)  # nothing (still) trusted: wait for a fetch
        elif age >= self.ttl:
            await self._fetch_once(wait=False)  # refreshed in the background
        found = self._keys.get(kid)
        if found is None and self._fetched is not None:
            await self._fetch_once(wait=True, unknown=True)
            found = self._keys.get(kid)
        age = self._age()
        if age is None or age >= self.max_stale:
            raise KeyUnavailable(f"the issuer's keys could not be fetched from {self.url}")
        if found is None:
            raise KeyUnavailable(f"no key {kid!r} in the issuer's JWKS")
        return found

    def _age(self) -> float | None:
        return None if self._fetched is None else self.clock() - self._fetched

    async def _fetch_once(self, *, wait: bool, unknown: bool = False) -> None:
        """Start a fetch unless one is running, or an unknown key id came too soon after the
        last fetch, or a failure's back-off is not over; with ``wait``, wait for the running
        one (at most ``timeout`` seconds and a little)."""
        if self._inflight is None:
            now = self.clock()
            if now < self._next_attempt and (unknown or self._failures):
                return
            self._inflight = asyncio.ensure_future(self._fetch())
        if wait:
            with contextlib.suppress(Exception):  # the fetch logs its own failure
                await asyncio.wait_for(asyncio.shield(self._inflight), self.timeout + 1)

    async def _fetch(self) -> None:
        import httpx
        import jwt

        self.fetches += 1
        started = self.clock()
        self._next_attempt = started + self.refetch
        try:
            async with asyncio.timeout(self.timeout):
                async with (
                    httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client,
                    client.stream("GET", self.url, headers={"accept": "application/json"}) as r,
                ):
                    r.raise_for_status()
                    body = b""
                    async for chunk in r.aiter_bytes():
                        body += chunk
                        if len(body) > _MAX_JWKS_BYTES:
                            raise ValueError("the JWKS is larger than 1 MB")
            keys = jwt.PyJWKSet.from_json(body.decode()).keys
            self._keys = {k.key_id: k for k in keys if k.key_id and k.public_key_use != "enc"}
            self._fetched, self._failures = self.clock(), 0
        except Exception as exc:  # unreachable, hanging, not a JWKS: back off
            self._failures += 1
            backoff = min(self.refetch * 2 ** (self._failures - 1), self.max_backoff)
            self._next_attempt = self.clock() + backoff
            logger.warning(
                "the JWKS at %s could not be fetched (%s: %s); next try in %.0f s",
                self.url,
                type(exc).__name__,
                exc,
                backoff,
            )
        finally:
            self._inflight = None


class JWTVerifier:
    """Checks JWT bearer tokens against an issuer's keys (a :class:`JWKSCache`), its ``iss``,
    the gateway's ``aud``, ``exp`` (with ``leeway`` seconds) and, when given,
    ``required_scopes``; ``groups_claim`` names the claim listing the caller's groups."""

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
        jwks_ttl: float = JWKS_TTL,
    ) -> None:
        import jwt

        self.issuer = issuer
        self.audience = [audience] if isinstance(audience, str) else list(audience)
        self.algorithms = list(algorithms)
        self.groups_claim = groups_claim
        self.leeway = leeway
        self._jwt = jwt
        self.keys = JWKSCache(jwks_url, ttl=jwks_ttl, timeout=timeout)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token a valid JWT stands for; ``None`` (and the reason noted) for any
        other."""
        jwt = self._jwt
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") not in self.algorithms:
                refused(f"algorithm {header.get('alg')!r} is not accepted")
                return None
            kid = header.get("kid")
            if not isinstance(kid, str):
                refused("the token names no key (kid)")
                return None
            key = await self.keys.key(kid)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=self.algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except KeyUnavailable as exc:
            refused(str(exc))
            return None
        except jwt.InvalidTokenError as exc:
            refused(f"{type(exc).__name__}: {exc}")
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
            refused(f"not in {self.path.name}")
            return None
        if entry.expires is not None and entry.expires <= dt.datetime.now(dt.UTC):
            refused(f"the token of {entry.subject} expired")
            return None
        return AccessToken(
            token=token,
            client_id=entry.subject,
            scopes=list(entry.scopes),
            expires_at=int(entry.expires.timestamp()) if entry.expires else None,
            subject=entry.subject,
            claims={
                "iss": f"file:{self.path.name}",
                "groups": list(entry.groups),
                VIA_CLAIM: "token",
            },
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


class GatewayVerifier:
    """The verifiers of ``[auth]`` as one ``TokenVerifier``: a token file's token (``ohk_``)
    goes to the token file only, any other to the JWT verifier (or to the token file when
    there is no JWT verifier)."""

    def __init__(
        self, jwt: JWTVerifier | None = None, tokens: TokenFileVerifier | None = None
    ) -> None:
        if jwt is None and tokens is None:
            raise ValueError("a gateway verifier needs a JWT verifier or a token file")
        self.jwt, self.tokens = jwt, tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token ``token`` stands for, or ``None``."""
        if self.tokens is not None and (token.startswith(TOKEN_PREFIX) or self.jwt is None):
            return await self.tokens.verify_token(token)
        if self.jwt is not None:
            return await self.jwt.verify_token(token)
        refused("not a token of the token file")
        return None

    @classmethod
    def of(cls, auth: Any) -> GatewayVerifier:
        """The verifier an ``[auth]`` table (an ``AuthConfig``) asks for; a token file that
        cannot be read is a :class:`TokenFileError` now, not at the first request."""
        jwt = None
        if auth.issuer is not None:
            jwt = JWTVerifier(
                auth.jwks_url,
                issuer=auth.issuer,
                audience=list(auth.audience),
                groups_claim=auth.groups_claim,
                jwks_ttl=auth.jwks_ttl,
            )
        tokens = TokenFileVerifier(auth.tokens) if auth.tokens is not None else None
        return cls(jwt, tokens)


# -- refused logins -------------------------------------------------------------------------------


@dataclass
class RefusalNote:
    """Why the token of the request in progress was refused (``None``: not said)."""

    reason: str | None = None


_REFUSAL: contextvars.ContextVar[RefusalNote | None] = contextvars.ContextVar(
    "otelhooks_login_refusal", default=None
)


@contextlib.contextmanager
def noting_refusal() -> Iterator[RefusalNote]:
    """Within the block, the verifiers here note why they refuse a token in the note given."""
    note = RefusalNote()
    token = _REFUSAL.set(note)
    try:
        yield note
    finally:
        _REFUSAL.reset(token)


def refused(reason: str) -> None:
    """Note why a token was refused (for the log and the audit of the request)."""
    note = _REFUSAL.get()
    if note is not None:
        note.reason = reason
    logger.debug("bearer token refused: %s", reason)


@dataclass
class _Count:
    status: int
    count: int = 0
    first: float = 0.0
    last: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)


class LoginRefusals:
    """Refused logins (401 and 403), counted per client address and ``interval``: the first of
    an address in an interval is logged at WARNING with the reason; at the end of the interval
    one audit line per address says how many, when and why (at most ``max_addresses`` lines;
    the others are summed in one). An unauthenticated client so causes at most one log line
    and one audit line per interval, however many requests it sends."""

    def __init__(
        self,
        sink: Callable[[str, Mapping[str, Any]], Any] | None,
        *,
        interval: float = 60.0,
        max_addresses: int = 100,
    ) -> None:
        self.sink = sink
        self.interval = interval
        self.max_addresses = max_addresses
        self._counts: dict[tuple[str, int], _Count] = {}
        self._timer: asyncio.TimerHandle | None = None

    def refused(self, address: str, status: int, reason: str) -> None:
        """Count one refused request."""
        now = time.time()
        key = (address, status)
        count = self._counts.get(key)
        if count is None:
            if len(self._counts) >= 10 * self.max_addresses:
                key = ("(other addresses)", status)
                count = self._counts.get(key)
            if count is None:
                count = self._counts[key] = _Count(status, first=now)
                logger.warning(
                    "login refused (%d) for %s: %s (more from it are counted, not logged, "
                    "for %.0f s)",
                    status,
                    address,
                    reason,
                    self.interval,
                )
        count.count += 1
        count.last = now
        short = reason[:120]
        if short in count.reasons or len(count.reasons) < 8:
            count.reasons[short] = count.reasons.get(short, 0) + 1
        if self._timer is None:
            with contextlib.suppress(RuntimeError):  # no event loop: written at close
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(self.interval, self.flush)

    def flush(self) -> None:
        """Write what was counted (one audit line per address) and start a new interval."""
        self._timer = None
        counts, self._counts = self._counts, {}
        if self.sink is None or not counts:
            return
        ranked = sorted(counts.items(), key=lambda item: -item[1].count)
        kept, rest = ranked[: self.max_addresses], ranked[self.max_addresses :]
        for (address, _), count in kept:
            self.sink("login_refused", _fields(address, count))
        if rest:
            total = _Count(401, first=min(c.first for _, c in rest))
            total.count = sum(c.count for _, c in rest)
            total.last = max(c.last for _, c in rest)
            self.sink("login_refused", _fields(f"({len(rest)} other addresses)", total))

    def close(self) -> None:
        """Write what is still counted."""
        if self._timer is not None:
            self._timer.cancel()
        self.flush()


def _fields(address: str, count: _Count) -> dict[str, Any]:
    return {
        "client_address": address,
        "status": count.status,
        "count": count.count,
        "first": dt.datetime.fromtimestamp(count.first, dt.UTC).isoformat(timespec="seconds"),
        "last": dt.datetime.fromtimestamp(count.last, dt.UTC).isoformat(timespec="seconds"),
        "reasons": dict(count.reasons),
    }
