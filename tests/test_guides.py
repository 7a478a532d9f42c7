"""Every command block of every guide runs as printed, or says in its first line why it is not run.

The guides are the README and the pages of docs/ a user follows (not the API reference, the
changelog, the benchmark figures, the threat model or the development notes). A command block
is an indented block, or a fenced one marked ``bash``, ``sh``, ``shell`` or ``console``, or a
fenced one whose first line starts with ``$ `` (its other lines are the output, compared with
what the command prints, durations aside). Python blocks run in tests/test_docs.py.

A block whose first line is ``# not run by the docs tests: <why>`` is checked for the reason and
not run. Every other block is run the way a reader runs it (docs/development.md, "Guides"):

* getting-started's install block first, in an empty folder: it clones this checkout and makes
  the clone's environment, as a reader's first commands do;
* every other block in that clone, in a bash of its own with the clone's ``.venv`` activated (as
  getting-started says; a block that makes the environment itself runs without), its commands
  sent one at a time, each with stdin closed; a command
  sent to the background (``... &``) is waited for until it listens, as a reader waits for it,
  and whatever a block started is stopped at its end (SIGTERM, then SIGKILL);
* each command must succeed, print no traceback and no otelhooks warning, and a block's output
  must show what its page says it shows.

The commands are changed only by a map (also in docs/development.md): the repository's address
becomes this checkout; ``uvx X`` becomes ``X`` from the environment; each well-known port of
the pages becomes a free loopback port (the same one wherever the block names it, and the port
variables of scripts/run-jaeger.sh and collector-config/, ``OTEL_EXPORTER_OTLP_ENDPOINT`` and
``OTELHOOKS_JAEGER_QUERY_URL`` point at those ports); the ``XDG_*`` state folders are temporary.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .jaeger_support import free_ports, require_jaeger

ROOT = Path(__file__).resolve().parent.parent
NOT_GUIDES = ("docs/reference/", "docs/changelog.md", "docs/benchmarks.md", "docs/reliability.md")
NOT_GUIDES += ("docs/development.md",)
MARK = re.compile(r"^# not run by the docs tests: (\S.{9,})$")
COMMAND_FENCES = ("bash", "sh", "shell", "console")
REPOSITORY = "https://github.com/otelhooks/otelhooks"
INSTALL = f"git clone {REPOSITORY}"  # getting-started's install block begins so
# The ports the pages name, each run on a free loopback port instead.
KNOWN_PORTS = (4317, 4318, 6006, 8765, 8887, 8888, 8889, 13133, 13134, 13135)
KNOWN_PORTS += (14317, 14318, 16684, 16685, 16686, 16687)
COMMAND_TIMEOUT = 300.0
LISTEN_TIMEOUT = 120.0

# Blocks that fail today only because of changes under way elsewhere: strict, so that each
# flips (and must be removed from here) when its change lands. Keyed by the block's first command.
PENDING: dict[str, str] = {}

# What a block's output must show beyond success (by page and first command).
EXPECTED = {
    ("README.md", "python3 -m venv .venv"): ["[span tree: blocked]", "[summary]"],
    ("docs/tracing.md", "OTEL_TRACES_EXPORTER=otelhooks_otlp"): ["[span tree: blocked]"],
    ("docs/tracing.md", "bash scripts/run-jaeger.sh &"): [
        "traces: ok",
        "execute_tool dangerous",
        "[decision=block by=seed_hooks",
    ],
    ("docs/tracing.md", "export OTLP_GRPC_PORT=14317"): ["traces: ok", "invoke_agent demo-"],
    ("docs/tracing.md", "OTLP_GRPC_PORT=14317 OTLP_HTTP_PORT=14318"): ["traces: ok"],
}
# A Python traceback; a warning otelhooks logged.
FORBIDDEN = re.compile(r"^(Traceback \(most recent call last\)|otelhooks: .*)$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    path: str
    line: int
    lines: tuple[str, ...]
    prompted: bool  # a ``$ `` block: commands and the output they print

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def mark(self) -> str | None:
        """The reason given in the block's first line, if it is marked as not run."""
        found = MARK.match(self.lines[0].strip())
        return found.group(1) if found else None

    @property
    def marked(self) -> bool:
        return self.lines[0].startswith("# not run")

    def commands(self) -> list[tuple[str, list[str]]]:
        """Each command (continuation lines joined) with the output printed under it."""
        found: list[tuple[str, list[str]]] = []
        pending = ""
        for raw in self.lines:
            if self.prompted and not pending and not raw.startswith("$ "):
                if found:
                    found[-1][1].append(raw)
                continue
            line = raw[2:] if self.prompted and not pending else raw
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            pending += line
            if pending.endswith("\\"):
                pending += "\n"
                continue
            found.append((pending, []))
            pending = ""
        return found

    def first_command(self) -> str:
        commands = self.commands()
        return commands[0][0] if commands else ""


def guide_pages() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in pages if not str(p.relative_to(ROOT)).startswith(NOT_GUIDES)]


def command_blocks(path: Path) -> list[Block]:
    """The command blocks of a Markdown page (see the module's documentation)."""
    lines = path.read_text().splitlines()
    name = str(path.relative_to(ROOT))
    found, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\S*)", lines[i])
        if fence:
            start, body = i, []
            i += 1
            while not lines[i].strip().startswith("```"):
                body.append(lines[i][len(fence.group(1)) :])
                i += 1
            i += 1
            prompted = bool(body) and body[0].startswith("$ ")
            if fence.group(2) in COMMAND_FENCES or (not fence.group(2) and prompted):
                found.append(Block(name, start + 1, tuple(body), prompted))
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            indent = len(lines[i]) - len(lines[i].lstrip())
            start, body = i, []
            while i < len(lines) and (
                not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) >= indent
            ):
                body.append(lines[i][indent:])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            found.append(Block(name, start + 1, tuple(body), body[0].startswith("$ ")))
            continue
        i += 1
    return found


BLOCKS = [block for page in guide_pages() for block in command_blocks(page)]


def _param(block: Block) -> object:
    kind = "marked" if block.marked else "run"
    marks = [
        pytest.mark.xfail(strict=True, reason=reason)
        for prefix, reason in PENDING.items()
        if block.first_command().startswith(prefix)
    ]
    return pytest.param(block, id=f"{kind}:{block.id}", marks=marks)


def test_the_guides_have_command_blocks_to_run_and_each_pending_entry_names_one() -> None:
    assert len([b for b in BLOCKS if not b.marked]) >= 8
    assert len([b for b in BLOCKS if b.path == "docs/guides/mcp.md"]) >= 4
    firsts = [b.first_command() for b in BLOCKS]
    stale = [prefix for prefix in PENDING if not any(f.startswith(prefix) for f in firsts)]
    assert not stale, f"PENDING entries that match no block any more: remove them: {stale}"
    installs = [b for b in BLOCKS if b.first_command().startswith(INSTALL)]
    assert [b.path for b in installs] == ["docs/getting-started.md"]


# -- the map -------------------------------------------------------------------------------------


@dataclass
class Place:
    """Where a block runs: the reader's clone, the ports of the map, the environment."""

    clone: Path
    origin: Path
    state: Path
    ports: dict[int, int] = field(default_factory=dict)

    def command(self, text: str) -> str:
        """``text`` with the map applied."""
        text = text.replace(REPOSITORY, str(self.origin))
        text = re.sub(r"\buvx\s+", "", text)
        return re.sub(
            r"(?<=[:=])(\d{4,5})\b",
            lambda m: str(self.ports.get(int(m.group(1)), m.group(1))),
            text,
        )

    def environment(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OTEL_", "VIRTUAL_ENV", "PYTHONPATH", "XDG_DATA", "XDG_STATE"))
        }
        bins = {str(ROOT / ".venv" / "bin")}  # the checkout's own environment is not the reader's
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p not in bins)
        p = self.ports
        env.update(
            {
                "XDG_DATA_HOME": str(self.state / "data"),
                "XDG_STATE_HOME": str(self.state / "state"),
                "XDG_CONFIG_HOME": str(self.state / "config"),
                "OTLP_GRPC_PORT": str(p[4317]),
                "OTLP_HTTP_PORT": str(p[4318]),
                "JAEGER_QUERY_PORT": str(p[16686]),
                "JAEGER_QUERY_GRPC_PORT": str(p[16685]),
                "JAEGER_HEALTH_PORT": str(p[13133]),
                "JAEGER_METRICS_PORT": str(p[8888]),
                "GATEWAY_OTLP_GRPC_PORT": str(p[4317]),
                "GATEWAY_OTLP_HTTP_PORT": str(p[4318]),
                "GATEWAY_HEALTH_PORT": str(p[13134]),
                "GATEWAY_METRICS_PORT": str(p[8889]),
                "JAEGER_OTLP_ENDPOINT": f"127.0.0.1:{p[14317]}",
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://localhost:{p[4317]}",
                "OTELHOOKS_JAEGER_QUERY_URL": f"http://localhost:{p[16686]}",
            }
        )
        return env

    def with_fresh_ports(self) -> Place:
        ports = dict(zip(KNOWN_PORTS, free_ports(len(KNOWN_PORTS)), strict=True))
        return Place(self.clone, self.origin, self.state, ports)


# -- a reader's terminal -------------------------------------------------------------------------


@dataclass
class Step:
    command: str
    status: int
    output: str
    background: bool


class Terminal:
    """One bash, sent a block's commands one at a time (each from a file, with stdin closed),
    its output and that of whatever it starts in one log file."""

    def __init__(self, cwd: Path, env: dict[str, str], work: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.log_path = work / "terminal.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in close())
        self.bash = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        self.count = 0

    def run(self, command: str, timeout: float = COMMAND_TIMEOUT) -> Step:
        self.count += 1
        script = self.work / f"command-{self.count}.sh"
        script.write_text(command + "\n")
        token = f"guide-runner-{uuid.uuid4().hex}"
        start = self.log_path.stat().st_size
        assert self.bash.stdin is not None
        self.bash.stdin.write(
            f'source {script} </dev/null\nprintf \'\\n{token} %s %s\\n\' "$?" "$!"\n'.encode()
        )
        self.bash.stdin.flush()
        deadline = time.monotonic() + timeout
        pattern = re.compile(rf"\n{token} (\d+) (\d*)\n")
        while True:
            text = self.log_path.read_bytes()[start:].decode(errors="replace")
            done = pattern.search(text)
            if done:
                break
            if self.bash.poll() is not None:
                raise AssertionError(f"the shell exited during {command!r}:\n{text[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{command!r} did not finish in {timeout:g} s:\n{text[-3000:]}"
                )
            time.sleep(0.05)
        background = bool(re.search(r"(?<!&)&\s*(#.*)?$", command))
        step = Step(command, int(done.group(1)), text[: done.start()], background)
        if background:
            wait_until_listening(int(done.group(2)), self.log_path)
        return step

    def close(self) -> None:
        """Stop the shell and everything it started: SIGTERM to its process group, SIGKILL to
        what is left after 30 s."""
        if self.bash.stdin is not None:
            self.bash.stdin.close()
        group = self.bash.pid
        for sig, patience in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + patience
            while time.monotonic() < deadline:
                self.bash.poll()
                try:
                    os.killpg(group, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
        self.bash.wait(timeout=10)
        self._log.close()


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def _listening(pid: int) -> set[int]:
    """The TCP ports that ``pid`` and its descendants listen on."""
    tree, pids, todo = _children(), set(), [pid]
    while todo:
        current = todo.pop()
        pids.add(current)
        todo.extend(tree.get(current, []))
    inodes = set()
    for each in pids:
        try:
            fds = list(Path(f"/proc/{each}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def wait_until_listening(pid: int, log: Path, timeout: float = LISTEN_TIMEOUT) -> None:
    """Return once ``pid`` (a command sent to the background) and its children listen, and
    have opened no new port for a second; fail if it exits or takes longer than ``timeout``."""
    deadline = time.monotonic() + timeout
    seen: set[int] = set()
    steady_since = time.monotonic()
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            raise AssertionError(f"the background command exited:\n{log.read_text()[-3000:]}")
        now = _listening(pid)
        if now != seen:
            seen, steady_since = now, time.monotonic()
        elif seen and time.monotonic() - steady_since >= 1.0:
            return
        time.sleep(0.2)
    raise AssertionError(f"nothing listened within {timeout:g} s:\n{log.read_text()[-3000:]}")


# -- the reader's clone --------------------------------------------------------------------------


@dataclass
class Clone:
    place: Place
    steps: list[Step]
    error: str | None
    done: dict[str, list[Step]] = field(default_factory=dict)  # block text -> its run


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clone]:
    """Getting-started's install block, run in an empty folder with the map: the reader's
    clone of this checkout, with its environment."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    home = tmp_path_factory.mktemp("reader")
    origin = home / "origin" / "otelhooks"  # cloned as "otelhooks", as from its address
    origin.parent.mkdir()
    origin.symlink_to(ROOT)
    (home / "work").mkdir()
    place = Place(home / "work" / "otelhooks", origin, home / "state").with_fresh_ports()
    (install,) = [b for b in BLOCKS if b.first_command().startswith(INSTALL)]
    terminal = Terminal(home / "work", place.environment(), home / "install")
    steps: list[Step] = []
    error = None
    try:
        for command, _ in install.commands():
            steps.append(step := terminal.run(place.command(command)))
            if step.status != 0:
                error = f"{command!r} exited with {step.status}:\n{step.output[-3000:]}"
                break
    except AssertionError as exc:
        error = str(exc)
    finally:
        terminal.close()
    yield Clone(place, steps, error)


def run_block(block: Block, clone: Clone, work: Path) -> list[Step]:
    """Run ``block`` in the reader's clone, its environment activated; the steps it took."""
    place = clone.place.with_fresh_ports()
    terminal = Terminal(place.clone, place.environment(), work)
    steps = []
    try:
        if not any("-m venv .venv" in command for command, _ in block.commands()):
            activated = terminal.run("source .venv/bin/activate")
            assert activated.status == 0, activated.output
        for command, _ in block.commands():
            steps.append(terminal.run(place.command(command)))
            if steps[-1].status != 0:
                break
    finally:
        terminal.close()
    return steps


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_a_guides_command_block_runs_as_printed(block: Block, clone: Clone, tmp_path: Path) -> None:
    if block.marked:
        assert block.mark, (
            f"{block.id}: the mark needs a reason: '# not run by the docs tests: <why>'"
        )
        return
    if block.first_command().startswith(INSTALL):
        assert clone.error is None, clone.error
        steps = clone.steps
    else:
        assert clone.error is None, f"the reader's clone could not be made: {clone.error}"
        if "scripts/run-jaeger.sh" in "\n".join(block.lines):
            require_jaeger()
        key = "\n".join(c for c, _ in block.commands())
        if key not in clone.done:  # the same commands on two pages run once
            clone.done[key] = run_block(block, clone, tmp_path)
        steps = clone.done[key]
    for (command, printed), step in zip(block.commands(), steps, strict=False):
        assert step.status == 0, f"{command!r} exited with {step.status}:\n{step.output[-4000:]}"
        bad = FORBIDDEN.search(step.output)
        assert bad is None, f"{command!r} printed {bad.group(0)!r}:\n{step.output[-4000:]}"
        if printed:
            assert _normal(step.output) == _normal("\n".join(printed)), step.output
    assert len(steps) == len(block.commands())
    output = "\n".join(step.output for step in steps)
    for (page, first), words in EXPECTED.items():
        if block.path == page and block.first_command().startswith(first):
            missing = [w for w in words if w not in output]
            assert not missing, f"{block.id}: {missing} not in:\n{output[-4000:]}"


def _normal(text: str) -> list[str]:
    """Lines without trailing space, durations as ``N ms``, no blank lines at the ends."""
    lines = [re.sub(r"\d+\.\d+ ms", "N ms", line.rstrip()) for line in text.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


# -- the runner itself ---------------------------------------------------------------------------


def test_the_runner_sees_a_failure_a_server_that_dies_and_stops_what_a_block_started(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "GREETING": "hi"}
    terminal = Terminal(tmp_path, env, tmp_path / "t")
    try:
        assert terminal.run("false").status == 1
        assert terminal.run("cd / && echo $GREETING").output.strip() == "hi"
        assert terminal.run("pwd").output.strip() == "/"  # a shell per block: state carries on
        assert terminal.run("cat").status == 0  # stdin closed: a reader of stdin gets its end
        with pytest.raises(AssertionError, match="the background command exited"):
            terminal.run("sleep 0.2 &")
        server = terminal.run(f"{sys.executable} -m http.server 0 --bind 127.0.0.1 &")
        assert server.background
        pid = int(terminal.run("echo $!").output.strip())
        assert _listening(pid)
    finally:
        terminal.close()
    assert not Path(f"/proc/{pid}").exists()


def test_the_map_changes_only_the_address_uvx_and_the_known_ports() -> None:
    place = Place(Path("/c"), Path("/o/otelhooks"), Path("/s"), {4318: 50001, 16687: 50002})
    assert place.command(f"git clone {REPOSITORY} && cd otelhooks") == (
        "git clone /o/otelhooks && cd otelhooks"
    )
    assert place.command("uvx mcp-server-git --repository .") == "mcp-server-git --repository ."
    assert (
        place.command(
            "demo --otlp-endpoint http://localhost:4318 JAEGER_QUERY_PORT=16687 x:5432 y=12345"
        )
        == "demo --otlp-endpoint http://localhost:50001 JAEGER_QUERY_PORT=50002 x:5432 y=12345"
    )


def test_a_mark_needs_its_reason_and_a_prompted_block_keeps_its_output() -> None:
    marked = Block(
        "p.md", 1, ("# not run by the docs tests: needs Docker here", "docker ps"), False
    )
    assert marked.marked and marked.mark == "needs Docker here"
    bare = Block("p.md", 1, ("# not run by the docs tests:", "docker ps"), False)
    assert bare.marked and bare.mark is None
    prompted = Block("p.md", 1, ("$ echo a \\", "  b", "a b", "$ true"), True)
    assert prompted.commands() == [("echo a \\\n  b", ["a b"]), ("true", [])]
