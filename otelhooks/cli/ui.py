"""``otelhooks ui``: a trace viewer on this machine, without Docker: Arize Phoenix, on loopback.

::

    otelhooks ui --install          # once: Phoenix in an environment of its own (~850 MB)
    otelhooks ui                    # http://127.0.0.1:6006; Ctrl-C stops it
    otelhooks demo --ui             # the demo's traces into it

Phoenix needs ``anthropic<2``, which otelhooks' ``anthropic`` extra cannot share, so it lives in
an environment of its own (``phoenix-<version>`` in the otelhooks cache,
:mod:`otelhooks.cli.cache`) unless it is already in this one (the ``ui`` extra, in an
environment without the ``anthropic`` extra) or named with ``--phoenix``/``OTELHOOKS_PHOENIX``.
It listens on 127.0.0.1 only, its OTLP/gRPC receiver on a port of its own (4317 stays free for
a Jaeger or a collector), with its usage telemetry off; its own log goes to a file beside its data.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cache import cache_home
from .ports import free_port

PHOENIX_VERSION = "20.26.1"
DEFAULT_PORT = 6006
ENV = "OTELHOOKS_PHOENIX"


def add_parser(sub: Any) -> None:
    ui = sub.add_parser(
        "ui",
        help="a trace viewer (Arize Phoenix) on this machine, without Docker",
        description="Start Arize Phoenix on 127.0.0.1, print its URL and the OTLP endpoint to "
        "send traces to, and stop it on Ctrl-C. otelhooks demo --ui runs the demo into it.",
    )
    ui.add_argument("--port", type=int, default=DEFAULT_PORT, help="its port (default 6006)")
    ui.add_argument("--data", help="where it keeps its traces (default: a folder of your user's)")
    ui.add_argument(
        "--install",
        action="store_true",
        help=f"install arize-phoenix {PHOENIX_VERSION} in an environment of its own first",
    )
    ui.add_argument("--phoenix", help=f"the phoenix program to run (default: {ENV}, or found)")


def data_home() -> Path:
    """Where the viewer keeps its traces by default: ``$XDG_DATA_HOME/otelhooks/phoenix``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "otelhooks" / "phoenix"


def managed_env() -> Path:
    """The environment ``--install`` makes: ``phoenix-<version>`` in the otelhooks cache."""
    return cache_home() / f"phoenix-{PHOENIX_VERSION}"


def find_phoenix(given: str | None = None) -> Path | None:
    """The ``phoenix`` program: given, ``OTELHOOKS_PHOENIX``, this environment's, or the one
    ``--install`` made."""
    for candidate in (
        given,
        os.environ.get(ENV),
        str(Path(sys.executable).parent / "phoenix"),
        str(managed_env() / "bin" / "phoenix"),
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def install(
    env: Path | None = None, requirement: str = f"arize-phoenix=={PHOENIX_VERSION}"
) -> Path:
    """Make the environment of its own (default :func:`managed_env`) and install Phoenix in it,
    saying each step and letting pip show its progress, on stderr; returns its program."""
    env = env or managed_env()
    started = time.monotonic()

    def step(text: str) -> None:
        print(f"otelhooks ui: {text}", file=sys.stderr, flush=True)

    step(f"installing {requirement} into {env} (about 850 MB: a few minutes)")
    step("1/3 making a virtual environment")
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    step("2/3 updating its pip")
    subprocess.run([*pip, "--upgrade", "pip"], check=True, stdout=sys.stderr)
    step(f"3/3 installing {requirement} (pip's progress follows)")
    subprocess.run([*pip, requirement], check=True, stdout=sys.stderr)
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    step(f"installed in {minutes} min {seconds} s")
    return env / "bin" / "phoenix"


def port_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port``. Bound with address reuse, as the viewer's
    server binds: the TIME-WAIT connections a stopped viewer leaves for a minute do not count."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def answering(url: str) -> bool:
    """Whether a Phoenix answers at ``url``."""
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@dataclass
class Viewer:
    """A Phoenix this command started (or found running)."""

    url: str
    data: Path | None
    log: Path | None
    process: subprocess.Popen[bytes] | None  # None: it was already running

    @property
    def otlp_endpoint(self) -> str:
        """The base URL OTLP/HTTP exporters take (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
        return self.url

    def project_url(self, name: str, wait: float = 10.0) -> str:
        """The page of the project a service's traces go to, once the viewer shows it (it
        takes in spans in the background); its home page if it does not within ``wait`` s."""
        deadline = time.monotonic() + wait
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/v1/projects", timeout=5) as answer:
                    projects = json.load(answer)["data"]
            except (OSError, ValueError, KeyError):
                projects = []
            found = next((p["id"] for p in projects if p.get("name") == name), None)
            if found:
                return f"{self.url}/projects/{found}"
            if time.monotonic() >= deadline:
                return self.url
            time.sleep(0.25)

    def stop(self) -> None:
        """Stop it (when this command started it): Ctrl-C first, then harder."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


class ViewerError(RuntimeError):
    """The viewer cannot start; the message is the one line to print."""


def start(
    phoenix: Path, port: int, data: Path, timeout: float = 180.0, port_flag: str = "--port"
) -> Viewer:
    """Start Phoenix on 127.0.0.1:``port`` with its data in ``data``; return once it answers.
    ``port_flag`` is the option that moves the port, for the message when it is taken. A
    failure or an interrupt while it starts stops it again."""
    if not port_free(port):
        raise ViewerError(f"port {port} is in use: stop what holds it, or give {port_flag} N")
    data.mkdir(parents=True, exist_ok=True)
    log = data / "phoenix.log"
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(data),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    for name in [n for n in env if n.startswith("OTEL_")]:  # the viewer is not an agent
        del env[name]
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(phoenix), "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    viewer = Viewer(f"http://127.0.0.1:{port}", data, log, process)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                raise ViewerError(f"Phoenix exited ({process.returncode}): {' | '.join(tail)}")
            if answering(viewer.url):
                return viewer
            time.sleep(0.25)
    except BaseException:
        viewer.stop()
        raise
    viewer.stop()
    raise ViewerError(f"Phoenix did not answer within {timeout:g} s; its log: {log}")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM is Ctrl-C (a ``KeyboardInterrupt``): a viewer being started or
    served is stopped on either, never left running on its own."""
    previous = signal.getsignal(signal.SIGTERM)

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def viewer_for(args: argparse.Namespace, port: int, port_flag: str = "--port") -> Iterator[Viewer]:
    """A viewer to send to: the one running at ``port``, or one started for the block (and
    stopped at its end, Ctrl-C or SIGTERM included). ``port_flag`` names the option that
    moves the port."""
    url = f"http://127.0.0.1:{port}"
    if answering(url):
        yield Viewer(url, None, None, None)
        return
    phoenix = find_phoenix(getattr(args, "phoenix", None))
    if phoenix is None:
        if not getattr(args, "install", False):
            raise ViewerError(
                f"Arize Phoenix is not installed: otelhooks ui --install puts arize-phoenix "
                f"{PHOENIX_VERSION} in an environment of its own ({managed_env()}, about 850 MB;"
                " it needs anthropic<2, so it cannot share otelhooks' environment)"
            )
        phoenix = install()
    data = Path(args.data) if getattr(args, "data", None) else data_home()
    with terminate_as_interrupt():
        viewer = start(phoenix, port, data, port_flag=port_flag)
        try:
            yield viewer
        finally:
            viewer.stop()


def announce_started(viewer: Viewer) -> None:
    """Say where the viewer this command started runs, and where it keeps what it holds."""
    where = f" (traces in {viewer.data}; its log: {viewer.log})" if viewer.data else ""
    print(f"Phoenix is running at {viewer.url}{where}", flush=True)


def announce(viewer: Viewer) -> None:
    announce_started(viewer)
    print("Send traces to it over OTLP/HTTP:", flush=True)
    print(
        f"  export OTEL_EXPORTER_OTLP_ENDPOINT={viewer.otlp_endpoint} OTELHOOKS_OPENINFERENCE=true",
        flush=True,
    )
    print("or run the demo into it: otelhooks demo --ui", flush=True)


def wait_for_interrupt(viewer: Viewer) -> int:
    """Serve until Ctrl-C (or SIGTERM); 0 once the viewer stopped cleanly."""
    try:
        while True:
            if viewer.process is not None and viewer.process.poll() is not None:
                print(f"otelhooks ui: Phoenix stopped on its own; its log: {viewer.log}")
                return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    print("stopping Phoenix", file=sys.stderr, flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        print(f"otelhooks ui: --port must be 1 to 65535, not {args.port}", file=sys.stderr)
        return 2
    if answering(f"http://127.0.0.1:{args.port}"):
        print(
            f"otelhooks ui: a Phoenix already answers at http://127.0.0.1:{args.port}; "
            "use it, or give --port N for another",
            file=sys.stderr,
        )
        return 2
    try:
        with viewer_for(args, args.port) as viewer:
            announce(viewer)
            print("Ctrl-C stops it.", flush=True)
            return wait_for_interrupt(viewer)
    except ViewerError as exc:
        print(f"otelhooks ui: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"otelhooks ui: the install failed ({exc})", file=sys.stderr)
        return 1


def which_phoenix() -> str | None:
    """The phoenix program, as a string (for messages)."""
    found = find_phoenix()
    return str(found) if found else shutil.which("phoenix")
