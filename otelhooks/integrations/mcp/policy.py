"""The policy file of ``otelhooks mcp proxy``: TOML in, hooks and upstreams out.

::

    [proxy]
    timeout = 60                      # seconds per tools/call (default 180)

    [[upstream]]                      # optional: or give one command after "--"
    name = "git"
    command = ["uvx", "mcp-server-git", "--repository", "."]
    inherit_env = ["LANG"]            # variables passed on beside HOME, PATH... (an allowlist)

    [tools]
    deny = ["git_reset", "git_commit"]   # names or globs; allow = [...] makes it default-deny
    timeouts = { git_log = 10 }

    [[guard]]
    kind = "path"                     # path | url_host | pattern
    argument = "repo_path"            # also its list form (repo_paths); arguments = [...] more
    root = "."
    # relative_to = "."               # what the server resolves relative paths against

    [[limit]]
    max_calls = 50
    tools = ["git_log"]

    [redaction]
    enabled = true                    # the default; patterns = [{ kind = "...", regex = "..." }]
    # exclude = ["unlabelled"]        # built-in detectors not to run (see the redaction docs)

    [[hook]]
    import = "my_package.hooks:AuditHook"   # an object, or a class/factory called with args
    args = { level = "info" }

    [cedar]                           # Cedar policies (the `cedar` extra): the same files as
    policies = "policies.cedar"       # otelhooks.builtin.CedarPolicy in-process
    entities = "entities.json"        # optional: Cedar's JSON entities (users, groups...)
    schema = "schema.cedarschema.json"  # optional: merged into the generated schema
    approval_timeout = 300            # seconds an asked call waits for its approval

A file with an error is refused as a whole with :class:`PolicyError` naming the file, the line
and the problem: an unknown key, a value of the wrong type, a regex that does not compile, a hook
that cannot be imported. Nothing is ever half-loaded into an allow-all proxy. Relative paths in it
(guard roots, the token file, the audit log, the store) are relative to the file.
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
import os
import re
import shlex
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from ...builtin import (
    ArgumentPattern,
    CallLimit,
    PathGuard,
    Redactor,
    ToolAllowList,
    ToolDenyList,
    UrlHostGuard,
)
from ...core.hooks import FAIL_CLOSED, FAIL_OPEN
from .access import IdentityRule

FAILURE_POLICIES: Final = (FAIL_CLOSED, FAIL_OPEN)
DEFAULT_MAX_RESULT_BYTES: Final = 1_040_000
"""The largest result sent to a host over SSE (clients cut events at 1 MiB; room for the rest)."""
DEFAULT_START_TIMEOUT: Final = 30.0
"""Seconds an upstream has to start and answer ``initialize`` and ``tools/list``."""
DEFAULT_IDLE_TIMEOUT: Final = 600.0
"""Seconds after which upstream processes nobody used are stopped."""
DEFAULT_MAX_SESSIONS: Final = 64
"""Upstream sessions (each a process per stdio upstream) open at once, in all."""
DEFAULT_MAX_SESSIONS_PER_IDENTITY: Final = 8
"""Upstream sessions open at once for one identity."""
DEFAULT_APPROVAL_TIMEOUT: Final = 300.0
"""Seconds a call Cedar asks an approval for waits for it (then it is blocked)."""
DEFAULT_HEADER_TIMEOUT: Final = 10.0
"""Seconds a client has to send a request's headers (and each part of its body)."""
BASE_ENVIRONMENT: Final = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What every stdio upstream gets of the proxy's environment (the ``mcp`` SDK's own minimal
set); ``inherit_env`` names more."""
_NEVER_INHERITED: Final = re.compile(r"^(OTELHOOKS_.*|OTEL_EXPORTER_.*HEADERS.*)$", re.IGNORECASE)
"""Variables no upstream gets: otelhooks' own (the audit key among them) and exporter headers
(they carry credentials)."""


def never_inherited(name: str, audit_key_env: str | None = None) -> bool:
    """Whether ``name`` is a variable no upstream may get, named or not."""
    return bool(_NEVER_INHERITED.match(name)) or name == audit_key_env


class PolicyError(ValueError):
    """A policy file that cannot be used, with where and why: ``file:line: problem``."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        self.path, self.line, self.problem = path, line, problem
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    """One upstream server: a command line (stdio) or a URL (Streamable HTTP)."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    prefix: str | None = None
    timeout: float | None = None
    start_timeout: float = DEFAULT_START_TIMEOUT
    inherit_env: tuple[str, ...] = ()  # more of the proxy's variables (names, or NAME_* globs)
    mode: str = "auto"  # protocol negotiation: "auto", "legacy" or a version
    roots: tuple[str, ...] = ()  # the directories the upstream may be told (absolute paths)

    def environment(self, audit_key_env: str | None = None) -> dict[str, str] | None:
        """The upstream process's whole environment, an allowlist: :data:`BASE_ENVIRONMENT`
        and the variables ``inherit_env`` names, from the proxy's own, then ``env``; never a
        variable :func:`never_inherited` refuses (``audit_key_env`` among them)."""
        if self.url is not None:
            return None
        out: dict[str, str] = {}
        for name, value in os.environ.items():
            if never_inherited(name, audit_key_env):
                continue
            if name in BASE_ENVIRONMENT or any(
                fnmatch.fnmatchcase(name, pattern) for pattern in self.inherit_env
            ):
                out[name] = value
        out.update((k, v) for k, v in self.env.items() if not never_inherited(k, audit_key_env))
        return out

    def tool_name(self, name: str) -> str:
        """The name the proxy serves the upstream's tool ``name`` under: ``{prefix}_{name}``
        when the upstream has a ``prefix``, else ``name`` itself (characters hosts refuse
        replaced). The rule is the same whatever the number of upstreams."""
        from .naming import exposed_name

        return exposed_name(name, self.prefix)


@dataclass(frozen=True, slots=True)
class HookSpec:
    """A hook object to register, with the options ``Hooks.add`` takes."""

    hook: Any
    tools: tuple[str, ...] | None = None
    timeout: float | None = None
    before_failure: str | None = None
    after_failure: str | None = None


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """``[auth]``: how callers prove who they are (JWTs from an issuer, or a token file)."""

    resource: str | None = None  # this gateway's URL: the default audience, and RFC 9728's
    issuer: str | None = None
    jwks_url: str | None = None
    audience: tuple[str, ...] = ()
    tokens: str | None = None  # a token file (hashes only)
    required_scopes: tuple[str, ...] = ()
    groups_claim: str = "groups"
    unmatched: str = "deny"  # an identity no [[identity]] rule matches: deny, or allow
    identity_in_telemetry: str = "hash"  # hash | plain | none
    jwks_ttl: float = 60.0  # seconds a JWKS is trusted (at most 60: a removed key's bound)


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """``[audit]``: where the audit log goes and how it is chained."""

    file: str
    key_env: str | None = None  # the environment variable holding the secret
    key_file: str | None = None  # else this file (default: <file>.key, made once, mode 0600)
    fsync: bool = True
    record_gap: bool = False  # a log that does not match its head: a gap record, not a refusal


@dataclass(frozen=True, slots=True)
class PinningConfig:
    """``[pinning]``: tool definition pinning (on by default)."""

    enabled: bool = True
    approve: Mapping[str, str] = field(default_factory=dict)  # tool -> approved hash
    new_tools: str = "pin"  # pin | block
    import_file: str | None = None  # a pin file of an earlier version, imported into the store


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """``[store]``: where pins, pin approvals and call approvals are kept (one SQLite file)."""

    file: str | None = None  # default: $XDG_STATE_HOME/otelhooks/gateway.sqlite3


@dataclass(frozen=True, slots=True)
class CedarConfig:
    """``[cedar]``: Cedar policies, optional entities and schema (loaded and checked when the
    file is read; validated against the tools' schemas at start)."""

    policies: str
    entities: str | None = None
    schema: str | None = None
    approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT
    engine: Any = None  # the CedarEngine the files were loaded into


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """``[http]``: the Streamable HTTP listener (``--listen``)."""

    allowed_hosts: tuple[str, ...] = ()  # Host headers accepted (default: the listen address)
    allowed_origins: tuple[str, ...] = ()  # Origin headers accepted (default: none)
    responses: str = "sse"  # sse (progress and requests to the host work) | json
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES  # larger than an SSE event: refused
    header_timeout: float = DEFAULT_HEADER_TIMEOUT  # a client slower to send its headers: cut


@dataclass(frozen=True, slots=True)
class ProxyPolicy:
    """What a policy file says. :func:`load_policy` builds it; ``ProxyPolicy()`` is the default:
    every tool allowed, redaction on, hooks failing closed before and open after."""

    source: str = "(defaults)"
    name: str = "otelhooks-proxy"
    timeout: float | None = None
    list_denied: bool = False
    strict: bool = True  # a tool pattern that matches no upstream tool stops the start
    upstreams: tuple[UpstreamConfig, ...] = ()
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    tool_timeouts: Mapping[str, float] = field(default_factory=dict)
    hooks: tuple[HookSpec, ...] = ()
    redaction: bool = True
    redactor: Redactor = field(default_factory=Redactor)
    before_failure: str = FAIL_CLOSED
    after_failure: str = FAIL_OPEN
    isolation: str = "host"  # host: upstream sessions per host session | shared: per identity
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_sessions_per_identity: int = DEFAULT_MAX_SESSIONS_PER_IDENTITY
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    auth: AuthConfig | None = None
    identities: tuple[IdentityRule, ...] = ()
    audit: AuditConfig | None = None
    pinning: PinningConfig = field(default_factory=PinningConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    cedar: CedarConfig | None = None

    def hook_specs(self) -> list[HookSpec]:
        """Every hook the policy asks for, in the order they run: deny, allow, then the guards,
        limits and Python hooks in file order."""
        specs: list[HookSpec] = []
        if self.deny:
            specs.append(HookSpec(ToolDenyList(self.deny)))
        if self.allow is not None:
            specs.append(HookSpec(ToolAllowList(self.allow)))
        specs.extend(self.hooks)
        return specs

    def denies(self, tool: str) -> bool:
        """Whether the allow/deny lists alone stop ``tool`` (hidden from ``tools/list``)."""
        if any(fnmatch.fnmatchcase(tool, p) for p in self.deny):
            return True
        return self.allow is not None and not any(fnmatch.fnmatchcase(tool, p) for p in self.allow)


# -- reading ---------------------------------------------------------------------------------------


class _Reader:
    """Typed access to one table of the file, with errors that point at the line."""

    def __init__(self, loader: _Loader, table: Mapping[str, Any], where: tuple[str, int]) -> None:
        self.loader, self.table, self.where = loader, table, where
        self.seen: set[str] = set()

    def fail(self, key: str | None, problem: str) -> PolicyError:
        return self.loader.error(self.where, key, problem)

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        self.seen.add(key)
        if key not in self.table:
            return default
        value = self.table[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if not ok:
            names = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            raise self.fail(key, f"{key} must be {names}, not {_describe(value)}")
        return value

    def number(self, key: str, *, positive: bool = True) -> float | None:
        value = self.get(key, (int, float))
        if value is not None and positive and value <= 0:
            raise self.fail(key, f"{key} must be greater than 0, not {value}")
        return float(value) if value is not None else None

    def strings(self, key: str, default: Any = None) -> tuple[str, ...] | None:
        value = self.get(key, (list, str), default)
        if value is None or value is default:
            return value
        items = [value] if isinstance(value, str) else value
        for item in items:
            if not isinstance(item, str):
                raise self.fail(key, f"{key} must list strings, not {_describe(item)}")
        return tuple(items)

    def string_map(self, key: str) -> dict[str, str]:
        value = self.get(key, dict, {})
        out: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(v, str):
                raise self.fail(key, f"{key}.{k} must be a string, not {_describe(v)}")
            out[k] = os.path.expandvars(v)
        return out

    def failure(self, key: str) -> str | None:
        value = self.get(key, str)
        if value is not None and value not in FAILURE_POLICIES:
            raise self.fail(
                key, f"{key} must be one of {', '.join(FAILURE_POLICIES)}, not {value!r}"
            )
        return value  # type: ignore[no-any-return]

    def done(self, label: str) -> None:
        """Refuse keys nobody read: a typo must not be ignored."""
        for key in self.table:
            if key not in self.seen:
                close = difflib.get_close_matches(key, sorted(self.seen), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                known = ", ".join(sorted(self.seen))
                raise self.fail(key, f"unknown key {key!r} in {label} ({hint}known: {known})")


_TYPE_NAMES: Final = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a table",
}


def _describe(value: Any) -> str:
    return f"{_TYPE_NAMES.get(type(value), type(value).__name__)} ({value!r})"


class _Loader:
    def __init__(self, path: str, text: str) -> None:
        self.path, self.lines = path, text.splitlines()

    def error(self, where: tuple[str, int], key: str | None, problem: str) -> PolicyError:
        return PolicyError(self.path, self.line_of(where, key), problem)

    def line_of(self, where: tuple[str, int], key: str | None) -> int | None:
        """The line of ``key`` in the ``index``-th ``[table]`` / ``[[table]]`` named ``where``
        (the table's own line when the key is not found; None at the top level)."""
        table, index = where
        if not table and key is not None:  # a top-level key may be a table of its own
            own = re.compile(r"^\s*\[\[?\s*" + re.escape(key) + r"\s*\]\]?\s*(#.*)?$")
            for number, line in enumerate(self.lines, 1):
                if own.match(line):
                    return number
        header = re.compile(r"^\s*\[\[?\s*" + re.escape(table) + r"\s*\]\]?\s*(#.*)?$")
        any_header = re.compile(r"^\s*\[")
        key_line = (
            re.compile(r"^\s*(\"?)" + re.escape(key) + r"\1\s*=") if key is not None else None
        )
        seen, start = -1, None
        for number, line in enumerate(self.lines, 1):
            if table and header.match(line):
                seen += 1
                if seen == index:
                    start = number
                    if key_line is None:
                        return number
                    continue
            if start is None and table:
                continue
            if start is not None and any_header.match(line) and number != start:
                return start
            if key_line is not None and key_line.match(line):
                return number
        return start


def load_policy(path: str | os.PathLike[str]) -> ProxyPolicy:
    """Read a policy file; raises :class:`PolicyError` (file, line, problem) when it is wrong."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(
            source, None, f"cannot read the policy file: {exc.strerror or exc}"
        ) from None
    return parse_policy(text, source, base=Path(path).resolve().parent)


def parse_policy(text: str, source: str = "<policy>", *, base: Path | None = None) -> ProxyPolicy:
    """Read policy TOML from ``text`` (``source`` names it in errors; relative paths in it are
    relative to ``base``, default the working directory)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11's error has the position only in its text: "... (at line 3, column 7)"
        found = re.search(r"\(at line (\d+), column (\d+)\)$", str(exc))
        message = re.sub(r" \(at (line \d+, column \d+|end of document)\)$", "", str(exc))
        if found:
            message += f" (column {found.group(2)})"
        line = int(found.group(1)) if found else None
        raise PolicyError(source, line, f"not valid TOML: {message}") from None
    loader = _Loader(source, text)
    top = _Reader(loader, data, ("", 0))
    base = base or Path.cwd()

    proxy = _Reader(loader, top.get("proxy", dict, {}), ("proxy", 0))
    name = proxy.get("name", str, "otelhooks-proxy")
    timeout = proxy.number("timeout")
    if "prefix" in proxy.table:
        raise proxy.fail(
            "prefix",
            'prefix is set per upstream: [[upstream]] prefix = "git" serves its tools as '
            "git_<name>; without it a tool keeps its own name, however many upstreams there are",
        )
    list_denied = proxy.get("list_denied", bool, False)
    strict = proxy.get("strict", bool, True)
    isolation = _choice(proxy, "isolation", ("host", "shared"), "host")
    max_sessions = _count(proxy, "max_sessions", DEFAULT_MAX_SESSIONS)
    per_identity = _count(proxy, "max_sessions_per_identity", DEFAULT_MAX_SESSIONS_PER_IDENTITY)
    idle_timeout = proxy.number("idle_timeout") or DEFAULT_IDLE_TIMEOUT
    proxy.done("[proxy]")

    upstreams = tuple(_upstreams(loader, top.get("upstream", list, []), base))

    tools = _Reader(loader, top.get("tools", dict, {}), ("tools", 0))
    allow = tools.strings("allow")
    deny = tools.strings("deny", ()) or ()
    timeouts: dict[str, float] = {}
    for tool, value in tools.get("timeouts", dict, {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise tools.fail("timeouts", f"timeouts.{tool} must be a number of seconds > 0")
        timeouts[tool] = float(value)
    tools.done("[tools]")

    failure = _Reader(loader, top.get("failure", dict, {}), ("failure", 0))
    before_failure = failure.failure("before") or FAIL_CLOSED
    after_failure = failure.failure("after") or FAIL_OPEN
    failure.done("[failure]")

    hooks: list[HookSpec] = []
    for index, table in enumerate(top.get("guard", list, [])):
        hooks.append(
            _guard(_Reader(loader, _table(loader, table, "guard", index), ("guard", index)), base)
        )
    for index, table in enumerate(top.get("limit", list, [])):
        hooks.append(
            _limit(_Reader(loader, _table(loader, table, "limit", index), ("limit", index)))
        )
    for index, table in enumerate(top.get("hook", list, [])):
        hooks.append(
            _python_hook(_Reader(loader, _table(loader, table, "hook", index), ("hook", index)))
        )

    red = _Reader(loader, top.get("redaction", dict, {}), ("redaction", 0))
    redaction = red.get("enabled", bool, True)
    exclude = red.strings("exclude", ()) or ()
    try:
        redactor = Redactor(exclude=exclude) if redaction else Redactor.disabled()
    except ValueError as exc:
        raise red.fail("exclude", str(exc)) from None
    for index, entry in enumerate(red.get("patterns", list, [])):
        if not isinstance(entry, dict) or not isinstance(entry.get("regex"), str):
            raise red.fail("patterns", f"patterns[{index}] must be a table with kind and regex")
        try:
            redactor.add_pattern(str(entry.get("kind", "custom")), entry["regex"])
        except re.error as exc:
            raise red.fail("patterns", f"patterns[{index}].regex does not compile: {exc}") from None
    red.done("[redaction]")
    auth = (
        _auth(_Reader(loader, top.get("auth", dict, {}), ("auth", 0)), base)
        if "auth" in data
        else None
    )
    identities = tuple(
        _identity(_Reader(loader, _table(loader, t, "identity", i), ("identity", i)), base, loader)
        for i, t in enumerate(top.get("identity", list, []))
    )
    names = [rule.name for rule in identities]
    if len(set(names)) != len(names):
        raise top.fail("identity", f"[[identity]] names must differ: {names}")
    if identities and auth is None:
        raise top.fail("identity", "[[identity]] rules need [auth] (who else would they name?)")
    audit = (
        _audit(_Reader(loader, top.get("audit", dict, {}), ("audit", 0)), base)
        if "audit" in data
        else None
    )
    pinning = _pinning(_Reader(loader, top.get("pinning", dict, {}), ("pinning", 0)), base)
    store = _store(_Reader(loader, top.get("store", dict, {}), ("store", 0)), base)
    http = _http(_Reader(loader, top.get("http", dict, {}), ("http", 0)))
    cedar = (
        _cedar(_Reader(loader, top.get("cedar", dict), ("cedar", 0)), base)
        if "cedar" in top.table
        else None
    )
    top.done("the policy")
    if audit is not None and audit.key_env:
        for index, upstream in enumerate(upstreams):
            named = [*upstream.env, *upstream.inherit_env]
            if any(fnmatch.fnmatchcase(audit.key_env, n) for n in named):
                raise loader.error(
                    ("upstream", index),
                    "env",
                    f"upstream {upstream.name!r} would get {audit.key_env}, the audit log's key: "
                    "no upstream may hold it",
                )
    _check_names(loader, upstreams)

    return ProxyPolicy(
        source=source,
        name=name,
        timeout=timeout,
        list_denied=list_denied,
        strict=strict,
        upstreams=upstreams,
        allow=allow,
        deny=deny,
        tool_timeouts=timeouts,
        hooks=tuple(hooks),
        redaction=redaction,
        redactor=redactor,
        before_failure=before_failure,
        after_failure=after_failure,
        isolation=isolation,
        max_sessions=max_sessions,
        max_sessions_per_identity=per_identity,
        idle_timeout=idle_timeout,
        auth=auth,
        identities=identities,
        audit=audit,
        pinning=pinning,
        store=store,
        http=http,
        cedar=cedar,
    )


def _count(r: _Reader, key: str, default: int) -> int:
    value = r.get(key, int, default)
    if value < 1:
        raise r.fail(key, f"{key} must be an integer >= 1, not {value}")
    return int(value)


def _check_names(loader: _Loader, upstreams: Sequence[UpstreamConfig]) -> None:
    """Two upstreams with the same prefix (or none) may serve a tool of one name: their tools
    are told apart only at start, so the prefixes must at least differ."""
    seen: dict[str | None, str] = {}
    for index, upstream in enumerate(upstreams):
        if upstream.prefix is not None and upstream.prefix in seen:
            raise loader.error(
                ("upstream", index),
                "prefix",
                f"upstreams {seen[upstream.prefix]!r} and {upstream.name!r} have the same "
                f"prefix {upstream.prefix!r}",
            )
        seen.setdefault(upstream.prefix, upstream.name)


def _choice(r: _Reader, key: str, choices: Sequence[str], default: str) -> str:
    value = r.get(key, str, default)
    if value not in choices:
        raise r.fail(key, f"{key} must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _auth(r: _Reader, base: Path) -> AuthConfig:
    resource = r.get("resource", str)
    issuer, jwks_url = r.get("issuer", str), r.get("jwks_url", str)
    audience = r.strings("audience", ()) or ((resource,) if resource else ())
    tokens = r.get("tokens", str)
    if tokens is not None:
        tokens = str(base / os.path.expanduser(tokens))
    jwks_ttl = r.number("jwks_ttl")
    if jwks_ttl is not None and jwks_ttl > 60:
        raise r.fail(
            "jwks_ttl",
            f"jwks_ttl must be at most 60 seconds (a removed key's bound), not {jwks_ttl:g}",
        )
    config = AuthConfig(
        resource=resource,
        issuer=issuer,
        jwks_url=jwks_url,
        audience=tuple(audience),
        tokens=tokens,
        required_scopes=r.strings("required_scopes", ()) or (),
        groups_claim=r.get("groups_claim", str, "groups"),
        unmatched=_choice(r, "unmatched", ("deny", "allow"), "deny"),
        identity_in_telemetry=_choice(
            r, "identity_in_telemetry", ("hash", "plain", "none"), "hash"
        ),
        jwks_ttl=jwks_ttl or 60.0,
    )
    r.done("[auth]")
    if (issuer is None) != (jwks_url is None):
        raise r.fail(None, "JWT authentication needs both issuer and jwks_url")
    if issuer is None and tokens is None:
        raise r.fail(None, "[auth] needs issuer and jwks_url (JWTs), or tokens (a token file)")
    if issuer is not None and not audience:
        raise r.fail(None, "JWT authentication needs audience (or resource, its default)")
    return config


def _identity(r: _Reader, base: Path, loader: _Loader) -> IdentityRule:
    name = r.get("name", str)
    if not name:
        raise r.fail(None, "an [[identity]] needs a name (the audit log names the rule by it)")
    max_calls = r.get("max_calls", int)
    rate = r.number("rate")
    guards = tuple(
        _guard(
            _Reader(loader, _table(loader, t, "identity.guard", i), ("identity.guard", i)), base
        ).hook
        for i, t in enumerate(r.get("guard", list, []))
    )
    if "allow" in r.table:
        raise r.fail(
            "allow",
            "an identity rule lists the tools it may call as tools = [...] (and what else it "
            "may use as resources, prompts, completion and logging)",
        )
    rule = IdentityRule(
        name=name,
        subjects=r.strings("subjects", ()) or (),
        client_ids=r.strings("client_ids", ()) or (),
        groups=r.strings("groups", ()) or (),
        scopes=r.strings("scopes", ()) or (),
        tools=r.strings("tools", ()) or (),
        deny=r.strings("deny", ()) or (),
        resources=r.strings("resources", ()) or (),
        prompts=r.strings("prompts", ()) or (),
        completion=r.get("completion", bool, False),
        logging=r.get("logging", bool, False),
        max_calls=max_calls,
        rate=rate,
        guards=guards,
    )
    r.done("[[identity]]")
    if max_calls is not None and max_calls < 0:
        raise r.fail("max_calls", "max_calls must be an integer >= 0")
    return rule


def _audit(r: _Reader, base: Path) -> AuditConfig:
    file = r.get("file", str)
    key_env, key_file = r.get("key_env", str), r.get("key_file", str)
    config = AuditConfig(
        file=str(base / os.path.expanduser(file)) if file else "",
        key_env=key_env,
        key_file=str(base / os.path.expanduser(key_file)) if key_file else None,
        fsync=r.get("fsync", bool, True),
    )
    r.done("[audit]")
    if not file:
        raise r.fail(None, "[audit] needs file, the audit log's path")
    if key_env and key_file:
        raise r.fail("key_file", "[audit] takes key_env or key_file, not both")
    return config


def _store(r: _Reader, base: Path) -> StoreConfig:
    file = r.get("file", str)
    config = StoreConfig(file=str(base / os.path.expanduser(file)) if file else None)
    r.done("[store]")
    return config


def _pinning(r: _Reader, base: Path) -> PinningConfig:
    if "file" in r.table:
        raise r.fail(
            "file",
            "pins are kept in the store now: [store] file = ... (import a pin file of an "
            'earlier version once with [pinning] import = "..." instead of file)',
        )
    imported = r.get("import", str)
    approve = r.string_map("approve")
    config = PinningConfig(
        enabled=r.get("enabled", bool, True),
        approve=approve,
        new_tools=_choice(r, "new_tools", ("pin", "block"), "pin"),
        import_file=str(base / os.path.expanduser(imported)) if imported else None,
    )
    r.done("[pinning]")
    for tool, digest in approve.items():
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            raise r.fail("approve", f"approve.{tool} must be sha256: and 64 hex digits")
    return config


def _cedar(r: _Reader, base: Path) -> CedarConfig:
    def path(key: str) -> str | None:
        value = r.get(key, str)
        return str(base / os.path.expanduser(value)) if value else None

    policies, entities, schema = path("policies"), path("entities"), path("schema")
    timeout = r.number("approval_timeout") or DEFAULT_APPROVAL_TIMEOUT
    r.done("[cedar]")
    if policies is None:
        raise r.fail(None, "[cedar] needs policies, the .cedar file")
    try:
        from ...builtin.cedar_engine import CedarEngine
    except ImportError:
        raise r.fail(None, "[cedar] needs cedarpy: pip install 'otelhooks[cedar]'") from None
    from ...builtin.cedar_source import CedarError

    try:
        engine = CedarEngine(policies, entities, schema)
    except CedarError as exc:  # the Cedar file's own place
        raise PolicyError(exc.path, exc.line, exc.problem) from None
    return CedarConfig(policies, entities, schema, timeout, engine)


def _http(r: _Reader) -> HttpConfig:
    size = r.get("max_result_bytes", int, DEFAULT_MAX_RESULT_BYTES)
    config = HttpConfig(
        allowed_hosts=r.strings("allowed_hosts", ()) or (),
        allowed_origins=r.strings("allowed_origins", ()) or (),
        responses=_choice(r, "responses", ("sse", "json"), "sse"),
        max_result_bytes=size,
        header_timeout=r.number("header_timeout") or DEFAULT_HEADER_TIMEOUT,
    )
    r.done("[http]")
    if size <= 0:
        raise r.fail("max_result_bytes", "max_result_bytes must be greater than 0")
    return config


def _table(loader: _Loader, value: Any, name: str, index: int) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise loader.error((name, index), None, f"each {name} must be a [[{name}]] table")
    return value


def _upstreams(loader: _Loader, tables: list[Any], base: Path) -> Iterator[UpstreamConfig]:
    names: set[str] = set()
    for index, table in enumerate(tables):
        r = _Reader(loader, _table(loader, table, "upstream", index), ("upstream", index))
        name = r.get("name", str)
        if not name:
            raise r.fail(None, "an [[upstream]] needs a name")
        if name in names:
            raise r.fail("name", f"two upstreams are named {name!r}")
        names.add(name)
        command = r.get("command", (list, str))
        url = r.get("url", str)
        cwd = r.get("cwd", str)
        env, headers = r.string_map("env"), r.string_map("headers")
        prefix, timeout = r.get("prefix", str), r.number("timeout")
        start_timeout = r.number("start_timeout")
        if isinstance(r.table.get("inherit_env"), bool):
            raise r.fail(
                "inherit_env",
                "inherit_env names the variables an upstream gets beside "
                f'{", ".join(BASE_ENVIRONMENT)} (an allowlist): inherit_env = ["LANG"]; '
                "give values of its own in env = {...}",
            )
        inherit_env = r.strings("inherit_env", ()) or ()
        mode = r.get("mode", str, "auto")
        roots = r.strings("roots", ()) or ()
        r.done("[[upstream]]")  # a misspelt key is named before anything else is checked
        for variable in (*env, *inherit_env):
            if never_inherited(variable):
                raise r.fail(
                    "env" if variable in env else "inherit_env",
                    f"upstream {name!r} may not get {variable}: otelhooks' own variables "
                    "(OTELHOOKS_*) and exporter headers stay with the proxy",
                )
        if prefix is not None and not prefix:
            raise r.fail("prefix", "prefix must not be empty (leave it out for none)")
        if (command is None) == (url is None):
            raise r.fail(None, f"upstream {name!r} needs exactly one of command or url")
        if isinstance(command, str):
            command = shlex.split(command)
        if command is not None and (not command or not all(isinstance(c, str) for c in command)):
            raise r.fail(
                "command", f"upstream {name!r}: command must be a non-empty list of strings"
            )
        config = UpstreamConfig(
            name=name,
            command=tuple(command or ()),
            url=url,
            env=env,
            cwd=str(base / cwd) if cwd else None,
            headers=headers,
            prefix=prefix,
            timeout=timeout,
            start_timeout=start_timeout or DEFAULT_START_TIMEOUT,
            inherit_env=inherit_env,
            mode=mode,
            roots=tuple(_root(r, root, base) for root in roots),
        )
        yield config


def _root(r: _Reader, root: str, base: Path) -> str:
    """A configured root as an absolute, normalized path (``file://`` URIs accepted)."""
    if root.startswith("file://"):
        parsed = urlsplit(root)
        if parsed.netloc not in ("", "localhost"):
            raise r.fail("roots", f"roots: {root!r} names another host")
        root = unquote(parsed.path)
    elif "://" in root:
        raise r.fail("roots", f"roots: {root!r} is not a directory or a file:// URI")
    return os.path.normpath(str(base / os.path.expanduser(root)))


def _guard(r: _Reader, base: Path) -> HookSpec:
    kind = r.get("kind", str)
    argument = r.get("argument", str)
    tools = r.strings("tools")
    arguments = r.strings("arguments", ()) or ()
    if not argument:
        raise r.fail(None, "a [[guard]] needs the argument it checks")
    hook: Any
    if kind == "path":
        root = r.get("root", str)
        if not root:
            raise r.fail(None, "a path guard needs a root")
        relative_to = r.get("relative_to", str)
        hook = PathGuard(
            argument,
            str(base / os.path.expanduser(root)),
            tools=tools,
            arguments=arguments,
            relative_to=str(base / os.path.expanduser(relative_to)) if relative_to else None,
        )
    elif kind == "url_host":
        hosts = r.strings("hosts")
        if not hosts:
            raise r.fail(None, "a url_host guard needs hosts")
        hook = UrlHostGuard(argument, hosts, tools=tools, arguments=arguments)
    elif kind == "pattern":
        regex = r.get("regex", str)
        if regex is None:
            raise r.fail(None, "a pattern guard needs a regex")
        try:
            hook = ArgumentPattern(
                argument,
                regex,
                description=r.get("description", str),
                tools=tools,
                arguments=arguments,
            )
        except re.error as exc:
            raise r.fail("regex", f"regex does not compile: {exc}") from None
    else:
        raise r.fail("kind", f"guard kind must be path, url_host or pattern, not {kind!r}")
    r.done(f"a {kind} [[guard]]")
    return HookSpec(hook, tools=tools)


def _limit(r: _Reader) -> HookSpec:
    max_calls = r.get("max_calls", int)
    if max_calls is None or max_calls < 0:
        raise r.fail("max_calls", "a [[limit]] needs max_calls, an integer >= 0")
    tools = r.strings("tools")
    hook = CallLimit(max_calls, tools=tools, shared=r.get("shared", bool, False))
    r.done("[[limit]]")
    return HookSpec(hook, tools=tools)


def _python_hook(r: _Reader) -> HookSpec:
    target = r.get("import", str)
    if not target or ":" not in target:
        raise r.fail("import", 'a [[hook]] needs import = "package.module:name"')
    args = r.get("args", dict, None)
    tools = r.strings("tools")
    timeout = r.number("timeout")
    before_failure = r.failure("before_failure")
    after_failure = r.failure("after_failure")
    r.done("[[hook]]")
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # an import error of any kind: the file names the hook
        raise r.fail(
            "import", f"cannot import hook {target!r}: {type(exc).__name__}: {exc}"
        ) from None
    if isinstance(obj, type) or (args is not None and callable(obj)):
        try:
            obj = obj(**(args or {}))
        except Exception as exc:
            raise r.fail(
                "args", f"cannot create hook {target!r}: {type(exc).__name__}: {exc}"
            ) from None
    elif args is not None:
        raise r.fail("args", f"hook {target!r} is an object, not a class: it takes no args")
    if not any(
        callable(getattr(obj, m, None))
        for m in ("before_tool_call", "after_tool_call", "on_tool_call_end")
    ):
        raise r.fail(
            "import",
            f"hook {target!r} has no before_tool_call, after_tool_call or on_tool_call_end",
        )
    return HookSpec(obj, tools, timeout, before_failure, after_failure)


def upstream_from_command(
    command: Sequence[str], name: str | None = None, *, inherit_env: Sequence[str] = ()
) -> UpstreamConfig:
    """An upstream given on the command line (after ``--``): named after its program;
    ``inherit_env`` names the variables it gets beside :data:`BASE_ENVIRONMENT`."""
    if not command:
        raise ValueError("the upstream command line is empty")
    for variable in inherit_env:
        if never_inherited(variable):
            raise ValueError(
                f"--pass-env {variable}: otelhooks' own variables (OTELHOOKS_*) and exporter "
                "headers stay with the proxy"
            )
    program = Path(command[0]).name
    if program in ("uvx", "npx", "pipx", "bunx") and len(command) > 1:
        program = next((c for c in command[1:] if not c.startswith("-")), program)
    return UpstreamConfig(
        name=name or _NAME.sub("_", program).strip("_") or "upstream",
        command=tuple(command),
        inherit_env=tuple(inherit_env),
    )


_NAME: Final = re.compile(r"[^A-Za-z0-9_-]+")
