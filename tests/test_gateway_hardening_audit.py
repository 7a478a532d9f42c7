"""An audit log that cannot be cut silently, and refused logins in it: the gateway with
mcp-server-time from PyPI and a token file, the official client and plain HTTP; the log cut at
its end, emptied and its head deleted, checked with ``otelhooks mcp audit verify`` as an operator
runs it; a restart refused after a cut."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from otelhooks.integrations.mcp.auth import add_token
from otelhooks.integrations.mcp.policy import parse_policy
from otelhooks.integrations.mcp.proxy import MCPProxy, ProxyStartError

from .gateway_support import gateway, host, raw_post
from .mcp_support import proxy_cli, time_command

ROOT = Path(__file__).resolve().parent.parent


def policy_text() -> str:
    return f"""
[[upstream]]
name = "time"
command = {json.dumps(time_command())}

[auth]
tokens = "tokens.toml"                # beside the policy file, wherever the gateway starts

[audit]
file = "audit.jsonl"

[store]
file = "gateway.sqlite3"
"""


def verify(log: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otelhooks", "mcp", "audit", "verify", str(log)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def copy_of(tmp_path: Path, name: str) -> Path:
    """The log, its head and its key in a directory of their own."""
    folder = tmp_path / name
    folder.mkdir()
    for suffix in ("", ".head", ".key"):
        if (tmp_path / f"audit.jsonl{suffix}").exists():
            shutil.copy2(tmp_path / f"audit.jsonl{suffix}", folder / f"audit.jsonl{suffix}")
    return folder / "audit.jsonl"


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A gateway's audit log of five calls (and a refused login), closed."""
    import asyncio

    tmp_path = tmp_path_factory.mktemp("audited")
    token = add_token(tmp_path / "tokens.toml", "eve\u2028admin")  # a line separator in a name

    async def calls() -> None:
        async with gateway(policy_text(), tmp_path) as gw, host(gw.url, token) as h:
            for zone in ("UTC", "Europe/Paris", "Asia/Tokyo", "America/Lima", "Africa/Lagos"):
                await h.call_tool("get_current_time", {"timezone": zone})

    asyncio.run(calls())
    return tmp_path


def test_lines_cut_from_the_end_an_emptied_log_and_a_deleted_head_each_fail_verify_with_the_range(
    audited: Path,
) -> None:
    log = audited / "audit.jsonl"
    intact = verify(log)
    assert intact.returncode == 0 and "5 lines, the chain holds" in intact.stdout, intact.stderr
    raw = log.read_bytes()

    cut = copy_of(audited, "cut")
    cut.write_bytes(b"".join(raw.splitlines(keepends=True)[:4]))  # the last line deleted
    last = verify(cut)
    assert last.returncode == 1
    assert "lines 5-5 are missing: the log ends at line 4, its head says 5" in last.stderr

    emptied = copy_of(audited, "emptied")
    emptied.write_bytes(b"")
    empty = verify(emptied)
    assert empty.returncode == 1
    assert "lines 1-5 are missing: the file is empty, its head says 5" in empty.stderr

    headless = copy_of(audited, "headless")
    Path(f"{headless}.head").unlink()
    gone = verify(headless)
    assert gone.returncode == 1
    assert "its head (audit.jsonl.head) is missing: lines after line 5 may be missing" in (
        gone.stderr
    )
    assert "5 lines, the chain holds, and its head matches" in intact.stdout
    assert b"\xe2\x80\xa8" not in raw and b"\\u2028" in raw  # ASCII: no reader splits a line
    assert json.loads(raw.splitlines()[0])["identity"] == "eve\u2028admin"


async def test_a_gateway_refuses_to_start_on_a_cut_log_unless_told_to_record_the_gap(
    audited: Path,
) -> None:
    log = copy_of(audited, "restarted")
    folder = log.parent
    shutil.copy2(audited / "tokens.toml", folder / "tokens.toml")
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:3]))
    policy = parse_policy(policy_text(), str(folder / "gateway.toml"), base=folder)
    with pytest.raises(ProxyStartError, match="lines 4-5 are missing"):
        MCPProxy(policy)
    assert len(log.read_bytes().splitlines()) == 3  # the evidence is left as it was
    (folder / "gateway.toml").write_text(policy_text())
    refused = proxy_cli("--policy", str(folder / "gateway.toml"), "--check", timeout=120)
    assert refused.returncode == 1 and "--audit-record-gap" in refused.stderr
    assert "lines 4-5 are missing" in refused.stderr
    # What --audit-record-gap does: a signed gap record, and the chain goes on from it.
    assert policy.audit is not None
    told = dataclasses.replace(policy, audit=dataclasses.replace(policy.audit, record_gap=True))
    proxy = MCPProxy(told)
    assert proxy.audit is not None
    proxy.audit.close()
    gap = json.loads(log.read_bytes().splitlines()[-1])
    assert gap["event"] == "audit_gap" and gap["missing"] == "4-5" and gap["seq"] == 4
    checked = verify(log)  # the chain holds and says what is missing
    assert checked.returncode == 1 and "records a gap: lines 4-5" in checked.stderr


async def test_refused_logins_are_audited_per_address_without_a_write_per_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    add_token(tmp_path / "tokens.toml", "ops")
    with caplog.at_level(logging.INFO, logger="otelhooks"):
        async with gateway(policy_text(), tmp_path) as gw:
            answers = [await raw_post(gw.url, f"ohk_{'x' * 43}{n}") for n in range(20)]
            answers.append(await raw_post(gw.url))  # no token at all
            assert (tmp_path / "audit.jsonl").stat().st_size == 0  # no write per request
    assert {a.status_code for a in answers} == {401}
    challenge = answers[-1].headers["www-authenticate"]
    assert 'resource_metadata="http://127.0.0.1:' in challenge  # tokens only, too
    warnings = [r for r in caplog.records if "login refused" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "127.0.0.1" in warnings[0].getMessage()
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    (refused,) = [x for x in lines if x["event"] == "login_refused"]
    assert refused["client_address"] == "127.0.0.1" and refused["count"] == 21
    assert refused["reasons"] == {"not in tokens.toml": 20, "no bearer token": 1}
    assert verify(tmp_path / "audit.jsonl").returncode == 0


def test_the_secret_is_made_once_private_and_a_key_env_never_reaches_an_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = '[[upstream]]\nname = "t"\ncommand = ["true"]\n[audit]\nfile = "a.jsonl"\n'
    MCPProxy(parse_policy(text, base=tmp_path)).audit.close()  # type: ignore[union-attr]
    key = tmp_path / "a.jsonl.key"
    assert key.stat().st_mode & 0o777 == 0o600
    secret = key.read_bytes()
    MCPProxy(parse_policy(text, base=tmp_path)).audit.close()  # type: ignore[union-attr]
    assert key.read_bytes() == secret  # made once
    monkeypatch.setenv("GATEWAY_AUDIT_SECRET", "s" * 40)
    with_env = text.replace(
        'file = "a.jsonl"', 'file = "b.jsonl"\nkey_env = "GATEWAY_AUDIT_SECRET"'
    )
    proxy = MCPProxy(parse_policy(with_env, base=tmp_path))
    assert "GATEWAY_AUDIT_SECRET" not in os.environ  # no child process inherits it
    assert "GATEWAY_AUDIT_SECRET" not in (proxy.configs[0].environment() or {})
    assert proxy.audit is not None
    proxy.audit.close()


def test_verify_help_is_plain_text() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "otelhooks", "mcp", "audit", "verify", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert shown.returncode == 0 and "FILE.head" in shown.stdout
    assert "``" not in shown.stdout and ":func:" not in shown.stdout


def test_a_token_file_is_found_beside_the_policy_and_a_missing_one_stops_the_start(
    tmp_path: Path,
) -> None:
    from otelhooks.integrations.mcp.auth import TokenFileError

    text = '[[upstream]]\nname = "t"\ncommand = ["true"]\n[auth]\ntokens = "tokens.toml"\n'
    with pytest.raises(TokenFileError, match="cannot read the token file"):
        MCPProxy(parse_policy(text, base=tmp_path))  # before any upstream starts or "serving on"
    add_token(tmp_path / "tokens.toml", "ops")  # beside the policy, not in the working directory
    proxy = MCPProxy(parse_policy(text, base=tmp_path))
    assert proxy.verifier is not None and proxy.verifier.tokens is not None
    assert proxy.verifier.tokens.path == tmp_path / "tokens.toml"


# -- the head and the group commit: durable first, then sealed; a crash told from a cut ----------

CRASHING_WRITER = """
import os, signal, sys
from otelhooks.builtin.audit import AuditLog

log = AuditLog(sys.argv[1], group_commit=True)
for n in range(5):
    log.append("tool_call", {"n": n})
log.commit()  # durable, and the head names lines 1-5
for n in range(5, 8):
    log.append("tool_call", {"n": n})  # written; the group commit never comes
if sys.argv[2] == "torn":  # killed in the middle of a line: half of it reached the file
    with open(sys.argv[1], "ab") as raw:
        raw.write(b'{"call_id":"c9","decision":"allow","ev')
os.kill(os.getpid(), signal.SIGKILL)
"""


def crashed_log(tmp_path: Path, how: str) -> Path:
    """A log whose writer was killed after lines 6-8 were written and before their commit
    (``torn``: in the middle of a ninth line too)."""
    log = tmp_path / how / "audit.jsonl"
    log.parent.mkdir()
    child = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, str(log), how],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert child.returncode == -9, child.stderr
    return log


def test_the_head_never_names_a_line_before_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otelhooks.builtin.audit import AuditLog, Head, head_path, verify_audit_log

    log = AuditLog(tmp_path / "audit.jsonl", group_commit=True)
    head = head_path(log.path)
    for n in range(3):
        log.append("tool_call", {"n": n})
    assert Head.read(head, log.keys) == Head(0, "0" * 64, 0)  # written, not durable: not named
    order: list[str] = []
    real_fsync, real_pwrite = os.fsync, os.pwrite

    def fsync(fd: int) -> None:
        order.append("fsync")
        if len(order) == 1:  # a caller writes while the commit's fsync runs
            log.append("tool_call", {"n": "during"})
        real_fsync(fd)

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        order.append(f"head {json.loads(data)['count']}")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "pwrite", pwrite)
    log.commit()
    assert order == ["fsync", "head 3"]  # the line written during the fsync is not named
    sealed = Head.read(head, log.keys)
    assert sealed is not None and sealed.count == 3
    assert sealed.size == len(b"".join(log.path.read_bytes().splitlines(keepends=True)[:3]))
    check = verify_audit_log(log.path)
    assert check.ok and check.unsealed == (4, 4)
    log.commit()
    assert order[-2:] == ["fsync", "head 4"]
    log.close()
    assert verify_audit_log(log.path).unsealed is None


def test_a_gateway_killed_between_a_line_and_its_head_is_told_apart_from_a_cut(
    tmp_path: Path,
) -> None:
    from otelhooks.builtin.audit import AuditLog, AuditLogError

    log = crashed_log(tmp_path, "killed")
    crashed = verify(log)
    assert crashed.returncode == 3, crashed.stderr
    assert "8 lines, the chain holds; lines 6-8 follow the line its head names" in crashed.stderr
    assert "missing" not in crashed.stderr
    # Cutting what the head names is a cut, crash or not.
    cut = copy_of(log.parent, "cut")
    cut.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:4]))
    cutting = verify(cut)
    assert cutting.returncode == 1 and "lines 5-5 are missing" in cutting.stderr
    with pytest.raises(AuditLogError, match="lines 5-5 are missing"):
        AuditLog(cut)
    # A lying tail: line 7 rewritten after the crash is no crash.
    lines = log.read_bytes().splitlines(keepends=True)
    forged = copy_of(log.parent, "forged")
    forged.write_bytes(b"".join([*lines[:6], lines[6].replace(b'"n":6', b'"n":9'), lines[7]]))
    lying = verify(forged)
    assert lying.returncode == 1 and "7: its hash does not match its content" in lying.stderr
    # The next start checks the lines after the head and seals them.
    AuditLog(log).close()
    sealed = verify(log)
    assert sealed.returncode == 0, sealed.stderr
    assert "8 lines, the chain holds, and its head matches" in sealed.stdout


def test_a_torn_line_is_recorded_at_restart_and_a_forged_one_is_not_excused(
    tmp_path: Path,
) -> None:
    from otelhooks.builtin.audit import AuditLog

    log = crashed_log(tmp_path, "torn")
    before = verify(log)
    assert before.returncode == 1 and "9: not JSON (a torn or edited line)" in before.stderr
    AuditLog(log).close()  # the restart records the torn bytes; its head names the record
    recorded = verify(log)
    assert recorded.returncode == 0, recorded.stderr
    assert "10: records a torn write of 39 bytes after line 8" in recorded.stdout
    restarted = AuditLog(log)
    restarted.append("tool_call", {"n": "after"})
    restarted.close()
    lines = log.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[9])
    assert record["event"] == "audit_torn" and record["after"] == 8 and record["seq"] == 9
    assert lines[8].startswith(b'{"call_id":"c9"')  # the torn bytes are kept as they were
    checked = verify(log)
    assert checked.returncode == 0, checked.stderr
    assert "10: records a torn write of 39 bytes after line 8" in checked.stdout
    assert "11 lines, the chain holds, and its head matches" in checked.stdout
    # The record excuses exactly those bytes: changed ones, or a change elsewhere, are faults.
    changed = copy_of(log.parent, "changed")
    changed.write_bytes(b"".join([*lines[:8], lines[8].replace(b"c9", b"c1"), *lines[9:]]))
    assert verify(changed).returncode == 1
    earlier = copy_of(log.parent, "earlier")
    earlier.write_bytes(b"".join([lines[0], lines[1].replace(b'"n":1', b'"n":7'), *lines[2:]]))
    edited = verify(earlier)
    assert edited.returncode == 1 and "2: its hash does not match its content" in edited.stderr
