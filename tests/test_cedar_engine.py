"""Cedar policies through cedarpy: the engine decides (otelhooks only builds the requests), with
policies in the shapes Cedar's own documentation uses (role-based, attribute-based, forbid
overriding permit); typos stop the load with the file, the line and the name meant; reloads
swap the whole set or keep the last good one; the decision cache is never stale."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

import pytest

cedarpy = pytest.importorskip("cedarpy")

from otelhooks.builtin.cedar_engine import CedarEngine, Requester  # noqa: E402
from otelhooks.builtin.cedar_model import (  # noqa: E402
    Principal,
    ToolKey,
    Unrepresentable,
    decimal_text,
    model_schema,
)
from otelhooks.builtin.cedar_source import CedarError  # noqa: E402

GIT_STATUS = ToolKey("git", "git_status")
GIT_COMMIT = ToolKey("git", "git_commit")
READ_FILE = ToolKey("fs", "read_file")
STATUS_SCHEMA = {
    "type": "object",
    "properties": {"repo_path": {"type": "string"}},
    "required": ["repo_path"],
}
COMMIT_SCHEMA = {
    "type": "object",
    "properties": {
        "repo_path": {"type": "string"},
        "message": {"type": "string"},
        "amount": {"type": "number"},
        "note": {"type": ["string", "null"]},
        "files": {"type": "array", "items": {"type": "string"}},
        "anything": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "required": ["repo_path", "message"],
}
READ_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
TOOLS = {GIT_STATUS: STATUS_SCHEMA, GIT_COMMIT: COMMIT_SCHEMA, READ_FILE: READ_SCHEMA}

# Roles and departments as an operator adds them (merged into the generated schema).
OPERATOR_SCHEMA = {
    "": {
        "entityTypes": {
            "Role": {},
            "User": {
                "memberOfTypes": ["Group", "Role"],
                "shape": {
                    "type": "Record",
                    "attributes": {"department": {"type": "String", "required": False}},
                },
            },
        },
        "actions": {},
    }
}
ENTITIES = [
    {"uid": {"type": "Role", "id": "maintainer"}, "attrs": {}, "parents": []},
    {
        "uid": {"type": "User", "id": "alice"},
        "attrs": {"department": "engineering"},
        "parents": [{"type": "Role", "id": "maintainer"}],
    },
    {"uid": {"type": "User", "id": "bob"}, "attrs": {"department": "sales"}, "parents": []},
]

# The three shapes of Cedar's documentation, on the model of a tool call.
POLICIES = """\
// Role-based: a role (an entity the user is in) may call every tool of an upstream.
@id("maintainers-use-git")
permit(principal in Role::"maintainer", action in Action::"call_tool", resource in Upstream::"git");

// Attribute-based: an attribute of the principal and one of the call's arguments.
@id("engineers-read-src")
permit(principal, action == Action::"fs/read_file", resource)
when { principal has department && principal.department == "engineering"
       && context.arguments.path like "/src/*" };

// Forbid overrides permit: nobody touches a production checkout.
@id("never-prod")
forbid(principal, action in Action::"call_tool", resource)
when { context.arguments has repo_path && context.arguments.repo_path like "/prod/*" };

// A permit that holds only with an approval.
@id("commits-need-approval")
@approval("required")
permit(principal, action == Action::"git/git_commit", resource);
"""

ALICE = Requester(Principal("User", "alice"), "agent", "client")
BOB = Requester(Principal("User", "bob"), "agent", "client")


def _files(tmp_path: Path, policies: str = POLICIES) -> tuple[Path, Path, Path]:
    p, e, s = tmp_path / "policies.cedar", tmp_path / "entities.json", tmp_path / "schema.json"
    p.write_text(policies)
    e.write_text(json.dumps(ENTITIES, indent=2))
    s.write_text(json.dumps(OPERATOR_SCHEMA, indent=2))
    return p, e, s


@pytest.fixture
def engine(tmp_path: Path) -> CedarEngine:
    engine = CedarEngine(*_files(tmp_path))
    engine.bind_tools(TOOLS)
    return engine


def test_role_based_attribute_based_and_forbid_overriding_permit(engine: CedarEngine) -> None:
    status = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, ALICE, {"repo_path": "/w"})
    assert (status.effect, status.policies) == ("allow", ("maintainers-use-git",))
    # Bob has no role: nothing permits (Cedar's default deny).
    denied = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, BOB, {"repo_path": "/w"})
    assert (denied.effect, denied.policies) == ("deny", ())
    assert "no Cedar policy permits git/git_status" in denied.reason
    # The attribute-based permit: the principal's attribute and the argument both count.
    src = engine.decide_tool(READ_FILE, READ_SCHEMA, ALICE, {"path": "/src/a.py"})
    assert (src.effect, src.policies) == ("allow", ("engineers-read-src",))
    assert engine.decide_tool(READ_FILE, READ_SCHEMA, ALICE, {"path": "/etc/x"}).effect == "deny"
    assert engine.decide_tool(READ_FILE, READ_SCHEMA, BOB, {"path": "/src/a.py"}).effect == "deny"
    # Forbid overrides the role's permit.
    prod = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, ALICE, {"repo_path": "/prod/x"})
    assert (prod.effect, prod.policies) == ("deny", ("never-prod",))
    assert "never-prod (line 12)" in prod.reason


def test_an_approval_annotation_asks_and_a_forbid_still_wins(engine: CedarEngine) -> None:
    args = {"repo_path": "/w", "message": "m"}
    asked = engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, args)
    assert (asked.effect, asked.policies) == ("ask", ("commits-need-approval",))
    # Alice's role permits outright, but the approval-marked permit is among the determining
    # policies: it still asks.
    both = engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, ALICE, args)
    assert both.effect == "ask"
    assert set(both.policies) == {"maintainers-use-git", "commits-need-approval"}
    prod = engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, ALICE, {**args, "repo_path": "/prod/a"})
    assert (prod.effect, prod.policies) == ("deny", ("never-prod",))


def test_groups_of_the_identity_are_parents_of_the_user(tmp_path: Path) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text('permit(principal in Group::"admins", action, resource);')
    engine = CedarEngine(policy)
    engine.bind_tools(TOOLS)
    admin = Requester(Principal("User", "carol", ("admins",)), "a", "c")
    other = Requester(Principal("User", "carol", ("staff",)), "a", "c")
    assert (
        engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, admin, {"repo_path": "/"}).effect == "allow"
    )
    # The same user with other groups: a cached decision of the first is not reused.
    assert engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, other, {"repo_path": "/"}).effect == "deny"


def test_floats_map_to_decimal_exactly_or_are_refused_and_nulls_are_left_out(
    engine: CedarEngine, tmp_path: Path
) -> None:
    assert decimal_text(1.5, "x") == "1.5000"
    assert decimal_text(3, "x") == "3.0000"
    assert decimal_text(0.1, "x") == "0.1000"
    for bad in (1.23456, 1e300, float("nan"), float("inf")):
        with pytest.raises(Unrepresentable):
            decimal_text(bad, "amount")
    args = {"repo_path": "/w", "message": "m", "amount": 0.00001}
    with pytest.raises(Unrepresentable, match="more than 4 decimal places"):
        engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, ALICE, args)
    with pytest.raises(Unrepresentable, match="64-bit"):
        engine.decide_tool(
            ToolKey("x", "n"),
            {"type": "object", "properties": {"n": {"type": "integer"}}},
            ALICE,
            {"n": 2**64},
        )
    schema = model_schema({GIT_COMMIT: COMMIT_SCHEMA})
    arguments = schema[""]["actions"]["git/git_commit"]["appliesTo"]["context"]["attributes"][
        "arguments"
    ]["attributes"]
    assert arguments["amount"] == {"type": "Extension", "name": "decimal", "required": False}
    assert arguments["note"] == {"type": "String", "required": False}  # null: optional
    assert arguments["files"]["type"] == "Set"
    assert "anything" not in arguments  # anyOf: not given to Cedar
    # A policy reading a null argument tests `has`: a null value is absent.
    policy = tmp_path / "note.cedar"
    policy.write_text(
        'permit(principal, action in Action::"call_tool", resource)\n'
        "  when { context.arguments has note };\n"
        'forbid(principal, action in Action::"call_tool", resource)\n'
        "  when { context.arguments has amount && "
        'context.arguments.amount.greaterThan(decimal("100.0")) };\n'
    )
    notes = CedarEngine(policy)
    notes.bind_tools({GIT_COMMIT: COMMIT_SCHEMA})
    base = {"repo_path": "/w", "message": "m"}
    assert (
        notes.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, {**base, "note": None}).effect == "deny"
    )
    assert (
        notes.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, {**base, "note": "n"}).effect == "allow"
    )
    assert (
        notes.decide_tool(
            GIT_COMMIT, COMMIT_SCHEMA, BOB, {**base, "note": "n", "amount": 100.5}
        ).effect
        == "deny"
    )


@pytest.mark.parametrize(
    ("policy", "line", "message"),
    [
        (
            'permit(principal, action == Action::"git/git_status", resource)\n'
            '  when { context.arguments.repo_pth == "x" };',
            2,
            "did you mean 'arguments.repo_path'?",
        ),
        ('// roles\n\npermit(principal in Gruop::"admins", action, resource);', 3, "'Group'"),
        ('permit(principal, action == Action::"git/git_stauts", resource);', 1, "git_status"),
        (
            "permit(principal, action, resource);\n\nforbid(principal, acton, resource);",
            3,
            "action",
        ),
        ('@aproval("required")\npermit(principal, action, resource);', 1, "@approval"),
        ('@approval("maybe")\npermit(principal, action, resource);', 1, "required"),
        (
            'permit(principal, action, resource)\n when { principal.departmnt == "x" };',
            2,
            "'department'",
        ),
    ],
)
def test_a_typo_stops_the_load_with_file_line_and_the_name_meant(
    tmp_path: Path, policy: str, line: int, message: str
) -> None:
    p, e, s = _files(tmp_path, policy)
    with pytest.raises(CedarError) as caught:
        engine = CedarEngine(p, e, s)
        engine.bind_tools(TOOLS)
    assert caught.value.path == str(p)
    assert caught.value.line == line, str(caught.value)
    assert message in str(caught.value)


def test_a_typo_in_the_entities_file_names_its_line(tmp_path: Path) -> None:
    p, e, s = _files(tmp_path)
    broken = [*ENTITIES, {"uid": {"type": "Usr", "id": "x"}, "attrs": {}, "parents": []}]
    e.write_text(json.dumps(broken, indent=2))
    with pytest.raises(
        CedarError, match=r"unknown entity type 'Usr' \(did you mean 'User'\?\)"
    ) as c:
        CedarEngine(p, e, s)
    assert c.value.path == str(e)
    assert c.value.line == e.read_text().splitlines().index('      "type": "Usr",') + 1
    e.write_text(json.dumps([{"uid": {"type": "User", "id": "x"}, "attrs": {"departmnt": "x"}}]))
    with pytest.raises(CedarError, match="did you mean 'department'"):
        CedarEngine(p, e, s)


def _write(path: Path, text: str) -> None:
    """Replace a file at once (a new inode), as editors and deploy tools do."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _reload_now(engine: CedarEngine) -> None:
    """Two looks at the files: a change is seen, then found settled; the next decision uses
    the new set."""
    engine._checked = time.monotonic() - engine.reload_interval
    engine.maybe_reload()
    engine._checked = time.monotonic() - engine.reload_interval


def test_a_reload_is_in_force_on_the_next_look_and_empties_the_cache(tmp_path: Path) -> None:
    p, e, s = _files(tmp_path)
    engine = CedarEngine(p, e, s, reload_interval=0.2)
    engine.bind_tools(TOOLS)
    args = {"repo_path": "/w"}
    assert engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, ALICE, args).effect == "allow"
    assert engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, ALICE, args).cached
    _write(p, POLICIES + '\n@id("freeze")\nforbid(principal, action, resource);\n')
    time.sleep(0.25)  # the reload interval: a look sees the change ...
    engine.maybe_reload()
    time.sleep(0.25)  # ... and the next decision's look finds it settled
    after = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, ALICE, args)
    assert (after.effect, after.policies, after.cached) == ("deny", ("freeze",), False)
    assert engine.reloads == 1
    # The entities file counts too: Alice loses her role.
    _write(e, json.dumps([e_ for e_ in ENTITIES if e_["uid"]["id"] != "alice"]))
    _write(p, POLICIES)
    _reload_now(engine)
    assert engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, ALICE, args).effect == "deny"
    assert engine.reloads == 2


def test_a_reload_that_fails_keeps_the_last_good_set_and_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p, e, s = _files(tmp_path)
    engine = CedarEngine(p, e, s)
    engine.bind_tools(TOOLS)
    args = {"repo_path": "/w"}
    for broken in (
        POLICIES.replace("Role::", "Rol::"),  # a typo: validation fails
        POLICIES[: len(POLICIES) // 2],  # a truncated write
    ):
        p.write_text(broken)  # in place, as a truncated write would leave it
        _reload_now(engine)
        with caplog.at_level(logging.ERROR, logger="otelhooks.cedar"):
            verdict = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, ALICE, args)
        assert (verdict.effect, verdict.policies) == ("allow", ("maintainers-use-git",))
        assert "the last good set stays" in caplog.text
        assert str(p) in caplog.text
        caplog.clear()
    assert engine.reloads == 0
    _write(p, POLICIES.replace("maintainers-use-git", "renamed"))
    _reload_now(engine)
    assert engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, ALICE, args).policies == ("renamed",)


def test_a_decision_sees_the_old_set_or_the_new_never_a_mix(tmp_path: Path) -> None:
    p, e, s = _files(tmp_path)
    sets = {
        "a": '@id("a1") permit(principal, action, resource);\n'
        '@id("a2") permit(principal in Role::"maintainer", action, resource);\n',
        "b": '@id("b1") permit(principal, action, resource);\n'
        '@id("b2") permit(principal in Role::"maintainer", action, resource);\n',
    }
    _write(p, sets["a"])
    engine = CedarEngine(p, e, s, reload_interval=0.0)
    engine.bind_tools(TOOLS)
    seen: list[tuple[str, ...]] = []
    stop = threading.Event()

    def decide() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            verdict = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, ALICE, {"repo_path": f"/{n}"})
            seen.append(verdict.policies)

    threads = [threading.Thread(target=decide) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(30):
        before = engine.reloads
        _write(p, sets["ab"[i % 2]])
        for _ in range(1000):  # the deciding threads look; wait for the set to be in force
            if engine.reloads > before or i % 3:  # two in three writes follow at once
                break
            time.sleep(0.005)
    stop.set()
    for t in threads:
        t.join()
    assert engine.reloads >= 5
    kinds = {policies[0][0] for policies in seen}
    assert kinds == {"a", "b"}
    for policies in seen:
        assert len({name[0] for name in policies}) == 1, policies


def test_a_policy_that_reads_time_is_never_cached(tmp_path: Path) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text(
        '@id("office-hours")\n'
        'permit(principal, action == Action::"git/git_status", resource)\n'
        '  when { context.now.toTime() < duration("12h") };\n'
        '@id("always")\n'
        'permit(principal, action == Action::"fs/read_file", resource);\n'
    )
    clock = {"now": None}
    import datetime

    engine = CedarEngine(policy, now=lambda: clock["now"])
    engine.bind_tools(TOOLS)
    morning = datetime.datetime(2026, 1, 5, 9, 0, tzinfo=datetime.UTC)
    evening = datetime.datetime(2026, 1, 5, 19, 0, tzinfo=datetime.UTC)
    args = {"repo_path": "/w"}
    clock["now"] = morning
    assert engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, BOB, args).effect == "allow"
    clock["now"] = evening  # the same key: a cached decision would still allow
    late = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, BOB, args)
    assert (late.effect, late.cached) == ("deny", False)
    # Another action whose policies do not read time is cached.
    engine.decide_tool(READ_FILE, READ_SCHEMA, BOB, {"path": "/a"})
    assert engine.decide_tool(READ_FILE, READ_SCHEMA, BOB, {"path": "/a"}).cached
    stats = engine.stats()
    assert stats["uncached"] == 2 and stats["hits"] == 1


def test_the_cache_key_holds_what_the_policies_read_and_only_that(engine: CedarEngine) -> None:
    # read_file's policies read context.arguments.path: a new path is a miss, the same a hit.
    first = engine.decide_tool(READ_FILE, READ_SCHEMA, ALICE, {"path": "/src/a"})
    again = engine.decide_tool(READ_FILE, READ_SCHEMA, ALICE, {"path": "/src/a"})
    other = engine.decide_tool(READ_FILE, READ_SCHEMA, ALICE, {"path": "/etc/a"})
    assert (first.cached, again.cached, other.cached) == (False, True, False)
    assert other.effect == "deny"
    # git_commit's policies read repo_path only: another message is the same decision.
    a = engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, {"repo_path": "/w", "message": "x"})
    b = engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, {"repo_path": "/w", "message": "y"})
    c = engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, {"repo_path": "/prod/w", "message": "y"})
    assert (a.cached, b.cached, c.cached) == (False, True, False)
    assert c.effect == "deny"
    # Another principal is another key.
    assert not engine.decide_tool(READ_FILE, READ_SCHEMA, BOB, {"path": "/src/a"}).cached


def test_the_agent_and_the_client_are_entities_and_in_the_key_when_read(tmp_path: Path) -> None:
    """``context.agent`` and ``context.client`` compare as entities (a forbid naming one
    applies); a decision for one agent is not reused for another when a policy reads the
    agent, and is when none does."""
    policy = tmp_path / "p.cedar"
    policy.write_text(
        'permit(principal, action in Action::"call_tool", resource);\n'
        '@id("no-rogue")\n'
        'forbid(principal, action == Action::"git/git_status", resource)\n'
        '  when { context.agent == Agent::"rogue" || context.client in [Client::"bad"] };\n'
    )
    engine = CedarEngine(policy)
    engine.bind_tools(TOOLS)
    args = {"repo_path": "/w"}

    def decide(agent: str, client: str) -> tuple[str, bool]:
        requester = Requester(Principal("User", "bob"), agent, client)
        verdict = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, requester, args)
        return (verdict.effect, verdict.cached)

    assert decide("good", "ok") == ("allow", False)
    assert decide("rogue", "ok") == ("deny", False)
    assert decide("good", "bad") == ("deny", False)
    assert decide("good", "ok") == ("allow", True)
    # git_commit's policies read neither: one decision serves every agent and client.
    commit = {"repo_path": "/w", "message": "m"}
    for agent, client, cached in (("good", "ok", False), ("rogue", "bad", True)):
        requester = Requester(Principal("User", "bob"), agent, client)
        verdict = engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, requester, commit)
        assert (verdict.effect, verdict.cached) == ("allow", cached)


def test_a_policy_that_reaches_the_context_whole_sees_all_of_it_uncached(tmp_path: Path) -> None:
    """The request gives Cedar only what the policies read; a policy that reaches the time
    through a record of the whole context still gets the time, and its action is never
    cached; one that reaches the arguments through a record gets every argument."""
    policy = tmp_path / "p.cedar"
    policy.write_text(
        'permit(principal, action in Action::"call_tool", resource);\n'
        '@id("hidden-clock")\n'
        'forbid(principal, action == Action::"git/git_status", resource)\n'
        '  when { {"c": context}.c.now.toTime() >= duration("12h") };\n'
        '@id("no-files")\n'
        'forbid(principal, action == Action::"git/git_commit", resource)\n'
        '  when { {"a": context.arguments}.a has files };\n'
    )
    import datetime

    clock = {"now": datetime.datetime(2026, 1, 5, 9, 0, tzinfo=datetime.UTC)}
    engine = CedarEngine(policy, now=lambda: clock["now"])
    engine.bind_tools(TOOLS)
    args = {"repo_path": "/w"}
    morning = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, BOB, args)
    assert (morning.effect, morning.cached) == ("allow", False)
    clock["now"] = datetime.datetime(2026, 1, 5, 19, 0, tzinfo=datetime.UTC)
    evening = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, BOB, args)
    assert (evening.effect, evening.policies, evening.cached) == ("deny", ("hidden-clock",), False)
    assert engine.stats()["uncached"] == 2
    commit = {"repo_path": "/w", "message": "m"}
    assert engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, commit).effect == "allow"
    files = engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, {**commit, "files": ["a"]})
    assert (files.effect, files.policies, files.cached) == ("deny", ("no-files",), False)


def test_a_tool_first_seen_in_a_call_is_validated_before_it_is_decided(tmp_path: Path) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text(
        'permit(principal, action in Action::"call_tool", resource);\n'
        '@id("prod") forbid(principal, action in Action::"call_tool", resource)\n'
        '  when { context.arguments.repo_path like "/prod*" };\n'
    )
    engine = CedarEngine(policy)
    engine.bind_tools({GIT_STATUS: STATUS_SCHEMA})
    args = {"repo_path": "/w", "message": "m"}
    assert engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, args).effect == "allow"
    assert GIT_COMMIT in engine.tools()
    # read_file has no repo_path: with it, the forbid does not validate (it would error on
    # every call of it and so never forbid). The call is denied, and the set stays.
    refused = engine.decide_tool(READ_FILE, READ_SCHEMA, BOB, {"path": "/prod/x"})
    assert refused.effect == "deny"
    assert "do not validate" in refused.reason and "repo_path" in refused.reason
    assert READ_FILE not in engine.tools()
    # A policy naming a tool that does not exist stops the load (a typo, or a tool gone).
    with pytest.raises(CedarError, match="fs/read_file"):
        CedarEngine(*_files(tmp_path)).bind_tools({GIT_STATUS: STATUS_SCHEMA})


def test_check_reports_which_policies_apply_to_which_tool(engine: CedarEngine) -> None:
    def names(key: ToolKey) -> list[str]:
        return [info.summary() for info in engine.matching(key)]

    assert names(GIT_STATUS) == [
        'permit maintainers-use-git (line 2, principal in Role::"maintainer")',
        "forbid never-prod (line 12)",
    ]
    assert names(READ_FILE) == ["permit engineers-read-src (line 6)", "forbid never-prod (line 12)"]
    assert "ask commits-need-approval (line 17)" in names(GIT_COMMIT)


async def test_the_determining_policies_are_on_the_span_and_ask_without_approver_blocks(
    tmp_path: Path,
) -> None:
    from otelhooks import Hooks, ToolCall, ToolExecutor, ToolRegistry
    from otelhooks.builtin.cedar import CedarPolicy
    from otelhooks.telemetry import attributes as A
    from otelhooks.telemetry.testing import in_memory_tracing

    policy = tmp_path / "p.cedar"
    policy.write_text(
        '@id("reads") permit(principal, action == Action::"local/read", resource);\n'
        '@id("writes") @approval("required")\n'
        'permit(principal, action == Action::"local/write", resource);\n'
        '@id("no-etc") forbid(principal, action in Action::"call_tool", resource)\n'
        '  when { context.arguments.path like "/etc/*" };\n'
    )
    registry = ToolRegistry()
    ran: list[str] = []

    @registry.tool
    def read(path: str) -> str:
        """Read."""
        ran.append(f"read {path}")
        return "ok"

    @registry.tool
    def write(path: str) -> str:
        """Write."""
        ran.append(f"write {path}")
        return "ok"

    hooks = Hooks(registry=registry)
    hooks.add(CedarPolicy(policy))
    tracing = in_memory_tracing()
    executor = ToolExecutor(registry, hooks, tracer_provider=tracing.provider)
    allowed = await executor.execute(ToolCall("1", "read", {"path": "/tmp/a"}))
    forbidden = await executor.execute(ToolCall("2", "read", {"path": "/etc/passwd"}))
    asked = await executor.execute(ToolCall("3", "write", {"path": "/tmp/a"}))
    assert ran == ["read /tmp/a"]
    assert not allowed.is_error
    assert forbidden.is_error and "no-etc" in forbidden.content
    assert asked.is_error and "no approver" in asked.content
    calls = {
        s.attributes.get(A.GEN_AI_TOOL_CALL_ID): s
        for s in tracing.spans()
        if s.attributes and A.GEN_AI_TOOL_CALL_ID in s.attributes
    }
    before = [
        s
        for s in tracing.spans()
        if s.parent is not None
        and s.parent.span_id == calls["1"].context.span_id
        and s.attributes
        and A.GEN_AI_GUARDRAIL_POLICY_ID in s.attributes
    ]
    assert [tuple(s.attributes[A.POLICIES]) for s in before] == [("reads",)]
    assert calls["2"].attributes[A.GEN_AI_GUARDRAIL_POLICY_ID] == "no-etc"
    assert tuple(calls["2"].attributes[A.POLICIES]) == ("no-etc",)
    assert calls["2"].attributes[A.GEN_AI_GUARDRAIL_ACTION_TYPE] == "block"
    assert tuple(calls["3"].attributes[A.POLICIES]) == ("writes",)
    assert calls["3"].attributes[A.VERDICT] == "ask"
    assert A.ERROR_TYPE not in calls["2"].attributes  # a denied call is not an error


def test_an_absent_argument_and_any_value_are_different_keys(tmp_path: Path) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text(
        'permit(principal, action in Action::"call_tool", resource)\n'
        "  unless { context.arguments has note };\n"
    )
    engine = CedarEngine(policy)
    engine.bind_tools({GIT_COMMIT: COMMIT_SCHEMA})
    base = {"repo_path": "/w", "message": "m"}
    assert engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, base).effect == "allow"
    for value in ("", "\x00missing", "MISSING", "null"):
        verdict = engine.decide_tool(GIT_COMMIT, COMMIT_SCHEMA, BOB, {**base, "note": value})
        assert (verdict.effect, verdict.cached) == ("deny", False), value


def test_a_forbid_that_fails_to_evaluate_denies_the_call(tmp_path: Path) -> None:
    """Cedar skips a policy that errors; a skipped forbid must not let a call through: an
    overflow in a forbid's condition, and a principal the entities file does not describe
    (its attribute missing), each deny with the reason instead of falling to the permit."""
    policy = tmp_path / "p.cedar"
    policy.write_text(
        '@id("everyone")\n'
        "permit(principal, action, resource);\n"
        '@id("small-amounts")\n'
        'forbid(principal, action == Action::"git/git_commit", resource)\n'
        "  when { context.arguments has amount && context.arguments.amount.greaterThan("
        'decimal("100.0")) };\n'
        '@id("cleared-only")\n'
        'forbid(principal is User, action == Action::"git/git_status", resource)\n'
        "  unless { principal.clearance >= 3 };\n"
    )
    entities = tmp_path / "entities.json"
    entities.write_text(
        json.dumps(
            [{"uid": {"type": "User", "id": "bob"}, "attrs": {"clearance": 1}, "parents": []}]
        )
    )
    schema = tmp_path / "schema.json"
    clearance = {"type": "Record", "attributes": {"clearance": {"type": "Long"}}}
    schema.write_text(
        json.dumps({"": {"entityTypes": {"User": {"shape": clearance}}, "actions": {}}})
    )
    engine = CedarEngine(policy, entities, schema)
    engine.bind_tools(TOOLS)
    bob = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, BOB, {"repo_path": "/w"})
    assert bob.effect == "deny" and "cleared-only" in bob.policies
    mallory = Requester(Principal("User", "mallory"), "agent", "client")  # in no entities file
    stranger = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, mallory, {"repo_path": "/w"})
    assert stranger.effect == "deny", stranger
    assert "did not evaluate" in stranger.reason
    overflow = tmp_path / "o.cedar"
    overflow.write_text(
        "permit(principal, action, resource);\n"
        'forbid(principal, action == Action::"git/git_status", resource)\n'
        '  when { context.arguments.repo_path == "/w" && 4611686018427387904 * 2 > 10 };\n'
    )
    engine = CedarEngine(overflow)
    engine.bind_tools(TOOLS)
    verdict = engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, BOB, {"repo_path": "/w"})
    assert verdict.effect == "deny" and "did not evaluate" in verdict.reason
    assert engine.decide_tool(GIT_STATUS, STATUS_SCHEMA, BOB, {"repo_path": "/x"}).effect == "allow"


def test_at_the_gateway_cedar_judges_the_upstream_whose_tool_runs(tmp_path: Path) -> None:
    """Two upstreams serve one name: a later listing of the second never re-keys the name the
    first serves, and a call routed to an upstream is judged as that upstream's tool."""
    import mcp.types as mcp_types

    from otelhooks.integrations.mcp.access import CALLER, Caller
    from otelhooks.integrations.mcp.cedar import GatewayCedar
    from otelhooks.integrations.mcp.naming import ToolRef

    policy = tmp_path / "p.cedar"
    policy.write_text('permit(principal, action == Action::"admin/delete", resource);\n')
    cedar = GatewayCedar(CedarEngine(policy), "gateway")
    cedar.bind_refs({"delete": ToolRef("files", "delete")})
    delete = mcp_types.Tool(name="delete", input_schema={"type": "object"})
    cedar.bind_listing("admin", [("delete", delete)])
    assert cedar.key_of("delete") == ToolKey("files", "delete")
    token = CALLER.set(Caller(identity=None, upstream="files"))
    try:
        assert cedar.key_of("delete") == ToolKey("files", "delete")
    finally:
        CALLER.reset(token)
    token = CALLER.set(Caller(identity=None, upstream="admin"))
    try:
        assert cedar.key_of("delete") == ToolKey("admin", "delete")
    finally:
        CALLER.reset(token)


async def test_without_redaction_the_gateway_never_shows_a_call_in_a_form() -> None:
    """A gateway whose redaction is off cannot tell a secret argument apart: an ask goes to the
    store, never into the host's form, even when the host declared form elicitation."""
    from otelhooks.builtin.approvers import ScriptedApprover
    from otelhooks.core.approvals import ApprovalRequest, CallIdentity
    from otelhooks.integrations.mcp.host_approval import HOST, GatewayApprover, HostAsk

    sent: list[object] = []

    async def send(request: object, related: object) -> object:
        sent.append(request)
        raise AssertionError("a form was sent")

    request = ApprovalRequest(
        id="a1", tool="deploy", call_id="c1", shown_call_id="c1", digest="d" * 16,
        arguments={"token": "hunter2hunter2"}, identity=CallIdentity("gateway", "r1", "alice"),
        reasons=("asked",), policies=(), hooks=(), expires_at=time.time() + 60,
    )  # fmt: skip
    store = ScriptedApprover({"deploy": "deny"}, who="store")
    token = HOST.set(HostAsk(form=True, send=send, who="host"))
    try:
        decision = await GatewayApprover(store, 5.0, forms=False)(request)
    finally:
        HOST.reset(token)
    assert sent == [] and store.asked == [request]
    assert getattr(decision, "by", None) == "store"


# -- the request's context, cut to what the policies read: the same decisions as the whole -------

_TRICKY_SCHEMA = {
    "type": "object",
    "properties": {
        "repo_path": {"type": "string"},
        "message": {"type": "string"},
        "files": {"type": "array", "items": {"type": "string"}},
        "opts": {
            "type": "object",
            "properties": {"force": {"type": "boolean"}, "name": {"type": "string"}},
        },
        # arguments named as the context's own attributes
        "now": {"type": "string"},
        "agent": {"type": "string"},
        "arguments": {"type": "string"},
        "note": {"type": ["string", "null"]},
    },
    "required": ["repo_path"],
}
# conditions that read the context through every path Cedar has: attributes, nested records,
# ``has`` (one and two levels), ``like``, indexing, sets, ``if``, negation, records holding the
# context whole, the time, the agent and the client as entities
_TRICKY_CONDITIONS = (
    'context.arguments.repo_path like "/etc*"',
    'context.arguments has message && context.arguments.message like "*rm -rf*"',
    "context.arguments has opts && context.arguments.opts has force"
    " && context.arguments.opts.force",
    "context.arguments has opts.force && context.arguments.opts.force",
    'context.arguments["repo_path"] == "/x"',
    'context["arguments"]["repo_path"] == "/x"',
    "context has arguments.note",
    "context.arguments has note",
    'context.arguments has now && context.arguments.now == "x"',
    'context.arguments has agent && context.arguments.agent == "rogue"',
    "context.arguments has arguments",
    "!(context.arguments has message)",
    'context.agent == Agent::"rogue"',
    'context.client in [Client::"bad"]',
    'context has agent && context.agent == Agent::"rogue"',
    'context has now && context.now.toTime() >= duration("12h")',
    'context.now.toTime() >= duration("12h")',
    '{"c": context}.c.arguments has files',
    '{"c": context}.c.agent == Agent::"rogue"',
    'if context.arguments has files then context.arguments.files.contains("k") else false',
    'context.arguments has files && context.arguments.files.containsAny(["a", "k"])',
)
_TRICKY_ARGUMENTS = (
    {"repo_path": "/x"},
    {"repo_path": "/etc/passwd", "message": "ok"},
    {"repo_path": "/w", "message": "do rm -rf /", "files": ["k"]},
    {"repo_path": "/w", "opts": {"force": True, "name": "n"}, "note": None},
    {"repo_path": "/w", "opts": {"name": "n"}, "note": "z", "now": "x", "agent": "rogue"},
    {"repo_path": "/w", "arguments": "a"},
)


@pytest.mark.parametrize("effect", ["forbid", "permit"])
@pytest.mark.parametrize("condition", _TRICKY_CONDITIONS)
def test_a_decision_on_the_cut_context_is_the_decision_on_the_whole(
    tmp_path: Path, effect: str, condition: str
) -> None:
    """Every call (cached or not) decides as Cedar does given the whole context, every
    argument, the time, the agent and the client: no attribute a policy can reach is left out
    (a forbid that would apply still applies), and no cached decision is reused for an input
    the key does not hold."""
    import datetime
    import itertools

    from otelhooks.builtin.cedar_model import (
        AGENT,
        CLIENT,
        TOOL,
        arguments_type,
        now_value,
        record_value,
        uid,
    )

    key = ToolKey("git", "git_commit")
    base = 'permit(principal, action in Action::"call_tool", resource);\n' * (effect == "forbid")
    scope = f'principal, action == Action::"{key.id}", resource'
    text = f"{base}{effect}({scope}) when {{ {condition} }};\n"
    policy = tmp_path / "p.cedar"
    policy.write_text(text)
    clocks = [datetime.datetime(2026, 1, 5, hour, tzinfo=datetime.UTC) for hour in (9, 19)]
    clock = {"now": clocks[0]}
    engine = CedarEngine(policy, now=lambda: clock["now"])
    engine.bind_tools({key: _TRICKY_SCHEMA})
    type_ = arguments_type(_TRICKY_SCHEMA)
    requesters = [
        Requester(Principal("User", "bob"), agent, client)
        for agent, client in (("good", "ok"), ("rogue", "ok"), ("good", "bad"))
    ]
    # each input at two times (the second from the cache when the action's decisions are cached)
    for arguments, requester, now in itertools.product(_TRICKY_ARGUMENTS, requesters, clocks):
        clock["now"] = now
        verdict = engine.decide_tool(key, _TRICKY_SCHEMA, requester, arguments)
        whole = {
            "arguments": record_value(arguments, type_, ""),
            "agent": {"__entity": uid(AGENT, requester.agent)},
            "client": {"__entity": uid(CLIENT, requester.client)},
            "now": now_value(now),
        }
        request = {
            "principal": requester.principal.uid(),
            "action": uid("Action", key.id),
            "resource": uid(TOOL, key.id),
            "context": whole,
        }
        result = cedarpy.is_authorized(
            request, text, engine._state.entities_for(requester.principal)
        )
        expected = "allow" if result.allowed and not result.diagnostics.errors else "deny"
        assert verdict.effect == expected, (arguments, requester, now, verdict)
