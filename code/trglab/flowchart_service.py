"""Start, stop and query the offline mermaid.ink-compatible flowchart service.

The service is ``mermaid_server/server.js``: a Node HTTP server on 127.0.0.1 that
keeps one headless Debian Chromium page with mermaid.js loaded and answers
mermaid.ink's ``GET /svg/<base64>`` and ``GET /img/<base64>?format=png``, so
that mermaid-py (``MERMAID_INK_SERVER``) renders flowcharts without internet.

Command line::

    python -m trglab.flowchart_service start  [--port N] [--timeout S] [--owner TOKEN]
    python -m trglab.flowchart_service status [--port N]
    python -m trglab.flowchart_service stop   [--port N] [--owner TOKEN]

``start`` reuses a healthy service already on the port instead of starting a
second one, otherwise spawns ``node server.js`` detached (log and pid file under
``_build/``), waits until ``/health`` answers ok, and prints the URL to export as
``MERMAID_INK_SERVER`` on stdout (messages go to stderr).

Two builds may share one service: each passes ``--owner TOKEN`` (e.g. the build
script's ``$$``) to ``start`` and ``stop``; ``stop --owner`` only stops the service
when no other live owner holds it (an owner that is the pid of a dead process no
longer counts). ``stop`` without ``--owner`` always stops it. Port: ``--port``, else
env ``TRGLAB_MERMAID_PORT``, else 3377. Chromium: env ``TRGLAB_CHROMIUM``, else
``/usr/bin/chromium`` or ``chromium`` on PATH. Every failure is one line on
stderr and exit status 1 (2 for bad arguments); ``status`` exits 3 when nothing
is running.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .paths import repo_root

DEFAULT_PORT = 3377
SERVICE_NAME = "trglab-mermaid"
DEFAULT_START_TIMEOUT_S = 60.0


class ServiceError(RuntimeError):
    """The flowchart service could not be started, found or stopped (one-line message)."""


def default_port() -> int:
    """Port from env ``TRGLAB_MERMAID_PORT`` (validated), else 3377."""
    raw = os.environ.get("TRGLAB_MERMAID_PORT")
    return DEFAULT_PORT if raw in (None, "") else check_port(raw)


def check_port(value) -> int:
    """Return ``value`` as a port number in 1..65535, else raise ValueError (one line)."""
    try:
        port = int(str(value).strip())
    except ValueError:
        raise ValueError(f"port must be an integer in 1..65535, got {value!r}") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be an integer in 1..65535, got {value!r}")
    return port


def url_for(port: int) -> str:
    """The ``MERMAID_INK_SERVER`` URL of the local service on ``port``."""
    return f"http://127.0.0.1:{port}"


def server_dir() -> Path:
    return repo_root() / "mermaid_server"


def state_dir() -> Path:
    return repo_root() / "_build"


def pid_file(port: int) -> Path:
    return state_dir() / f"flowchart-service-{port}.pid"


def log_file(port: int) -> Path:
    return state_dir() / f"flowchart-service-{port}.log"


def lease_dir(port: int) -> Path:
    return state_dir() / f"flowchart-service-{port}.owners"


_OWNER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def check_owner(owner) -> str:
    """Return ``owner`` as a lease token (letters, digits, ``_.-``), else raise ValueError."""
    owner = str(owner)
    if not _OWNER_RE.match(owner):
        raise ValueError(f"owner must be letters, digits, '_', '.', '-' (at most 100), got {owner!r}")
    return owner


def live_owners(port: int) -> list[str]:
    """Owners holding the service on ``port``; leases of dead pids are dropped."""
    owners = []
    for lease in sorted(lease_dir(port).glob("*")) if lease_dir(port).is_dir() else []:
        if lease.name.isdigit() and not _alive(int(lease.name)):
            lease.unlink(missing_ok=True)
            continue
        owners.append(lease.name)
    return owners


def find_chromium() -> str | None:
    """Path of the Chromium to drive: env TRGLAB_CHROMIUM, /usr/bin/chromium, or PATH."""
    env = os.environ.get("TRGLAB_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def missing_prerequisite() -> str | None:
    """One line naming what is missing to run the service (node, node_modules, chromium), or None."""
    if shutil.which("node") is None:
        return "node is not on PATH: install Node.js >= 18 (Debian package nodejs)"
    modules = server_dir() / "node_modules"
    for pkg in ("puppeteer-core", "mermaid"):
        if not (modules / pkg / "package.json").is_file():
            return (f"{modules / pkg} is missing: run `make venv` "
                    "(it runs `npm ci` in mermaid_server/ with PUPPETEER_SKIP_DOWNLOAD=1)")
    if find_chromium() is None:
        return ("chromium not found (looked at $TRGLAB_CHROMIUM, /usr/bin/chromium, PATH): "
                "install Debian's chromium and fonts-noto-cjk, or set TRGLAB_CHROMIUM")
    return None


def health(port: int, timeout: float = 2.0) -> dict | None:
    """The service's ``/health`` JSON if *our* service answers ok on ``port``, else None."""
    try:
        with urllib.request.urlopen(url_for(port) + "/health", timeout=timeout) as resp:
            info = json.loads(resp.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    if isinstance(info, dict) and info.get("service") == SERVICE_NAME and info.get("ok"):
        return info
    return None


def _port_answers(port: int) -> bool:
    """True if something accepts HTTP on the port (used to tell 'busy' from 'free')."""
    try:
        urllib.request.urlopen(url_for(port) + "/health", timeout=2.0).close()
        return True
    except urllib.error.HTTPError:
        return True
    except (OSError, urllib.error.URLError):
        return False


def _alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie child of ours is reaped and counts as gone)."""
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _read_pid_file(port: int) -> dict:
    try:
        return json.loads(pid_file(port).read_text())
    except (OSError, ValueError):
        return {}


def _last_log_line(port: int) -> str:
    try:
        lines = [ln.strip() for ln in log_file(port).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    # Debian's chromium wrapper prints shell noise; prefer the server's own lines.
    ours = [ln for ln in lines if ln.startswith("mermaid_server:")]
    return (ours or lines or [""])[-1]


@contextlib.contextmanager
def _lock(port: int):
    """Serialize start/stop for one port across processes (two builds at once)."""
    state_dir().mkdir(parents=True, exist_ok=True)
    with open(state_dir() / f"flowchart-service-{port}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass
class StartResult:
    """What ``start`` did: the URL, the server's pid, whether it reused one, seconds taken."""

    url: str
    pid: int
    reused: bool
    seconds: float
    info: dict


def start(port: int | None = None, timeout: float | None = None, owner: str | None = None) -> StartResult:
    """Start the service on ``port`` (or reuse a healthy one there) and wait until it is healthy.

    Raises ServiceError with one line when prerequisites are missing, the port is
    taken by another program, the server exits, or it is not healthy within
    ``timeout`` seconds (default env TRGLAB_MERMAID_START_TIMEOUT or 60). ``owner``
    (optional) records a lease so that ``stop(owner=...)`` of another build keeps it running.
    """
    port = default_port() if port is None else check_port(port)
    owner = None if owner is None else check_owner(owner)
    if timeout is None:
        timeout = float(os.environ.get("TRGLAB_MERMAID_START_TIMEOUT", DEFAULT_START_TIMEOUT_S))
    t0 = time.perf_counter()
    with _lock(port):
        info = health(port)
        if info:
            _take_lease(port, owner)
            return StartResult(url_for(port), int(info["pid"]), True, time.perf_counter() - t0, info)
        problem = missing_prerequisite()
        if problem:
            raise ServiceError(problem)
        if _port_answers(port):
            raise ServiceError(f"port {port} is in use by another program: pick another with --port "
                               "or TRGLAB_MERMAID_PORT")
        env = dict(os.environ, TRGLAB_CHROMIUM=find_chromium())
        state_dir().mkdir(parents=True, exist_ok=True)
        with open(log_file(port), "w") as log:
            proc = subprocess.Popen(
                ["node", str(server_dir() / "server.js"), "--port", str(port)],
                cwd=server_dir(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True,
            )
        record = {"pid": proc.pid, "port": port, "url": url_for(port), "started": time.time()}
        pid_file(port).write_text(json.dumps(record))
        deadline = time.monotonic() + timeout
        while True:
            code = proc.poll()
            if code is not None:
                pid_file(port).unlink(missing_ok=True)
                raise ServiceError(f"flowchart service exited with status {code}: "
                                   f"{_last_log_line(port) or 'no output'} (log: {log_file(port)})")
            info = health(port, timeout=1.0)
            if info and int(info.get("pid", -1)) == proc.pid:
                break
            if time.monotonic() > deadline:
                last = _last_log_line(port) or "none"
                _terminate(proc.pid, info=None)
                pid_file(port).unlink(missing_ok=True)
                raise ServiceError(f"flowchart service was not healthy within {timeout:g} s "
                                   f"(last log line: {last}; log: {log_file(port)})")
            time.sleep(0.1)
        record["chromium_pid"] = info.get("chromium_pid")
        pid_file(port).write_text(json.dumps(record))
        for stale in lease_dir(port).glob("*") if lease_dir(port).is_dir() else []:
            stale.unlink(missing_ok=True)  # leases of a service that is gone
        _take_lease(port, owner)
        return StartResult(url_for(port), proc.pid, False, time.perf_counter() - t0, info)


def _take_lease(port: int, owner: str | None) -> None:
    if owner is not None:
        lease_dir(port).mkdir(parents=True, exist_ok=True)
        (lease_dir(port) / owner).write_text(f"{time.time()}\n")


def _terminate(pid: int, info: dict | None, grace: float = 5.0) -> None:
    """SIGTERM the server (it closes Chromium), SIGKILL after ``grace`` s, then reap Chromium."""
    if _alive(pid) and "server.js" in _cmdline(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    chrome = (info or {}).get("chromium_pid")
    if chrome and _alive(int(chrome)) and "trglab-mermaid-chromium" in _cmdline(int(chrome)):
        os.kill(int(chrome), signal.SIGKILL)


def stop(port: int | None = None, owner: str | None = None) -> bool:
    """Stop the service on ``port``; True if one was stopped, False if none was running.

    With ``owner``: drop that owner's lease and stop only if no other live owner remains
    (returns False while others still hold it).
    """
    port = default_port() if port is None else check_port(port)
    owner = None if owner is None else check_owner(owner)
    with _lock(port):
        if owner is not None:
            (lease_dir(port) / owner).unlink(missing_ok=True)
            if live_owners(port) and health(port):
                return False
        record = _read_pid_file(port)
        info = health(port) or {}
        pid = int(info.get("pid") or record.get("pid") or 0)
        if not info.get("chromium_pid") and record.get("chromium_pid"):
            info["chromium_pid"] = record["chromium_pid"]
        stopped = False
        if pid and _alive(pid) and "server.js" in _cmdline(pid):
            _terminate(pid, info)
            stopped = True
        pid_file(port).unlink(missing_ok=True)
        if lease_dir(port).is_dir():
            shutil.rmtree(lease_dir(port), ignore_errors=True)
        if health(port, timeout=1.0):
            raise ServiceError(f"flowchart service on port {port} is still answering after stop")
        return stopped


def status(port: int | None = None) -> dict | None:
    """``/health`` of the service on ``port`` or None."""
    port = default_port() if port is None else check_port(port)
    return health(port)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trglab.flowchart_service",
                                     description="offline mermaid.ink-compatible flowchart service")
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument("--port", help="port on 127.0.0.1 (default: $TRGLAB_MERMAID_PORT or 3377)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait for health on start")
    parser.add_argument("--owner", default=None,
                        help="lease token (e.g. the build script's $$): stop --owner keeps a service "
                             "other owners still use")
    args = parser.parse_args(argv)
    try:
        port = default_port() if args.port is None else check_port(args.port)
        owner = None if args.owner is None else check_owner(args.owner)
    except ValueError as exc:
        print(f"flowchart_service: {exc}", file=sys.stderr)
        return 2
    try:
        if args.command == "start":
            res = start(port, timeout=args.timeout, owner=owner)
            how = "reusing running" if res.reused else f"started in {res.seconds:.1f} s,"
            print(f"flowchart service {how} {res.url} (pid {res.pid}, mermaid {res.info.get('mermaid')}); "
                  f"export MERMAID_INK_SERVER={res.url}", file=sys.stderr)
            print(res.url)
            return 0
        if args.command == "stop":
            was = stop(port, owner=owner)
            others = live_owners(port) if owner is not None and not was else []
            what = ("stopped" if was else
                    f"kept running for {len(others)} other owner(s)" if others else "was not running")
            print(f"flowchart service on port {port} {what}", file=sys.stderr)
            return 0
        info = status(port)
        if not info:
            print(f"flowchart service not running on port {port}")
            return 3
        print(f"flowchart service running at {url_for(port)} (pid {info['pid']}, chromium pid "
              f"{info.get('chromium_pid')}, mermaid {info.get('mermaid')}, {info.get('chromium')}, "
              f"ready in {info.get('ready_ms')} ms, {info.get('renders')} renders, up {info.get('uptime_s')} s)")
        return 0
    except ServiceError as exc:
        print(f"flowchart_service: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
