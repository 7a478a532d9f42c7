"""The in-process boundary against shapes a review found secrets slipping through: secrets split
into lines, held in every kind of container, changed after redaction by a later hook, quoted in
error messages, and a long run of one letter taken for a token. Each case runs the real executor
with the redaction hook, and (unless said otherwise) the span processor and the structlog chain;
a secret counts as removed when no 8 of its characters remain in a channel."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from collections import namedtuple
from typing import Any

import pydantic
import pytest

from otelhooks import AfterOverride, Hooks, ToolCall, ToolExecutor, ToolOutput, ToolRegistry
from otelhooks.builtin import RedactionHook, Redactor, StructlogEvents, json_logger
from otelhooks.builtin.secret_rules import fill
from otelhooks.telemetry.testing import in_memory_tracing

PEM_BODY = fill("MIIEowIBAAKCAQEA{b64}\n{b64}\n{b64}\n{b40}", "adversarial-pem")
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
TOKEN = fill("ghp_{a36}", "adversarial-token")
PASSWORD_BLOCK = "config:\n  password: |\n    correct-horse-battery\n    staple-2026-x\n  user: bob"


def leftover(secret: str, text: str) -> str | None:
    """A piece of 8 characters of ``secret`` (line breaks aside) still in ``text``."""
    for part in secret.split("\n"):
        for i in range(max(0, len(part) - 7)):
            if part[i : i + 8] in text:
                return part[i : i + 8]
    return None


def channels(value: Any, *, span_processor: bool = True, extra_hooks: Any = ()) -> dict[str, str]:
    """``value`` returned by a tool through the real pipeline: what the model got (content and
    details), what the exported spans and the log lines carry."""
    redactor = Redactor()
    tracing = in_memory_tracing(redactor=redactor if span_processor else None)
    logs = io.StringIO()
    logger = json_logger(logs, redactor)
    registry = ToolRegistry()

    @registry.tool
    def emit() -> Any:
        """Return the value."""
        logger.info("tool output", output=repr(value) if not _jsonable(value) else value)
        return value

    hooks = Hooks(
        [RedactionHook(redactor), *extra_hooks, StructlogEvents(logger, mirror_to_span=True)]
    )
    executor = ToolExecutor(registry, hooks, tracer_provider=tracing.provider, capture_content=True)
    result = asyncio.run(executor.execute(ToolCall("c1", "emit", {})))
    return {
        "result": result.content + "\n" + _text(result.details),
        "spans": "\n".join(s.to_json() for s in tracing.spans()),
        "logs": logs.getvalue(),
    }


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except TypeError:
        return False
    return True


def _text(value: Any) -> str:
    """Everything a consumer of ``details`` could read out of it."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.dumps(dataclasses.asdict(value))
    if isinstance(value, (set, frozenset)):
        return json.dumps(sorted(value))
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=_text)
    return str(value)


def assert_removed(secret: str, seen: dict[str, str]) -> None:
    for channel, text in seen.items():
        assert leftover(secret, text) is None, (channel, leftover(secret, text), text[:400])


# -- secrets split into lines --------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    [
        lambda s: s.splitlines(),
        lambda s: tuple(s.splitlines()),
        lambda s: {"lines": s.splitlines()},
        lambda s: json.dumps(s.splitlines()),
        lambda s: {"file": "id_rsa", "content": json.dumps({"lines": s.splitlines()})},
    ],
    ids=["list", "tuple", "mapping of a list", "JSON text of a list", "nested JSON"],
)
@pytest.mark.parametrize("secret", [PEM, PASSWORD_BLOCK], ids=["private key", "yaml block"])
def test_a_secret_returned_as_lines_is_removed_like_the_whole(secret: str, shape: Any) -> None:
    body = PEM_BODY if secret is PEM else "correct-horse-battery\nstaple-2026-x"
    assert_removed(body, channels(shape(secret)))


@pytest.mark.parametrize("count", [800, 8000], ids=["past 16 KB", "past two pieces"])
@pytest.mark.parametrize("secret", [PEM, PASSWORD_BLOCK], ids=["private key", "yaml block"])
def test_the_json_text_of_a_long_list_of_lines_is_read_like_the_list(
    secret: str, count: int
) -> None:
    """A file returned as ``json.dumps(lines)``: past the size up to which any JSON is walked
    as structure, its lines are still read as one text (in pieces when it is large)."""
    from otelhooks.builtin.redaction import CHUNK
    from otelhooks.builtin.secret_walk import MAX_JSON_WALK

    lines = [f"{i:05d} INFO request served in {i % 97} ms" for i in range(count)]
    lines[count // 2 : count // 2] = secret.splitlines()
    text = json.dumps(lines)
    assert len(text) > (MAX_JSON_WALK if count < 1000 else 2 * CHUNK)
    body = PEM_BODY if secret is PEM else "correct-horse-battery\nstaple-2026-x"
    assert_removed(body, channels(text))
    assert json.loads(Redactor().scrub_value(text))[:400] == lines[:400]


@pytest.mark.parametrize("secret", [PEM, PASSWORD_BLOCK], ids=["private key", "yaml block"])
def test_lines_are_read_together_by_a_redactor_with_a_callback(secret: str) -> None:
    """A callback sees every string; it does not turn off reading the lines as one text."""
    seen: list[str] = []
    redactor = Redactor(callback=lambda path, text: seen.append(text) or text.replace("bob", "b*"))
    body = PEM_BODY if secret is PEM else "correct-horse-battery\nstaple-2026-x"
    out, _ = redactor.redact({"lines": [*secret.splitlines(), "user bob"]})
    assert leftover(body, json.dumps(out)) is None, out
    assert out["lines"][-1] == "user b*" and len(seen) >= len(secret.splitlines()), seen


@pytest.mark.parametrize(
    "shape",
    [
        lambda s: [{"line": i, "text": line} for i, line in enumerate(s.splitlines(), 1)],
        lambda s: list(enumerate(s.splitlines(), 1)),
        lambda s: tuple((f"id_rsa:{i}", line) for i, line in enumerate(s.splitlines(), 1)),
        lambda s: json.dumps({"matches": [{"n": i, "t": x} for i, x in enumerate(s.split("\n"))]}),
    ],
    ids=["records", "enumerate", "rows", "JSON of records"],
)
@pytest.mark.parametrize("secret", [PEM, PASSWORD_BLOCK], ids=["private key", "yaml block"])
def test_a_secret_returned_one_record_per_line_is_removed_like_the_whole(
    secret: str, shape: Any
) -> None:
    body = PEM_BODY if secret is PEM else "correct-horse-battery\nstaple-2026-x"
    assert_removed(body, channels(shape(secret)))


def test_records_that_hold_no_secret_together_are_kept() -> None:
    rows = [{"line": i, "text": t} for i, t in enumerate(["-----BEGIN CERTIFICATE-----", "ok"])]
    assert Redactor().redact(rows) == (rows, [])
    pairs = [("id_rsa.pub", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"), ("notes", "password policy")]
    assert Redactor().redact(pairs) == (pairs, [])


def test_lines_that_hold_no_secret_together_are_kept() -> None:
    lines = ["-----BEGIN CERTIFICATE-----", "just a note", "password policy: 12 characters"]
    assert Redactor().redact(lines) == (lines, [])


# -- a value named by its neighbour ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        [["user", "bob"], ["password", "hunter2hunter2"]],
        [("DB_PASSWORD", "hunter2hunter2")],
        {
            "env": [
                {"name": "DB_PASSWORD", "value": "hunter2hunter2"},
                {"name": "HOST", "value": "db"},
            ]
        },
        [{"Key": "password", "Value": "hunter2hunter2"}],
        json.dumps({"headers": [{"name": "Cookie", "value": "hunter2hunter2"}]}),
    ],
    ids=["list of pairs", "tuple pair", "Kubernetes env", "AWS tags", "HAR headers as JSON"],
)
def test_a_value_named_by_a_pair_or_a_record_is_redacted_like_a_mappings(value: Any) -> None:
    assert_removed("hunter2hunter2", channels(value))


def test_pairs_and_records_of_harmless_names_are_kept() -> None:
    value = {
        "pairs": [["user", "bob_the_builder_2026"], ("region", "us-east-1")],
        "env": [{"name": "LOG_LEVEL", "value": "debug"}, {"Key": "team", "Value": "platform"}],
    }
    assert Redactor().redact(value) == (value, [])
    out, paths = Redactor().redact({"env": [{"name": "API_TOKEN", "value": "hunter2hunter2"}]})
    assert out == {"env": [{"name": "API_TOKEN", "value": "[REDACTED:token]"}]}
    assert paths == ["env[0].value"]


# -- details of every container type ------------------------------------------------------------


@dataclasses.dataclass
class Credentials:
    user: str
    token: str


@dataclasses.dataclass(frozen=True)
class FrozenNote:
    text: str


class Model(pydantic.BaseModel):
    user: str
    password: str
    note: str = ""


Pair = namedtuple("Pair", ["name", "value"])


class Opaque:
    """An object the redactor knows nothing about but its text."""

    def __str__(self) -> str:
        return f"Opaque(api={TOKEN})"


@pytest.mark.parametrize(
    "details",
    [
        {TOKEN, "other"},
        frozenset({f"token {TOKEN}"}),
        bytearray(f"GITHUB_TOKEN={TOKEN}".encode()),
        memoryview(f"key: {TOKEN}".encode()),
        Credentials("ada", TOKEN),
        FrozenNote(f"use {TOKEN}"),
        Model(user="ada", password="hunter2hunter2", note=f"see {TOKEN}"),
        Pair("gh", TOKEN),
        Opaque(),
        [{"nested": ({TOKEN},)}],
    ],
    ids=lambda d: type(d).__name__,
)
def test_details_of_every_container_type_are_redacted(details: Any) -> None:
    redactor = Redactor()
    registry = ToolRegistry()

    @registry.tool
    def emit() -> ToolOutput:
        """Return the details."""
        return ToolOutput(content="done", details=details)

    executor = ToolExecutor(registry, Hooks([RedactionHook(redactor)]))
    result = asyncio.run(executor.execute(ToolCall("c1", "emit", {})))
    assert leftover(TOKEN, _text(result.details)) is None, result.details
    assert "hunter2hunter2" not in _text(result.details)
    if not isinstance(details, (bytearray, memoryview, Opaque)):
        assert type(result.details) is type(details)  # the same type back where it can be made


# -- a later hook changes the result ------------------------------------------------------------


class AddsToDetails:
    """An after-hook registered after the redaction hook that puts a secret in ``details``."""

    name = "adds_to_details"

    def __init__(self, in_place: bool) -> None:
        self.in_place = in_place

    def after_tool_call(self, ctx: Any) -> AfterOverride | None:
        if self.in_place:
            ctx.result.details["leaked"] = TOKEN
            return None
        return AfterOverride(details={**ctx.result.details, "leaked": TOKEN})


def test_details_a_later_hook_overrides_are_redacted_again() -> None:
    seen = channels({"ok": True}, extra_hooks=[AddsToDetails(in_place=False)])
    assert_removed(TOKEN, seen)


def test_details_a_later_hook_changes_in_place_are_redacted_again() -> None:
    seen = channels({"ok": True}, extra_hooks=[AddsToDetails(in_place=True)])
    assert_removed(TOKEN, seen)


# -- error messages on phase spans without the span processor -------------------------------------


def _phase_spans(tool: Any, hooks: list[Any], args: dict[str, Any]) -> str:
    redactor = Redactor()
    tracing = in_memory_tracing()  # no span processor: the spans as otelhooks wrote them
    registry = ToolRegistry()
    registry.tool(tool, parameters=COUNT_SCHEMA)
    executor = ToolExecutor(
        registry,
        Hooks([RedactionHook(redactor), *hooks]),
        tracer_provider=tracing.provider,
        scrubber=redactor,
    )
    asyncio.run(executor.execute(ToolCall("c1", tool.__name__, args)))
    return "\n".join(s.to_json() for s in tracing.spans())


def fails(count: int) -> str:
    """A tool whose handler raises with a secret in the message."""
    raise RuntimeError(f"upstream rejected {TOKEN} after {count} tries")


class RaisingBeforeHook:
    name = "raising"

    def before_tool_call(self, ctx: Any) -> None:
        raise ValueError(f"could not check {TOKEN}")


def takes_a_number(count: int) -> str:
    """A tool whose JSON Schema refuses a string (the error quotes the value)."""
    return str(count)


COUNT_SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}}}


@pytest.mark.parametrize(
    ("tool", "hooks", "args"),
    [
        (fails, [], {"count": 1}),
        (takes_a_number, [RaisingBeforeHook()], {"count": 1}),
        (takes_a_number, [], {"count": f"password={TOKEN}"}),
    ],
    ids=["handler exception", "hook failure", "schema error"],
)
def test_error_messages_reach_phase_spans_redacted_without_the_span_processor(
    tool: Any, hooks: list[Any], args: dict[str, Any]
) -> None:
    assert leftover(TOKEN, _phase_spans(tool, hooks, args)) is None


# -- a run of one letter is no token -------------------------------------------------------------


@pytest.mark.parametrize("text", ["A" * 5000, "A" * 200 + "B" * 200, "x=" + "A" * 120])
def test_a_long_run_of_one_letter_is_not_a_twitter_token(text: str) -> None:
    assert Redactor().scrub_text(text) == text


def test_a_real_twitter_bearer_token_is_still_one() -> None:
    token = "AAAAAAAAAAAAAAAAAAAAAMLheAAAAAAA0%2BuSeid%2BULvsea4JtiGRiSDSJSI%3DEUifiRBkKG5E2XzMDjRfl76ZC9Ub0wnz4XsNiRVBChTYbJcE3F"  # noqa: E501
    assert Redactor().scrub_text(f"Bearer {token}") == "Bearer [REDACTED:twitter_bearer_token]"
    assert Redactor().scrub_text(f"see {token} here") == "see [REDACTED:twitter_bearer_token] here"


# -- a large result ------------------------------------------------------------------------------


def _large(around: int) -> str:
    """About 600 KB of base64 lines, a token placed ``around`` characters in."""
    import base64
    import random

    rng = random.Random(5)
    lines = [base64.b64encode(rng.randbytes(57)).decode() for _ in range(8000)]
    text = "\n".join(lines)
    cut = text.rfind("\n", 0, around) + 1
    return text[:cut] + f"auth token {TOKEN} and {PEM}\n" + text[cut:]


@pytest.mark.parametrize("around", [65_536 - 40, 131_072, 400_000], ids=["at a cut", "mid", "late"])
def test_a_secret_in_a_large_text_is_removed_wherever_the_text_is_cut(around: int) -> None:
    from otelhooks.builtin.redaction import CHUNK

    text = _large(around)
    assert len(text) > 4 * CHUNK
    out = Redactor().scrub_text(text)
    assert leftover(TOKEN, out) is None and leftover(PEM_BODY, out) is None


def test_a_large_result_is_redacted_off_the_event_loop() -> None:
    """The hook hands the core an awaitable that redacts in a worker thread: another task of
    the same loop runs while it does (event-based: the other task must get a turn)."""
    import threading

    seen_threads: set[int] = set()
    redactor = Redactor(callback=lambda path, text: seen_threads.add(threading.get_ident()))
    hook = RedactionHook(redactor)
    from otelhooks import ToolResult

    big = ToolResult("c1", "emit", _large(300_000))

    async def main() -> tuple[Any, bool]:
        ticked = asyncio.Event()

        async def other() -> None:
            ticked.set()

        pending = hook.after_tool_call(type("Ctx", (), {"result": big})())  # type: ignore[arg-type]
        assert asyncio.iscoroutine(pending)
        task = asyncio.create_task(other())
        override = await pending
        await task
        return override, ticked.is_set()

    override, ticked = asyncio.run(main())
    assert ticked and threading.get_ident() not in seen_threads
    assert override is not None and leftover(TOKEN, override.content) is None


def test_redact_async_is_inline_for_small_values_and_threaded_for_large() -> None:
    redactor = Redactor()
    small, _ = asyncio.run(redactor.redact_async({"token": TOKEN}))
    assert small == {"token": "[REDACTED:token]"}
    large, paths = asyncio.run(redactor.redact_async([_large(200_000)]))
    assert paths and leftover(TOKEN, large[0]) is None


# -- tables, SQL, diffs and large JSON objects ----------------------------------------------------

PASSWORD = "hunter2hunter2"


@pytest.mark.parametrize(
    "table",
    [
        f"user,password,role\nbob,{PASSWORD},admin\n",
        f"user\tpasswd\trole\nbob\t{PASSWORD}\tadmin\n",
        f'"user","api_key","role"\n"bob","{PASSWORD}","admin"\n',
        f" user | password       | role\n------+----------------+------\n bob  | {PASSWORD} "
        "| admin\n(1 row)\n",
        f"| user | secret | role |\n|------|--------|------|\n| bob | {PASSWORD} | admin |\n",
        json.dumps({"stdout": f"user,token,role\nbob,{PASSWORD},admin\n"}),
        f"user,password,role\nbob,{PASSWORD},admin\n".splitlines(),
    ],
    ids=["CSV", "TSV", "quoted CSV", "psql", "Markdown", "CSV in JSON", "CSV as lines"],
)
def test_the_values_of_a_credential_column_of_a_table_are_removed(table: Any) -> None:
    seen = channels(table)
    assert_removed(PASSWORD, seen)
    assert "bob" in seen["result"] and "admin" in seen["result"]  # other columns are kept


@pytest.mark.parametrize(
    "table",
    [
        "name,token_count,model\nrun-1,1234,gpt-4o-mini\nrun-2,5678,gpt-4o\n",
        "| Token | Meaning |\n|---|---|\n| ghp_ | a GitHub personal access token |\n",
        "user,password_hash,role\nbob,$2b$12$abcdefghijklmnopqrstuv,admin\n",
        "id,key,value\n1,color,blue\n2,size,large_enough\n",
        "a,b\nuser,password\nbob,notaheaderrow\n",
    ],
    ids=["no credential column", "prose cells", "a hash column", "ordinary keys", "mid-table"],
)
def test_tables_without_credential_values_are_kept(table: str) -> None:
    assert Redactor().redact(table) == (table, [])


@pytest.mark.parametrize(
    "sql",
    [
        f"CREATE USER bob WITH PASSWORD '{PASSWORD}';",
        f"ALTER ROLE bob WITH ENCRYPTED PASSWORD '{PASSWORD}' VALID UNTIL 'infinity';",
        f"CREATE USER 'bob'@'%' IDENTIFIED BY '{PASSWORD}';",
        f"ALTER USER 'bob'@'localhost' IDENTIFIED WITH mysql_native_password BY '{PASSWORD}';",
        f"SET PASSWORD FOR 'bob'@'localhost' = '{PASSWORD}';",
        f"SET PASSWORD = PASSWORD('{PASSWORD}');",
        f"CREATE USER scott IDENTIFIED BY {PASSWORD};",
        f'ALTER USER scott IDENTIFIED BY "{PASSWORD}" ACCOUNT UNLOCK;',
        f"CREATE LOGIN app WITH PASSWORD = '{PASSWORD}', CHECK_POLICY = OFF;",
    ],
    ids=[
        "PostgreSQL create",
        "PostgreSQL alter encrypted",
        "MySQL identified by",
        "MySQL identified with plugin",
        "MySQL set password for",
        "MySQL set password function",
        "Oracle unquoted",
        "Oracle quoted",
        "SQL Server login",
    ],
)
def test_sql_that_sets_a_password_is_redacted(sql: str) -> None:
    seen = channels(sql)
    assert_removed(PASSWORD, seen)
    assert sql.split(PASSWORD)[0].rstrip("'\"") in seen["result"]  # the statement is kept


@pytest.mark.parametrize(
    "sql",
    [
        "Users are identified by their email address.",
        "ALTER USER bob IDENTIFIED BY RANDOM PASSWORD;",
        "ALTER ROLE bob PASSWORD NULL;",
        "SELECT * FROM users WHERE password_reset = 'true';",
    ],
)
def test_sql_without_a_password_is_kept(sql: str) -> None:
    assert Redactor().redact(sql) == (sql, [])


_DIFF_BLOCK = "correct-horse-battery\nstaple-2026-x"


@pytest.mark.parametrize(
    "diff",
    [
        "--- a/c.yml\n+++ b/c.yml\n@@ -1,2 +1,5 @@\n config:\n+  password: |\n"
        "+    correct-horse-battery\n+    staple-2026-x\n   user: bob\n",
        "--- a/c.yml\n+++ b/c.yml\n@@ -1,5 +1,2 @@\n config:\n-  password: |\n"
        "-    correct-horse-battery\n-    staple-2026-x\n   user: bob\n",
        "@@ -1,4 +1,4 @@\n config:\n   password: |\n-    old-horse-battery-x\n"
        "+    correct-horse-battery\n+    staple-2026-x\n   user: bob\n",
    ],
    ids=["added", "removed", "changed under a context line"],
)
@pytest.mark.parametrize("shape", [str, str.splitlines], ids=["text", "lines"])
def test_a_yaml_password_block_in_a_unified_diff_is_removed(diff: str, shape: Any) -> None:
    seen = channels(shape(diff))
    assert_removed(_DIFF_BLOCK, seen)
    assert "user: bob" in seen["result"]


@pytest.mark.parametrize("secret", [PEM, PASSWORD_BLOCK], ids=["private key", "yaml block"])
def test_a_large_json_object_holding_lines_is_read_like_the_list(secret: str) -> None:
    """``json.dumps({"lines": [...], ...})`` past the size up to which any JSON is walked as
    structure: the list's lines are still read as one text."""
    lines = [f"{i:05d} INFO request served in {i % 97} ms" for i in range(800)]
    lines[400:400] = secret.splitlines()
    text = json.dumps({"path": "app.log", "lines": lines, "count": len(lines)})
    assert len(text) > 16_384
    body = PEM_BODY if secret is PEM else _DIFF_BLOCK
    seen = channels(text)
    assert_removed(body, seen)
    assert "00799 INFO request served" in seen["result"]


def test_a_large_json_object_whose_lines_hold_no_secret_is_read_as_text() -> None:
    lines = [f"{i:05d} INFO request served in {i % 97} ms" for i in range(800)]
    text = json.dumps({"path": "app.log", "lines": lines})
    assert len(text) > 16_384
    assert Redactor().redact(text) == (text, [])
