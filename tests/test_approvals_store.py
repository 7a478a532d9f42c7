"""Approvals answered elsewhere: the store approver answered by another process through
``otelhooks approvals``, and the terminal approver. Each test replays, races or outlives an
approval and expects it refused, or honoured once."""

from __future__ import annotations

import asyncio
import getpass
import io
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from otelhooks import (
    ApprovalRequest,
    ApprovalSettings,
    Hooks,
    ToolCall,
    ToolCallRecord,
    ToolExecutor,
    ToolRegistry,
    ask,
)
from otelhooks.builtin.approvers import ScriptedApprover, StoreApprover, TerminalApprover
from otelhooks.builtin.store import SQLiteStore
from otelhooks.cli import main as cli


def setup(ran: list[Mapping[str, Any]]) -> tuple[ToolRegistry, Hooks, list[ToolCallRecord]]:
    registry = ToolRegistry()

    @registry.tool
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append({"path": path})
        return f"deleted {path}"

    hooks = Hooks()
    hooks.add(before=lambda ctx: ask("deleting needs a person", policies=["rm.human"]), name="g")
    seen: list[ToolCallRecord] = []
    hooks.add(observe=seen.append, name="records")
    return registry, hooks, seen


class Waiting:
    """The ids of the requests a store approver put in the store, as they come."""

    def __init__(self) -> None:
        self.ids: asyncio.Queue[str] = asyncio.Queue()

    def __call__(self, request: ApprovalRequest, approval_id: str) -> None:
        self.ids.put_nowait(approval_id)

    async def next(self) -> str:
        return await asyncio.wait_for(self.ids.get(), 30)


def executor_for(
    store: Path, ran: list[Mapping[str, Any]], ttl: float = 30.0
) -> tuple[ToolExecutor, Waiting, list[ToolCallRecord]]:
    registry, hooks, seen = setup(ran)
    waiting = Waiting()
    approver = StoreApprover(store, poll=0.02, on_pending=waiting)
    return (
        ToolExecutor(registry, hooks, approver=ApprovalSettings(approver, ttl=ttl)),
        waiting,
        seen,
    )


async def started(
    store: Path, ran: list[Mapping[str, Any]], path: str
) -> tuple[asyncio.Task[Any], str, list[ToolCallRecord]]:
    """A call of ``delete`` waiting in the store: its task, its approval's id, the records."""
    executor, waiting, seen = executor_for(store, ran)
    task = asyncio.create_task(executor.execute(ToolCall("c1", "delete", {"path": path})))
    return task, await waiting.next(), seen


def answer(store: Path, *args: str) -> int:
    return cli(["approvals", "--store", str(store), *args])


async def test_a_second_process_approves_with_the_cli_and_the_call_runs_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store.sqlite3"
    ran: list[Mapping[str, Any]] = []
    task, approval_id, seen = await started(store, ran, "/srv/a")
    assert answer(store, "list") == 0
    listed = capsys.readouterr().out
    assert approval_id in listed and '"/srv/a"' in listed and "deleting needs a person" in listed
    assert ran == []  # nothing runs while it waits
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "otelhooks", "approvals", "--store", str(store), "approve",
         approval_id, "--as", "alice"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"approved {approval_id} (delete) by alice at " in done.stdout
    result = await asyncio.wait_for(task, 30)
    assert result.content == "deleted /srv/a"
    assert ran == [{"path": "/srv/a"}]
    approval = seen[0].approval
    assert approval is not None
    assert (approval.answer, approval.by, approval.how, approval.grant) == (
        "approve", "alice", "store", approval_id,
    )  # fmt: skip
    # The approval is spent: approving it again is refused, and nothing runs again.
    assert answer(store, "approve", approval_id) == 1
    assert "it is used" in capsys.readouterr().err
    db = SQLiteStore(store)
    found = db.get_approval(approval_id)
    db.close()
    assert found is not None and found.state == "used" and found.decided_by == "alice"
    assert found.decided_at is not None


async def test_an_approval_is_honoured_for_its_own_call_only(tmp_path: Path) -> None:
    """Two calls wait; approving one does not let the other (other arguments) through, and an
    approval cannot be spent for another tool, digest or identity."""
    store = tmp_path / "store.sqlite3"
    ran: list[Mapping[str, Any]] = []
    executor, waiting, _ = executor_for(store, ran, ttl=2.0)
    first = asyncio.create_task(executor.execute(ToolCall("c1", "delete", {"path": "/srv/a"})))
    first_id = await waiting.next()
    second = asyncio.create_task(executor.execute(ToolCall("c2", "delete", {"path": "/etc"})))
    second_id = await waiting.next()
    assert answer(store, "approve", first_id, "--as", "alice") == 0
    assert (await first).content == "deleted /srv/a"
    result = await second  # nobody approved it: it expires
    assert result.content.startswith("blocked: approval denied by store (store): nobody answered")
    assert ran == [{"path": "/srv/a"}]
    db = SQLiteStore(store)
    try:
        approved = db.get_approval(first_id)
        assert approved is not None and approved.state == "used"
        waiting_one = db.get_approval(second_id)
        assert waiting_one is not None and waiting_one.state == "expired"
        # Spend attempts for what it was not made for: refused, whatever the order.
        fresh = db.request_approval(_request(approved.tool, approved.digest, approved.identity))
        assert db.decide(fresh.id, approve=True, by="alice") is not None
        tool, digest, identity = fresh.tool, fresh.digest, fresh.identity
        assert not db.consume(fresh.id, tool=tool, digest=waiting_one.digest, identity=identity)
        assert not db.consume(fresh.id, tool="format_disk", digest=digest, identity=identity)
        assert not db.consume(fresh.id, tool=tool, digest=digest, identity="mallory")
        assert db.consume(fresh.id, tool=tool, digest=digest, identity=identity)
        assert not db.consume(fresh.id, tool=tool, digest=digest, identity=identity)  # spent
    finally:
        db.close()


def _request(tool: str, digest: str, identity: str) -> Any:
    import time

    from otelhooks.builtin.store import ApprovalRequest as Pending

    return Pending(tool, digest, identity, time.time() + 60)


async def test_the_same_call_twice_needs_two_approvals(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite3"
    ran: list[Mapping[str, Any]] = []
    executor, waiting, _ = executor_for(store, ran, ttl=2.0)
    call = ToolCall("c1", "delete", {"path": "/srv/a"})
    task = asyncio.create_task(executor.execute(call))
    approval_id = await waiting.next()
    assert answer(store, "approve", approval_id) == 0
    assert (await task).content == "deleted /srv/a"
    again = asyncio.create_task(executor.execute(ToolCall("c2", "delete", {"path": "/srv/a"})))
    again_id = await waiting.next()
    assert again_id != approval_id  # a new request: the first approval is not reused
    assert (await again).is_error
    assert ran == [{"path": "/srv/a"}]


async def test_a_denial_and_an_expired_request_both_refuse_and_record_who(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store.sqlite3"
    ran: list[Mapping[str, Any]] = []
    task, approval_id, seen = await started(store, ran, "/")
    assert answer(store, "deny", approval_id) == 0  # who: the OS user
    assert (await task).content == (
        f"blocked: approval denied by {getpass.getuser()} (store): denied in the store"
    )
    executor, waiting, late_seen = executor_for(store, ran, ttl=0.3)
    late = asyncio.create_task(executor.execute(ToolCall("c2", "delete", {"path": "/x"})))
    late_id = await waiting.next()
    result = await late
    # The store's expiry and the executor's wait for its approver end together; on a loaded
    # machine either may be first, and both block the call.
    assert result.is_error
    assert any(
        why in result.content
        for why in ("nobody answered before the request expired", "no answer from the approver")
    ), result.content
    capsys.readouterr()
    assert answer(store, "approve", late_id) == 1  # too late
    assert "it is expired" in capsys.readouterr().err
    assert ran == []
    # the record says which ended first: the store's expiry (a denial) or the executor's wait
    late_answer = "timeout" if "no answer from the approver" in result.content else "deny"
    assert [r.approval.answer for r in seen + late_seen if r.approval] == ["deny", late_answer]


async def test_a_store_that_cannot_be_used_denies(tmp_path: Path) -> None:
    ran: list[Mapping[str, Any]] = []
    registry, hooks, _ = setup(ran)
    store = SQLiteStore(tmp_path / "s.sqlite3")
    store.close()  # every use now fails
    executor = ToolExecutor(registry, hooks, approver=StoreApprover(store))
    result = await executor.execute(ToolCall("c1", "delete", {"path": "/"}))
    assert result.content.startswith(
        "blocked: approval denied by store (store): the approval store cannot be used"
    )
    assert ran == []


# -- the terminal ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "runs"), [("a\n", True), ("yes\n", True), ("d\n", False),
                                             ("\n", False), ("aprove\n", False)])  # fmt: skip
async def test_the_terminal_approver_runs_only_on_a_clear_yes(typed: str, runs: bool) -> None:
    ran: list[Mapping[str, Any]] = []
    registry, hooks, seen = setup(ran)
    controller, terminal = os.openpty()
    stdin = os.fdopen(terminal, "r")
    shown = io.StringIO()
    try:
        os.write(controller, typed.encode())
        approver = TerminalApprover(stdin=stdin, stdout=shown, who="tess")
        executor = ToolExecutor(registry, hooks, approver=approver)
        await executor.execute(ToolCall("c1", "delete", {"path": "/srv/a"}))
    finally:
        stdin.close()
        os.close(controller)
    assert bool(ran) is runs
    assert "tool 'delete' asks for approval: deleting needs a person" in shown.getvalue()
    approval = seen[0].approval
    assert approval is not None and (approval.by, approval.how) == ("tess", "terminal")


async def test_without_a_terminal_every_ask_is_denied() -> None:
    ran: list[Mapping[str, Any]] = []
    registry, hooks, _ = setup(ran)
    executor = ToolExecutor(registry, hooks, approver=TerminalApprover(stdin=io.StringIO("a\n")))
    result = await executor.execute(ToolCall("c1", "delete", {"path": "/"}))
    assert ran == []
    assert "no terminal to ask" in result.content


async def test_scripted_answers_are_checked_and_unknown_tools_denied() -> None:
    with pytest.raises(ValueError, match="'approve' or 'deny'"):
        ScriptedApprover({"delete": "approved"})
    ran: list[Mapping[str, Any]] = []
    registry, hooks, _ = setup(ran)
    executor = ToolExecutor(registry, hooks, approver=ScriptedApprover({"other": "approve"}))
    assert (await executor.execute(ToolCall("c1", "delete", {"path": "/"}))).is_error
    assert ran == []


async def test_a_secret_the_model_put_in_a_call_id_never_reaches_the_store_or_the_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The call id is the model's text: the store (read by every approver) and the list get it
    # redacted, and the approval still settles the call it was asked for.
    secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    store = tmp_path / "store.sqlite3"
    ran: list[Mapping[str, Any]] = []
    executor, waiting, _ = executor_for(store, ran)
    call = ToolCall(secret, "delete", {"path": "/srv/a"})
    task = asyncio.create_task(executor.execute(call))
    approval_id = await waiting.next()
    assert answer(store, "list") == 0
    listed = capsys.readouterr().out
    assert approval_id in listed and secret not in listed
    assert answer(store, "approve", approval_id, "--as", "alice") == 0
    result = await asyncio.wait_for(task, 30)
    assert (result.tool_call_id, result.content) == (secret, "deleted /srv/a")
    assert ran == [{"path": "/srv/a"}]
    held = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert secret.encode() not in held and secret[8:].encode() not in held
